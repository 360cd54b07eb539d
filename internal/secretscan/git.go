package secretscan

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/lfs/pointer"
)

// Repo names a git repository to read objects from.
type Repo struct {
	// Dir is the repository (work tree or git dir), passed as git -C.
	Dir string
	// Env is added to git's environment: a receive-pack quarantine passes
	// GIT_OBJECT_DIRECTORY and GIT_ALTERNATE_OBJECT_DIRECTORIES here.
	Env []string
	// Git runs the git processes (nil: "git" from PATH). Every process
	// goes through gitexec, so that none honours replace refs
	// (GIT_NO_REPLACE_OBJECTS) or the host's git configuration: a scan
	// reads the objects a clone gets, not what a refs/replace/ ref
	// substitutes for them (docs/adr/0031-push-protection.md).
	Git *gitexec.Runner
	// Background, when set, runs the processes of ScanObjects and
	// Attribute instead of Git, one at a time per scan. Background
	// scanning passes a runner of gitexec.Background, so that its git
	// processes yield to serving
	// (docs/adr/0051-geometric-checkpoints.md); ScanRepo's rev-list,
	// which feeds another, runs on Git, so that a scan never holds two of
	// the background budget's slots.
	Background *gitexec.Runner
}

// command prepares git with args in the repository. The repository is
// found from Dir (git -C), so Dir may be a work tree or a bare
// repository; stderr is captured (gitexec.Cmd.StderrText).
func (r Repo) command(ctx context.Context, args ...string) *gitexec.Cmd {
	g := r.Git
	if g == nil {
		g = &gitexec.Runner{}
	}
	return g.Command(ctx, "", r.Env, append([]string{"-C", r.Dir}, args...)...)
}

// Pack access settings for the git processes of a whole-history scan,
// which read most of a repository's packs: a delta base cache large
// enough that deep delta chains are not inflated again and again, and
// pack windows mapped a few at a time, so that the pages a process has
// read of a large pack do not all stay resident
// (docs/adr/0036-scanner-on-real-histories.md, "Feeding git"). Since
// blobs are read a file's versions in a row (chainOrder), a 24 MiB
// cache costs no more CPU than 96 MiB and halves the reader's RSS; a
// packedGitLimit below a pack's size makes git map and unmap windows
// over and over (etcd's 160 MiB pack: 60% more CPU at 48 MiB), so it
// stays at 128 MiB (measured in docs/adr/0120-scanner-speed.md).
const (
	deltaBaseCacheLimit = "24m"
	packedGitWindowSize = "32m"
	packedGitLimit      = "128m"
)

// packCommand is command with the pack access settings.
func (r Repo) packCommand(ctx context.Context, args ...string) *gitexec.Cmd {
	return r.command(ctx, append([]string{"-c", "core.deltaBaseCacheLimit=" + deltaBaseCacheLimit,
		"-c", "core.packedGitWindowSize=" + packedGitWindowSize, "-c", "core.packedGitLimit=" + packedGitLimit}, args...)...)
}

// packBackground is background with the pack access settings: the
// reading processes of a whole-history scan, on the node's background
// runner when it has one.
func (r Repo) packBackground(ctx context.Context, args ...string) *gitexec.Cmd {
	return r.background(ctx, append([]string{"-c", "core.deltaBaseCacheLimit=" + deltaBaseCacheLimit,
		"-c", "core.packedGitWindowSize=" + packedGitWindowSize, "-c", "core.packedGitLimit=" + packedGitLimit}, args...)...)
}

// gitError wraps a failed git process's error with its stderr.
func gitError(cmd *gitexec.Cmd, args []string, err error) error {
	return &GitError{Args: args, Stderr: cmd.StderrText(), Err: err}
}

// background prepares git with args like command, on r.Background when
// set.
func (r Repo) background(ctx context.Context, args ...string) *gitexec.Cmd {
	if r.Background == nil {
		return r.command(ctx, args...)
	}
	return r.Background.Command(ctx, "", r.Env, append([]string{"-C", r.Dir}, args...)...)
}

