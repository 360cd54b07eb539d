package gitsvc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/lfs/pointer"
)

// LFSObjects tells which Git LFS objects a repository holds, so that a
// push whose LFS pointers name objects never uploaded to it is refused,
// as GitHub refuses one (Options.LFS; docs/design.md §7.10).
type LFSObjects interface {
	// Missing returns the oids the repository does not hold.
	Missing(ctx context.Context, repoID string, oids []string) ([]string, error)
	// OpenFor opens an object the repository holds, for push protection
	// (pushprotect.LFSObjects).
	OpenFor(ctx context.Context, tenant, repoID, oid string) (io.ReadCloser, int64, error)
}

// lfsRepo is one repository's LFS objects as push protection opens them.
type lfsRepo struct {
	objects        LFSObjects
	tenant, repoID string
}

func (l lfsRepo) Open(ctx context.Context, oid string) (io.ReadCloser, int64, error) {
	return l.objects.OpenFor(ctx, l.tenant, l.repoID, oid)
}

// lfsShownMissing bounds the missing oids a refusal lists.
const lfsShownMissing = 10

// DefaultMaxLFSPointers is the default Options.MaxLFSPointers.
const DefaultMaxLFSPointers = 10000

// checkLFS refuses the push in rep when a blob of its pack is an LFS
// pointer whose object the repository does not hold: the client's
// pre-push upload was skipped (--no-verify, GIT_LFS_SKIP_PUSH) or failed,
// and the commit would point at bytes nobody can download. It reads the
// pushed pack's object list, the types and sizes of its objects, and the
// first pointer.PrefixSize bytes of each blob (git-lfs smudges a blob of
// any size whose prefix is a pointer), all bounded by the push itself. A
// blob shaped like a pointer that is none is named in a warning
// (pointer.Shaped): it was scanned as the file it is. A
// store that cannot answer is an error: the push is refused as Busy.
//
// It returns the pushed pack's pointer blobs and the oids they name, for
// push protection to scan the objects (nil when it refused the push).
func (s *Service) checkLFS(ctx context.Context, r Request, dir string, env []string, packIdx string, rep *report) (map[string]pointer.Pointer, error) {
	idx, err := os.Open(packIdx)
	if err != nil {
		return nil, fmt.Errorf("lfs check: %w", err)
	}
	defer idx.Close()
	listed, err := s.opts.Git.Run(ctx, dir, env, idx, "show-index")
	if err != nil {
		return nil, fmt.Errorf("lfs check: list the pack: %w", err)
	}
	var ids strings.Builder
	for _, l := range strings.Split(string(listed), "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			ids.WriteString(f[1] + "\n")
		}
	}
	if ids.Len() == 0 {
		return nil, nil
	}
	checked, err := s.opts.Git.Run(ctx, dir, env, strings.NewReader(ids.String()), "cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)")
	if err != nil {
		return nil, fmt.Errorf("lfs check: object sizes: %w", err)
	}
	var blobs strings.Builder
	for _, l := range strings.Split(string(checked), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[1] != "blob" {
			continue
		}
		if n, err := strconv.Atoi(f[2]); err == nil && n > 0 {
			blobs.WriteString(f[0] + "\n")
		}
	}
	if blobs.Len() == 0 {
		return nil, nil
	}
	// Every blob, not only small ones: git-lfs smudges a blob of any size
	// whose first 1024 bytes are a pointer (pointer.PrefixSize). Only
	// that much of each is kept.
	cmd := s.opts.Git.Command(ctx, dir, env, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(blobs.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("lfs check: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lfs check: read blobs: %w", err)
	}
	pointers, shaped, err := lfsPointers(out)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("lfs check: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("lfs check: read blobs: %w", cmd.Wrap(err))
	}
	for i, id := range shaped {
		if i == 0 {
			rep.detail = append(rep.detail, "warning: these blobs look like Git LFS pointers but are not pointers git-lfs reads; they were checked as the files they are:")
		}
		if i == lfsShownMissing {
			rep.detail = append(rep.detail, fmt.Sprintf("warning:   ... and %d more", len(shaped)-i))
			break
		}
		rep.detail = append(rep.detail, "warning:   "+id)
	}
	if len(shaped) > 0 {
		s.logger.Info("push has malformed Git LFS pointers", "repo", r.Repo, "by", r.Principal, "blobs", len(shaped))
	}
	if len(pointers) == 0 {
		return nil, nil
	}
	oids := make([]string, 0, len(pointers))
	for _, p := range pointers {
		oids = append(oids, p.OID)
	}
	slices.Sort(oids)
	oids = slices.Compact(oids)
	if max := OrDefault(s.opts.MaxLFSPointers, DefaultMaxLFSPointers); max > 0 && len(oids) > max {
		rep.failAll("too many Git LFS objects")
		rep.detail = append(rep.detail, fmt.Sprintf("error: this push names %d Git LFS objects; one push may name at most %d: push the history in parts.", len(oids), max))
		return nil, nil
	}
	missing, err := s.opts.LFS.Missing(ctx, r.Repo, oids)
	if err != nil {
		return nil, &Error{Kind: Busy, Msg: "the Git LFS objects of the push could not be checked; nothing was changed, retry the push", Err: err, RetryAfter: 1}
	}
	if len(missing) == 0 {
		return pointers, nil
	}
	if r.AllowMissingLFS {
		// A mirror's: its objects live elsewhere. Push protection scans
		// the objects the repository holds.
		gone := make(map[string]bool, len(missing))
		for _, oid := range missing {
			gone[oid] = true
		}
		for blob, p := range pointers {
			if gone[p.OID] {
				delete(pointers, blob)
			}
		}
		s.logger.Info("push names Git LFS objects the repository does not hold; allowed by its setting", "repo", r.Repo, "by", r.Principal, "missing", len(missing))
		return pointers, nil
	}
	rep.failAll("missing Git LFS objects")
	rep.detail = append(rep.detail, fmt.Sprintf("error: this push has Git LFS pointers to %d object(s) the server does not have:", len(missing)))
	for i, oid := range missing {
		if i == lfsShownMissing {
			rep.detail = append(rep.detail, fmt.Sprintf("error:   ... and %d more", len(missing)-i))
			break
		}
		rep.detail = append(rep.detail, "error:   "+oid)
	}
	rep.detail = append(rep.detail, "error: upload them first (git lfs push --all <remote> <branch>), then push again.")
	s.logger.Info("push refused: missing Git LFS objects", "repo", r.Repo, "by", r.Principal, "missing", len(missing))
	return nil, nil
}

