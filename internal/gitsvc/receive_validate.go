package gitsvc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/wal"
)

func indexOf(cmds []command, ref string) int {
	for i, c := range cmds {
		if c.Ref == ref {
			return i
		}
	}
	return 0
}

// denyDeleteCurrent refuses to delete the branch HEAD points at, the
// default branch, as git's receive.denyDeleteCurrent does by default:
// HEAD would otherwise move to another branch without anyone asking
// (LocalCopy.Head). GitHub lets a push delete it; ghost does not
// (docs/adr/0110-default-branch.md).
func denyDeleteCurrent(head string, cmds []command, rep *report) {
	for i, c := range cmds {
		if c.isDelete() && c.Ref == head && rep.reasons[i] == "" {
			rep.reasons[i] = "deletion of the current branch prohibited"
			rep.detail = append(rep.detail,
				"error: "+strings.TrimPrefix(head, "refs/heads/")+" is the repository's default branch. To delete it, make another",
				"error: branch the default first (ghost repo set <owner>/<name> --default-branch <branch>).")
		}
	}
}

// checkDF refuses a push that would leave both "a" and "a/b", naming
// each command that would (wal.CheckDF).
func checkDF(refs []wal.Ref, cmds []command, rep *report) {
	final := make(map[string]string, len(refs)+len(cmds))
	for _, r := range refs {
		final[r.Name] = r.ID
	}
	for _, c := range cmds {
		if c.isDelete() {
			delete(final, c.Ref)
		} else {
			final[c.Ref] = c.New
		}
	}
	next := make([]wal.Ref, 0, len(final))
	for name, id := range final {
		next = append(next, wal.Ref{Name: name, ID: id})
	}
	slices.SortFunc(next, func(a, b wal.Ref) int { return strings.Compare(a.Name, b.Name) })
	for i, c := range cmds {
		if c.isDelete() || rep.reasons[i] != "" {
			continue
		}
		var rc *wal.RefConflictError
		if errors.As(wal.CheckDF(next, []wal.Transition{{Ref: c.Ref, Old: c.Old, New: c.New}}), &rc) {
			rep.reasons[i] = "ref conflicts with " + rc.Conflict
		}
	}
}

// unpackError is a pack that does not index: reported as "unpack <reason>".
type unpackError struct {
	reason string
	detail []string
}

func (e *unpackError) Error() string { return "unpack failed: " + e.reason }

// indexPack runs git index-pack --fix-thin --strict on the pack in the
// spool, writing into the quarantine, and returns the pack's name, or ""
// for a pack without objects. --fix-thin appends the bases a thin pack
// left out, so what the log stores is self-contained.
func (s *Service) indexPack(ctx context.Context, dir string, env []string, spool *os.File, off, size int64) (string, error) {
	var hdr [12]byte
	if size-off < int64(len(hdr)) {
		return "", &unpackError{reason: "pack is truncated: no pack header"}
	}
	if _, err := spool.ReadAt(hdr[:], off); err != nil {
		return "", fmt.Errorf("read pack header: %w", err)
	}
	if string(hdr[:4]) != "PACK" {
		return "", &unpackError{reason: "bad pack header"}
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return "", &unpackError{reason: fmt.Sprintf("unsupported pack version %d", v)}
	}
	if binary.BigEndian.Uint32(hdr[8:12]) == 0 {
		return "", nil
	}
	// Delta resolution runs on every core: left to itself, index-pack
	// caps its threads at half the cores on machines with more than
	// three (pack.threads unset), and a push waits on it.
	threads := "--threads=" + strconv.Itoa(runtime.NumCPU())
	cmd := s.opts.Git.Command(ctx, dir, env, "index-pack", "--stdin", "--fix-thin", "--strict", threads)
	// index-pack reads the spool itself, from a descriptor of its own
	// at the pack's offset: no pipe, and no copy through this process.
	// The spool ends where the body did, at size.
	in, err := os.Open(spool.Name())
	if err != nil {
		return "", fmt.Errorf("reopen spool: %w", err)
	}
	defer in.Close()
	if _, err := in.Seek(off, io.SeekStart); err != nil {
		return "", fmt.Errorf("reopen spool: %w", err)
	}
	cmd.Stdin = in
	var out bufferWriter
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", cmd.Wrap(err)
		}
		msg := strings.TrimSpace(cmd.StderrText())
		lines := strings.Split(msg, "\n")
		reason := "index-pack abnormal exit"
		for _, l := range lines {
			if strings.HasPrefix(l, "fatal: ") || strings.HasPrefix(l, "error: ") {
				reason = oneLine(l)
				break
			}
		}
		return "", &unpackError{reason: reason, detail: lines}
	}
	return gitexec.ParsePackName(string(out.Bytes()))
}

// checkObjects verifies, with the quarantine's objects visible, that every
// new id exists, that branches point at commits, and that everything the
// new ids reach is present (the connectivity check git receive-pack does).
//
// A push from a shallow repository that is not complete would need the
// server to record shallow roots, which it never does; git words that
// "shallow update not allowed".
func (s *Service) checkObjects(ctx context.Context, dir string, env []string, cmds []command, shallow bool, rep *report) error {
	var in strings.Builder
	for _, c := range cmds {
		if !c.isDelete() {
			in.WriteString(c.New + "\n")
		}
	}
	out, err := s.opts.Git.Run(ctx, dir, env, strings.NewReader(in.String()), "cat-file", "--batch-check=%(objectname) %(objecttype)")
	if err != nil {
		return fmt.Errorf("check pushed objects: %w", err)
	}
	types := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if id, typ, ok := strings.Cut(l, " "); ok {
			types[id] = typ
		}
	}
	var reachable []int
	for i, c := range cmds {
		if c.isDelete() {
			continue
		}
		typ := types[c.New]
		switch {
		case typ == "" || typ == "missing":
			rep.reasons[i] = "missing necessary objects"
		case strings.HasPrefix(c.Ref, "refs/heads/") && typ != "commit":
			rep.reasons[i] = "branch must point to a commit, not a " + typ
		default:
			reachable = append(reachable, i)
		}
	}
	if len(reachable) == 0 {
		return nil
	}
	connected := func(ids ...string) (bool, error) {
		_, err := s.opts.Git.Run(ctx, dir, env, strings.NewReader(strings.Join(ids, "\n")+"\n"),
			"rev-list", "--objects", "--stdin", "--not", "--all", "--quiet")
		if err == nil {
			return true, nil
		}
		if ctx.Err() != nil {
			return false, err
		}
		return false, nil
	}
	ids := make([]string, len(reachable))
	for k, i := range reachable {
		ids[k] = cmds[i].New
	}
	ok, err := connected(ids...)
	if err != nil || ok {
		return err
	}
	incomplete := "missing necessary objects"
	if shallow {
		incomplete = "shallow update not allowed"
	}
	// Name the culprits (rare path: one walk per ref).
	for _, i := range reachable {
		ok, err := connected(cmds[i].New)
		if err != nil {
			return err
		}
		if !ok {
			rep.reasons[i] = incomplete
		}
	}
	if !rep.failed() {
		rep.failAll(incomplete)
	}
	return nil
}