// GitError is a failed git command, with its stderr.
type GitError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *GitError) Error() string {
	return fmt.Sprintf("secretscan: git %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *GitError) Unwrap() error { return e.Err }

// ProgressFunc receives a scan's progress: done so far out of total (total
// is known once enumeration has finished). It is called from one goroutine
// at most every 100ms and once at the end.
type ProgressFunc func(done, total Stats)

// BlobScan holds the outcome of scanning objects: the path-independent
// candidates of the blobs with findings, those of the commit and tag
// messages with findings (Options.Messages), and counters. Turn it into
// findings with Attribute (or AttributeAll) and MessageFindings.
type BlobScan struct {
	e        *Engine
	Stats    Stats
	blobs    map[string][]candidate
	messages map[string]message
	// skipRules holds, for a blob found at no path where some
	// path-restricted rules apply, those rules (bits of e.pathRules).
	skipRules map[string]uint64
	// pointers holds the Git LFS pointer blobs ScanObjects read, by blob
	// id, with the oids they name (LFSPointers).
	pointers map[string]string
	// log is ScanRevs' git log, for AttributeAll when its revisions are
	// logRevs; nil after ScanObjects.
	log     *os.File
	logRevs []string
}

// Close releases the log ScanRevs kept for attribution. A BlobScan that
// is not closed keeps a file descriptor until it is garbage.
func (s *BlobScan) Close() error {
	if s.log == nil {
		return nil
	}
	err := s.log.Close()
	s.log = nil
	return err
}

// message is the candidates of one commit or tag object.
type message struct {
	source Source // SourceCommitMessage or SourceTagMessage
	cands  []candidate
}

// FindingBlobs is the number of blobs with at least one candidate.
func (s *BlobScan) FindingBlobs() int { return len(s.blobs) }

// LFSPointers returns the Git LFS pointer blobs among the objects
// ScanObjects read, by blob id, with the oids of the objects they name:
// the scanner opens those objects and scans them with ScanLFS, since
// git holds only the pointer of a file LFS tracks. A whole-history scan
// (ScanRevs) does not collect them.
func (s *BlobScan) LFSPointers() map[string]string { return s.pointers }

// ScanLFS scans content, the Git LFS object that the pointer blob id
// names, as that blob's content: its candidates join the blob's, so
// AttributeAll places them at the commits and paths that add the
// pointer, as it places a blob's own, and a version of the file that
// keeps a secret its previous version had is not reported again. The
// lines are the object's. Oversized content is counted as skipped, and
// binary content as a blob's is (Options.SkipBinary). It returns what it
// scanned, which s.Stats counts too.
func (s *BlobScan) ScanLFS(id string, content []byte) Stats {
	e := s.e
	var st Stats
	st.Blobs++
	st.Bytes += int64(len(content))
	switch {
	case e.opts.MaxBlobSize > 0 && int64(len(content)) > e.opts.MaxBlobSize:
		st.LargeSkipped++
		st.LargeBytes += int64(len(content))
	case e.opts.SkipBinary && isBinary(content):
		st.BinarySkipped++
	default:
		if isBinary(content) {
			st.BinaryScanned++
		}
		st.BlobsScanned++
		st.BytesScanned += int64(len(content))
		if cs := e.scanSkipping(content, s.skipRules[id]); len(cs) > 0 {
			s.blobs[id] = append(s.blobs[id], cs...)
		}
	}
	s.Stats.Add(st)
	return st
}

// FindingMessages is the number of commit and tag messages with at least
// one candidate.
func (s *BlobScan) FindingMessages() int { return len(s.messages) }

// ScanRepo scans every blob reachable from any ref of repo, each once
// (and, with Options.Messages, every commit and tag message): ScanRevs
// of --all.
func (e *Engine) ScanRepo(ctx context.Context, repo Repo, progress ProgressFunc) (*BlobScan, error) {
	return e.ScanRevs(ctx, repo, nil, progress)
}

// ScanRevs scans every blob reachable from the commits revs select (git
// revision arguments; nil means --all), each once, and with
// Options.Messages their commit and tag messages. It reads the history's
// diffs first (one git log --raw, kept for Attribute): a blob found only
// at paths the global allowlist excludes is never read, and a rule
// restricted to paths runs only on blobs found at one of them
// (docs/adr/0036-scanner-on-real-histories.md). Blobs are then read in
// pack order. With --all, blobs reached only through refs to trees and
// blobs are scanned too, whatever their path. Close the BlobScan when
// done with it.
func (e *Engine) ScanRevs(ctx context.Context, repo Repo, revs []string, progress ProgressFunc) (*BlobScan, error) {
	all := revs == nil
	if all {
		revs = []string{"--all"}
	}
	h, err := e.readHistory(ctx, repo, revs)
	if err != nil {
		return nil, err
	}
	s := &BlobScan{e: e, blobs: make(map[string][]candidate), messages: make(map[string]message),
		log: h.log, logRevs: revs}
	fail := func(err error) (*BlobScan, error) {
		s.Close()
		return nil, err
	}
	if all {
		if err := e.addTreeRefBlobs(ctx, repo, h); err != nil {
			return fail(err)
		}
	}
	var ids strings.Builder
	bases := make(map[oidKey]oidKey)
	for _, k := range sortedKeys(h.blobs) {
		b := h.blobs[k]
		if b.flags == 0 {
			s.Stats.PathSkipped++
			continue
		}
		if !e.opts.WholeBlobs && b.baseState == baseOne && b.flags&blobMustScan == 0 {
			if base := h.blobs[b.base]; base != nil && base.flags != 0 {
				bases[k] = b.base
			}
		}
		id := hexOID(k)
		for i, r := range e.pathOut {
			if i < 64 && b.pathOnly&(1<<i) != 0 {
				s.blobs[id] = append(s.blobs[id], candidate{rule: r, pathOnly: true})
			}
		}
		if b.pathRules != e.allPathRules {
			if s.skipRules == nil {
				s.skipRules = make(map[string]uint64)
			}
			s.skipRules[id] = e.allPathRules &^ b.pathRules
		}
		ids.WriteString(id)
		ids.WriteByte('\n')
	}
	h.blobs = nil
	if e.opts.Messages {
		if err := e.messageObjects(ctx, repo, revs, &ids); err != nil {
			return fail(err)
		}
	}
	list, err := os.CreateTemp("", "ghost-scan-*")
	if err != nil {
		return fail(fmt.Errorf("secretscan: %w", err))
	}
	defer os.Remove(list.Name())
	defer list.Close()
	objs, err := e.enumerateObjects(ctx, repo, strings.NewReader(ids.String()), s)
	if err != nil {
		return fail(err)
	}
	ids.Reset()
	if err := packOrder(ctx, repo, objs); err != nil {
		return fail(err)
	}
	objs, plan := chainOrder(objs, bases)
	w := bufio.NewWriter(list)
	for _, o := range objs {
		w.WriteString(hexOID(o.key))
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return fail(fmt.Errorf("secretscan: write object list: %w", err))
	}
	if _, err := list.Seek(0, io.SeekStart); err != nil {
		return fail(fmt.Errorf("secretscan: %w", err))
	}
	if err := e.scanList(ctx, repo, list, s, progress, plan); err != nil {
		return fail(err)
	}
	s.inherit(objs, plan)
	return s, nil
}

// addTreeRefBlobs adds the blobs reachable from refs to trees and blobs
// (TreeAndBlobRefs): no commit adds them, so the log does not name them.
// They are scanned whatever their path.
func (e *Engine) addTreeRefBlobs(ctx context.Context, repo Repo, h *logState) error {
	refs, err := TreeAndBlobRefs(ctx, repo)
	if err != nil || len(refs) == 0 {
		return err
	}
	var in strings.Builder
	for _, r := range refs {
		in.WriteString(r.Tip + "\n")
	}
	args := []string{"rev-list", "--objects", "--stdin", "--no-walk"}
	cmd := repo.packCommand(ctx, args...)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		return gitError(cmd, args, err)
	}
	cache := make(map[string]pathVerdict)
	for line := range strings.Lines(string(out)) {
		id, path, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		k, ok := keyOf(id)
		if !ok {
			continue
		}
		e.addPath(h, k, path, cache)
		h.blobs[k].flags |= blobMustScan
	}
	return nil
}

// messageObjects adds the commits and tags revs reach to ids (with
// Options.Messages): git rev-list --objects --filter=tree:0 lists them
// without walking trees.
func (e *Engine) messageObjects(ctx context.Context, repo Repo, revs []string, ids *strings.Builder) error {
	args := append([]string{"rev-list", "--objects", "--filter=tree:0"}, revs...)
	cmd := repo.packCommand(ctx, args...)
	out, err := cmd.Output()
	if err != nil {
		return gitError(cmd, args, err)
	}
	for line := range strings.Lines(string(out)) {
		id, _, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if _, ok := keyOf(id); ok {
			ids.WriteString(id)
			ids.WriteByte('\n')
		}
	}
	return nil
}

// ScanObjects scans the given object ids of repo, each once: the entry
// point for push protection, which passes the objects a push adds and the
// quarantine's object directories in repo.Env, and for scan runs. Blobs
// are scanned; commits and tags too when Options.Messages is set (their
// whole object, as git cat-file -p prints it: headers and message);
// other ids are ignored, and missing ids are an error. An id may be
// followed by a space and a path, as git rev-list --objects prints it;
// path-only rules match that path.
func (e *Engine) ScanObjects(ctx context.Context, repo Repo, ids []string, progress ProgressFunc) (*BlobScan, error) {
	seen := make(map[string]bool, len(ids))
	var b strings.Builder
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			b.WriteString(id)
			b.WriteByte('\n')
		}
	}
	return e.scanFrom(ctx, repo, strings.NewReader(b.String()), progress)
}