// lfsPointers reads git cat-file --batch output and returns the blobs
// that are Git LFS pointers, with what they name, and the blobs
// shaped like pointers that are none (pointer.Shaped). It keeps the
// first pointer.PrefixSize bytes of each blob and skips the rest.
func lfsPointers(batch io.Reader) (ptrs map[string]pointer.Pointer, shaped []string, err error) {
	ptrs = map[string]pointer.Pointer{}
	br := bufio.NewReaderSize(batch, 64<<10)
	prefix := make([]byte, pointer.PrefixSize)
	for {
		header, err := br.ReadString('\n')
		if err == io.EOF && header == "" {
			return ptrs, shaped, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read cat-file output: %w", err)
		}
		f := strings.Fields(header)
		if len(f) != 3 {
			return nil, nil, fmt.Errorf("unexpected cat-file header %q", strings.TrimSpace(header))
		}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || n < 0 {
			return nil, nil, fmt.Errorf("unexpected cat-file header %q", strings.TrimSpace(header))
		}
		b := prefix[:min(n, pointer.PrefixSize)]
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, nil, fmt.Errorf("read cat-file output: %w", err)
		}
		rest := n - int64(len(b)) + 1 // and git's newline
		if m, err := io.CopyN(io.Discard, br, rest); err != nil || m != rest {
			return nil, nil, fmt.Errorf("read cat-file output: %s cut short: %w", f[0], cmpErr(err))
		}
		switch p, err := pointer.Decode(b); {
		case err == nil && len(b) > 0:
			ptrs[f[0]] = p
		case pointer.Shaped(b) && n <= pointer.MaxSize:
			shaped = append(shaped, f[0])
		}
	}
}

// cmpErr names a short read that io.CopyN reported as EOF or not at all.
func cmpErr(err error) error {
	if err == nil || err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