// scanFrom enumerates the objects named by ids ("oid[ path]" lines) into a
// temporary file of objects to scan — memory stays flat however long the
// history, and the totals are known before scanning for the progress
// bar's ETA — then streams them through one git cat-file --batch.
func (e *Engine) scanFrom(ctx context.Context, repo Repo, ids io.Reader, progress ProgressFunc) (*BlobScan, error) {
	s := &BlobScan{e: e, blobs: make(map[string][]candidate), messages: make(map[string]message), pointers: make(map[string]string)}
	list, err := os.CreateTemp("", "ghost-scan-*")
	if err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	defer os.Remove(list.Name())
	defer list.Close()
	if err := e.enumerate(ctx, repo, ids, list, s); err != nil {
		return nil, err
	}
	if _, err := list.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	if err := e.scanList(ctx, repo, list, s, progress, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// enumerate runs git cat-file --batch-check over ids and writes the oids of
// the objects to scan to list, one a line. Oversized objects are counted
// here and never read; path-only rules are matched against the path
// rev-list gave the blob.
func (e *Engine) enumerate(ctx context.Context, repo Repo, ids io.Reader, list io.Writer, s *BlobScan) error {
	args := []string{"cat-file", "--batch-check=%(objecttype) %(objectname) %(objectsize) %(rest)"}
	cmd := repo.background(ctx, args...)
	cmd.Stdin = ids
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("secretscan: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("secretscan: start git cat-file: %w", err)
	}
	w := bufio.NewWriter(list)
	br := bufio.NewReaderSize(out, 64<<10)
	var perr error
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			perr = fmt.Errorf("secretscan: read git cat-file: %w", err)
			break
		}
		line = strings.TrimSuffix(line, "\n")
		f := strings.SplitN(line, " ", 4)
		if len(f) == 2 && f[1] == "missing" {
			perr = fmt.Errorf("secretscan: object %s: %w", f[0], ErrMissingObject)
			break
		}
		if len(f) < 3 {
			continue
		}
		isMessage := (f[0] == "commit" || f[0] == "tag") && e.opts.Messages
		if f[0] != "blob" && !isMessage {
			continue
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size < 0 {
			perr = fmt.Errorf("secretscan: bad git cat-file line %q", line)
			break
		}
		if isMessage {
			s.Stats.Messages++
			s.Stats.MessageBytes += size
		} else {
			s.Stats.Blobs++
			s.Stats.Bytes += size
		}
		if !isMessage && len(f) == 4 && len(e.pathOut) > 0 {
			for _, ri := range e.pathOut {
				if e.cfg.Rules[ri].Path.MatchString(f[3]) {
					s.blobs[f[1]] = append(s.blobs[f[1]], candidate{rule: ri, pathOnly: true})
				}
			}
		}
		if e.opts.MaxBlobSize > 0 && size > e.opts.MaxBlobSize {
			s.Stats.LargeSkipped++
			s.Stats.LargeBytes += size
			continue
		}
		w.WriteString(f[1])
		w.WriteByte('\n')
	}
	if perr != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return perr
	}
	if err := cmd.Wait(); err != nil {
		return gitError(cmd, args, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("secretscan: write object list: %w", err)
	}
	return nil
}

// scanObj is an object ScanRevs reads: its id, type and size.
type scanObj struct {
	key  oidKey
	typ  string
	size int64
}

// enumerateObjects runs git cat-file --batch-check over ids (one a line)
// and returns the blobs, commits and tags to read, counting them in
// s.Stats; oversized ones are counted and left out.
func (e *Engine) enumerateObjects(ctx context.Context, repo Repo, ids io.Reader, s *BlobScan) ([]scanObj, error) {
	args := []string{"cat-file", "--batch-check=%(objecttype) %(objectname) %(objectsize)"}
	cmd := repo.packCommand(ctx, args...)
	cmd.Stdin = ids
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("secretscan: start git cat-file: %w", err)
	}
	var objs []scanObj
	br := bufio.NewReaderSize(out, 64<<10)
	var perr error
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			perr = fmt.Errorf("secretscan: read git cat-file: %w", err)
			break
		}
		f := strings.Fields(line)
		if len(f) == 2 && f[1] == "missing" {
			perr = fmt.Errorf("secretscan: object %s: %w", f[0], ErrMissingObject)
			break
		}
		if len(f) != 3 {
			perr = fmt.Errorf("secretscan: bad git cat-file line %q", line)
			break
		}
		key, ok := keyOf(f[1])
		size, err := strconv.ParseInt(f[2], 10, 64)
		if !ok || err != nil || size < 0 {
			perr = fmt.Errorf("secretscan: bad git cat-file line %q", line)
			break
		}
		switch f[0] {
		case "blob":
			s.Stats.Blobs++
			s.Stats.Bytes += size
		case "commit", "tag":
			s.Stats.Messages++
			s.Stats.MessageBytes += size
		default:
			continue
		}
		if e.opts.MaxBlobSize > 0 && size > e.opts.MaxBlobSize {
			s.Stats.LargeSkipped++
			s.Stats.LargeBytes += size
			continue
		}
		objs = append(objs, scanObj{key: key, typ: f[0], size: size})
	}
	if perr != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, perr
	}
	if err := cmd.Wait(); err != nil {
		return nil, gitError(cmd, args, err)
	}
	return objs, nil
}

// packOrder sorts objs by where they are in the repository's packs —
// the order git cat-file reads fastest, and the one in which a delta's
// base comes before it. Objects in no pack (loose, or in a pack this
// reader cannot index) come last.
func packOrder(ctx context.Context, repo Repo, objs []scanObj) error {
	dirs, err := objectDirs(ctx, repo)
	if err != nil {
		return err
	}
	ps := openPacks(dirs)
	defer ps.Close()
	order := make([]int, len(objs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(objs[a].key[:], objs[b].key[:]) })
	ids := make([][]byte, len(objs))
	for i, o := range order {
		ids[i] = objs[o].key.raw()
	}
	sorted := make([]packLoc, len(objs))
	ps.locate(ids, sorted)
	locs := make([]packLoc, len(objs))
	for i, o := range order {
		locs[o] = sorted[i]
	}
	idx := make([]int, len(objs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		la, lb := locs[a], locs[b]
		switch {
		case la.pack < 0 && lb.pack < 0:
			return 0
		case la.pack < 0:
			return 1
		case lb.pack < 0:
			return -1
		case la.pack != lb.pack:
			return int(la.pack - lb.pack)
		case la.off < lb.off:
			return -1
		case la.off > lb.off:
			return 1
		}
		return 0
	})
	sortedObjs := make([]scanObj, len(objs))
	for i, j := range idx {
		sortedObjs[i] = objs[j]
	}
	copy(objs, sortedObjs)
	return nil
}

// ErrMissingObject is returned when a requested object is not in the repo.
var ErrMissingObject = errors.New("object missing")

// reuseMax is the largest blob buffer kept for reuse.
const reuseMax = 1 << 20

type job struct {
	oid  string
	typ  string
	data *[]byte
	// changed, when region is set, are the spans of data's lines that
	// its base lacks: only matches touching them are kept.
	changed []span
	region  bool
}

// scanList streams the objects listed in list through one long-lived
// git cat-file --batch and scans them on e.opts.Workers goroutines. At
// most 2×Workers+1 objects are in memory at once. A plan (ScanRevs',
// in list order) marks a whole-history scan, with its pack settings
// (packCommand), and says which blobs are scanned only where they
// differ from their base; without one (push protection, scan runs)
// every blob is scanned whole and the reader keeps the small pack
// settings below.
func (e *Engine) scanList(ctx context.Context, repo Repo, list io.Reader, s *BlobScan, progress ProgressFunc, plan *regionPlan) error {
	wholeHistory := plan != nil
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// git's defaults map up to 8 GiB of pack and cache 96 MiB of delta
	// bases; with these limits the reader's RSS stays under ~20 MiB at the
	// same speed, since blobs are read in pack order (measured in
	// docs/adr/0030-secret-scanning-engine.md, "Memory").
	args := []string{"cat-file", "--batch", "--buffer"}
	var cmd *gitexec.Cmd
	if wholeHistory {
		cmd = repo.packBackground(ctx, args...)
	} else {
		args = append([]string{"-c", "core.deltaBaseCacheLimit=4m", "-c", "core.packedGitWindowSize=1m",
			"-c", "core.packedGitLimit=16m"}, args...)
		cmd = repo.background(ctx, args...)
	}
	cmd.Stdin = list // git reads the oids straight from the file
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("secretscan: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("secretscan: start git cat-file --batch: %w", err)
	}

	var (
		// A free list, not a sync.Pool: it holds at most as many buffers
		// as can be in flight, and none over reuseMax, so memory after a
		// large blob goes back to the GC.
		bufs     = make(chan *[]byte, 2*e.opts.Workers+1)
		jobs     = make(chan job, e.opts.Workers)
		mu       sync.Mutex
		wg       sync.WaitGroup
		scanned  atomic.Int64
		sbytes   atomic.Int64
		binary   atomic.Int64
		binScan  atomic.Int64
		messages atomic.Int64
		changed  atomic.Int64
		chBytes  atomic.Int64
	)
	for range e.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e.opts.WorkerSetup != nil {
				e.opts.WorkerSetup()
			}
			for j := range jobs {
				data := *j.data
				switch {
				case j.typ == "commit" || j.typ == "tag":
					// The whole object: a secret in an extra header is
					// as much a leak as one in the message.
					if cs := e.scanContent(data); len(cs) > 0 {
						src := SourceCommitMessage
						if j.typ == "tag" {
							src = SourceTagMessage
						}
						mu.Lock()
						s.messages[j.oid] = message{source: src, cands: cs}
						mu.Unlock()
					}
					messages.Add(1)
				case e.opts.SkipBinary && isBinary(data):
					binary.Add(1)
				default:
					// A blob git would call binary (a NUL byte in its
					// first 8000 bytes) is scanned like text: a NUL must
					// not hide a secret (docs/adr/0035-binary-blobs.md).
					if isBinary(data) {
						binScan.Add(1)
					}
					var cs []candidate
					if j.region {
						changed.Add(1)
						for _, sp := range j.changed {
							chBytes.Add(int64(sp.end - sp.start))
						}
						cs = e.scanChanged(data, s.skipRules[j.oid], j.changed)
					} else {
						cs = e.scanSkipping(data, s.skipRules[j.oid])
					}
					if len(cs) > 0 {
						mu.Lock()
						s.blobs[j.oid] = append(s.blobs[j.oid], cs...)
						mu.Unlock()
					}
					// Any size: git-lfs smudges a blob whose first
					// 1024 bytes are a pointer (pointer.PrefixSize).
					if !wholeHistory {
						if oid, ok := pointer.Parse(data); ok {
							mu.Lock()
							s.pointers[j.oid] = oid
							mu.Unlock()
						}
					}
					scanned.Add(1)
					sbytes.Add(int64(len(data)))
				}
				if cap(*j.data) <= reuseMax {
					select {
					case bufs <- j.data:
					default:
					}
				}
			}
		}()
	}

	total := s.Stats
	snapshot := func() Stats {
		st := total
		st.BlobsScanned, st.BytesScanned, st.BinarySkipped = scanned.Load(), sbytes.Load(), binary.Load()
		st.BinaryScanned, st.MessagesScanned = binScan.Load(), messages.Load()
		st.BlobsChanged, st.BytesChanged = changed.Load(), chBytes.Load()
		return st
	}
	var lastReport time.Time
	report := func(force bool) {
		if progress == nil {
			return
		}
		if now := time.Now(); force || now.Sub(lastReport) >= 100*time.Millisecond {
			lastReport = now
			st := snapshot()
			done := Stats{Blobs: st.BlobsScanned + st.BinarySkipped + st.LargeSkipped, Bytes: st.BytesScanned + st.LargeBytes}
			progress(done, total)
		}
	}

	readErr := func() error {
		br := bufio.NewReaderSize(out, 256<<10)
		lines := newLineSets(plan)
		for pos := 0; ; pos++ {
			hdr, err := br.ReadString('\n')
			if err == io.EOF && hdr == "" {
				return nil
			}
			if err != nil {
				return fmt.Errorf("secretscan: read git cat-file --batch: %w", err)
			}
			oid, typ, size, err := parseBatchHeader(hdr)
			if err != nil {
				return err
			}
			var bp *[]byte
			select {
			case bp = <-bufs:
			default:
				bp = new([]byte)
			}
			if cap(*bp) < size+1 {
				*bp = make([]byte, size+1)
			}
			*bp = (*bp)[:size+1] // content and git's trailing newline
			if _, err := io.ReadFull(br, *bp); err != nil {
				return fmt.Errorf("secretscan: read object %s: %w", oid, err)
			}
			*bp = (*bp)[:size]
			jb := job{oid: oid, typ: typ, data: bp}
			if typ == "blob" {
				jb.changed, jb.region = lines.next(pos, *bp)
			}
			select {
			case jobs <- jb:
			case <-ctx.Done():
				return ctx.Err()
			}
			report(false)
		}
	}()
	close(jobs)
	wg.Wait()
	if readErr != nil {
		cancel()
	}
	werr := cmd.Wait()
	if readErr != nil {
		return readErr
	}
	if werr != nil {
		return gitError(cmd, args, werr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.Stats = snapshot()
	report(true)
	return nil
}

// maxBatchObject bounds the size a git cat-file --batch header may claim,
// so a corrupt stream cannot make the reader allocate without limit.
const maxBatchObject = 1 << 40

// parseBatchHeader decodes git cat-file --batch's "<oid> <type> <size>\n".
func parseBatchHeader(hdr string) (oid, typ string, size int, err error) {
	f := strings.Fields(hdr)
	if len(f) != 3 || !strings.HasSuffix(hdr, "\n") {
		return "", "", 0, fmt.Errorf("secretscan: git cat-file --batch: unexpected header %q", hdr)
	}
	size, err = strconv.Atoi(f[2])
	if err != nil || size < 0 || size > maxBatchObject {
		return "", "", 0, fmt.Errorf("secretscan: git cat-file --batch: bad size in %q", hdr)
	}
	return f[0], f[1], size, nil
}
