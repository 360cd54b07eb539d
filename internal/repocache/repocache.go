// Package repocache materializes repositories from the write-ahead log
// into bare git repositories on local disk (docs/design.md §5, "The node cache").
//
// The cache is only ever a function of the log: before serving a read or
// validating a push, a caller asks Materialize to bring a repository
// forward. That reads the index, indexes each missing layer's pack in seq
// order with git index-pack, reconciles every ref to the index snapshot in
// one git update-ref transaction, points HEAD at the default branch and
// records the applied seq. Anything the cache holds that the log does not
// explain (a seq ahead of the log, a layer list that differs, a missing,
// truncated or overwritten pack, a missing or garbled state file), and a
// cache that looked sound but could not be brought forward, makes it
// rebuild the repository from scratch in a temporary directory and swap it
// in, so a wiped, stale, damaged or hand-edited cache heals itself and the
// cache is never ahead of the log.
package repocache

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// ErrCompacted reports a log whose older layers were folded into a
// checkpoint. Replaying checkpoints is not implemented yet, so such a
// repository cannot be materialized (rather than be served wrong).
var ErrCompacted = errors.New("repository log is compacted (checkpoints are not supported by this cache yet)")

// Options tune a Cache. The zero value is usable.
type Options struct {
	// Git runs git; nil means "git" from PATH.
	Git *gitexec.Runner
	// Logger receives rebuild notices; nil discards them.
	Logger *slog.Logger
	// Observe, when set, is called after every materialization (for
	// metrics). It must be fast and safe for concurrent use.
	Observe func(Event)
	// Timeout bounds one materialization (default 30 minutes). A
	// materialization runs detached from the request that started it,
	// because other requests may be waiting for it.
	Timeout time.Duration
	// VerifyInterval is how often, at most, one repository's packs are
	// checksummed after Suspect (default 1 minute): a client that makes
	// git fail on purpose must not make the node hash a large repository
	// on every request (docs/adr/0016-cache-self-healing.md).
	VerifyInterval time.Duration
}

// Event describes one materialization, for metrics and logs.
type Event struct {
	Repo     string
	Duration time.Duration
	Layers   int // layers indexed by this materialization
	// Installed counts the Layers installed from a stored pack index,
	// without running git index-pack.
	Installed int
	Rebuilt   bool // the repository was rebuilt from scratch
	// Healed is set when verification after Suspect found the cached
	// packs damaged, and the repository was rebuilt for that reason.
	Healed bool
	Err    error
}

// Snapshot is a materialized repository: a bare git repository whose
// objects hold every layer through Index.Seq and whose refs equal
// Index.Refs (as of the materialization; later ones may move it forward).
type Snapshot struct {
	Repo  string
	Dir   string
	Index *wal.Index
	// Healed reports that this materialization verified the repository
	// (after Suspect), found it damaged and rebuilt it from the log: a
	// request that failed on the old copy is worth retrying.
	Healed bool
}

// Cache is a directory of materialized repositories. It is safe for
// concurrent use, and several processes may share one directory: each
// repository's materialization is serialized by a file lock.
type Cache struct {
	dir     string
	log     *wal.Log
	git     *gitexec.Runner
	logger  *slog.Logger
	observe func(Event)
	timeout time.Duration

	base   context.Context
	cancel context.CancelFunc

	verifyEvery time.Duration
	tmpLock     *os.File // shared lock on tmp/ held while the cache is open
	closeOnce   sync.Once

	mu       sync.Mutex
	slots    map[string]*slot
	suspects map[string]bool      // repositories to verify at their next materialization
	verified map[string]time.Time // when each was last verified
}

// slot coalesces materializations of one repository in this process.
// Callers that arrive while no materialization has yet read the index join
// the pending flight; callers arriving after it started reading wait for
// the next one, so every caller sees a log state at least as new as the
// moment it asked.
type slot struct {
	mu   sync.Mutex
	next *flight       // the flight new callers join; nil when none is pending
	run  chan struct{} // 1-slot semaphore: one materialization (or adoption) at a time
}

type flight struct {
	done chan struct{}
	snap *Snapshot
	err  error
}

// New returns a cache rooted at dir, creating it if needed, and removes
// the leftovers of a crash (push spools, quarantines, half-built
// repositories) from its tmp directory: all of them when no other process
// has the directory open (a node owns its cache), otherwise those older
// than an hour. Call Close when done.
func New(dir string, log *wal.Log, opts Options) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("repocache: empty cache directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("repocache: %w", err)
	}
	if opts.Git == nil {
		opts.Git = &gitexec.Runner{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Minute
	}
	if opts.VerifyInterval <= 0 {
		opts.VerifyInterval = time.Minute
	}
	base, cancel := context.WithCancel(context.Background())
	c := &Cache{
		dir: abs, log: log, git: opts.Git, logger: opts.Logger, observe: opts.Observe,
		timeout: opts.Timeout, base: base, cancel: cancel, slots: map[string]*slot{},
		verifyEvery: opts.VerifyInterval, suspects: map[string]bool{}, verified: map[string]time.Time{},
	}
	if err := c.ensureDirs(); err != nil {
		cancel()
		return nil, err
	}
	lk, alone, err := claimTemp(filepath.Join(abs, "tmp.lock"))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("repocache: %w", err)
	}
	c.tmpLock = lk
	if alone {
		c.sweepTemp(0)
		if err := shareTemp(lk); err != nil {
			c.Close()
			return nil, fmt.Errorf("repocache: %w", err)
		}
	} else {
		c.sweepTemp(time.Hour)
	}
	return c, nil
}

// Close cancels materializations in flight (callers waiting on them get
// an error) and lets a later process clear the scratch directory.
func (c *Cache) Close() {
	c.closeOnce.Do(func() {
		c.cancel()
		if c.tmpLock != nil {
			c.tmpLock.Close()
		}
	})
}

// Dir returns the cache's root directory.
func (c *Cache) Dir() string { return c.dir }

// TempDir returns a directory for scratch files (push spools, quarantine
// object directories) on the same filesystem as the repositories, so a
// validated pack can be renamed into a repository instead of copied.
func (c *Cache) TempDir() (string, error) {
	d := filepath.Join(c.dir, "tmp")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("repocache: %w", err)
	}
	return d, nil
}

// Git returns the runner the cache uses, so callers run git the same way.
func (c *Cache) Git() *gitexec.Runner { return c.git }

func (c *Cache) repoPath(id string) string { return filepath.Join(c.dir, "repos", id+".git") }
func (c *Cache) lockPath(id string) string { return filepath.Join(c.dir, "locks", id+".lock") }

// ensureDirs (re)creates the layout; it runs before every materialization
// because an operator may wipe the cache while the server runs.
func (c *Cache) ensureDirs() error {
	for _, d := range []string{"repos", "locks", "tmp"} {
		if err := os.MkdirAll(filepath.Join(c.dir, d), 0o755); err != nil {
			return fmt.Errorf("repocache: %w", err)
		}
	}
	return nil
}

func (c *Cache) sweepTemp(age time.Duration) {
	tmp := filepath.Join(c.dir, "tmp")
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range ents {
		if info, err := e.Info(); err == nil && (age == 0 || time.Since(info.ModTime()) > age) {
			_ = os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
}

func (c *Cache) slot(id string) *slot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.slots[id]
	if s == nil {
		s = &slot{run: make(chan struct{}, 1)}
		c.slots[id] = s
	}
	return s
}

// Materialize brings the repository's cache forward to the log's current
// index and returns it. Concurrent calls for one repository collapse into
// one materialization. It fails with wal.ErrRepoDeleted for a tombstoned
// repository (and drops its cache) and with ErrCompacted for a compacted
// log. An absent index is an empty repository.
func (c *Cache) Materialize(ctx context.Context, repo string) (*Snapshot, error) {
	if err := wal.CheckRepoID(repo); err != nil {
		return nil, err
	}
	s := c.slot(repo)
	s.mu.Lock()
	f := s.next
	if f == nil {
		f = &flight{done: make(chan struct{})}
		s.next = f
		go c.fly(s, f, repo)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.snap, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("materialize %s: %w", repo, ctx.Err())
	}
}

func (c *Cache) fly(s *slot, f *flight, repo string) {
	defer close(f.done)
	select {
	case s.run <- struct{}{}:
	case <-c.base.Done():
		f.err = fmt.Errorf("materialize %s: %w", repo, c.base.Err())
		return
	}
	defer func() { <-s.run }()
	// From here on this flight reads the index: later callers must start
	// a new one.
	s.mu.Lock()
	if s.next == f {
		s.next = nil
	}
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(c.base, c.timeout)
	defer cancel()
	start := time.Now()
	ev := Event{Repo: repo}
	defer func() {
		if r := recover(); r != nil {
			f.snap, f.err = nil, fmt.Errorf("materialize %s: panic: %v", repo, r)
		}
		ev.Duration, ev.Err = time.Since(start), f.err
		if c.observe != nil {
			c.observe(ev)
		}
	}()
	f.snap, f.err = c.bringForward(ctx, repo, &ev)
	if f.err != nil {
		f.err = fmt.Errorf("materialize %s: %w", repo, f.err)
	}
}

func (c *Cache) bringForward(ctx context.Context, repo string, ev *Event) (*Snapshot, error) {
	if err := c.ensureDirs(); err != nil {
		return nil, err
	}
	lk, err := lockFile(ctx, c.lockPath(repo))
	if err != nil {
		return nil, err
	}
	defer lk.unlock()

	x, _, err := c.log.ReadIndex(ctx, repo)
	if err != nil {
		return nil, err
	}
	dir := c.repoPath(repo)
	if x.Deleted {
		c.discard(dir)
		return nil, fmt.Errorf("%s: %w", repo, wal.ErrRepoDeleted)
	}
	if x.CompactedThroughSeq > 0 {
		return nil, fmt.Errorf("%s (compacted through seq %d): %w", repo, x.CompactedThroughSeq, ErrCompacted)
	}

	st, why := c.check(dir, x)
	healed := false
	if st != nil {
		// Packs written to since they were last known good, and after a
		// serving failure (Suspect) all packs, are compared with the
		// checksums the log recorded: that finds damage inside a pack,
		// which check cannot see (docs/adr/0016-cache-self-healing.md).
		all := c.takeSuspect(repo)
		if err := c.verify(ctx, dir, x, st, all); err != nil {
			if ctx.Err() != nil {
				if all {
					c.Suspect(repo)
				}
				return nil, err
			}
			st, why, healed = nil, "verification failed: "+err.Error(), true
		}
	}
	if st != nil {
		err := c.apply(ctx, repo, x, dir, st, ev)
		if err == nil {
			c.trustNew(dir, st)
			return &Snapshot{Repo: repo, Dir: dir, Index: x}, nil
		}
		// Neither a cancelled materialization nor a log that cannot be
		// read (a store outage, a corrupt entry) is the cache's fault: a
		// rebuild would read the whole log again and fail the same way.
		var le *logError
		if ctx.Err() != nil || errors.As(err, &le) {
			return nil, err
		}
		// The cache looked sound but could not be brought forward (a
		// damaged pack, a broken repository): start over from the log.
		why = "bringing the cache forward failed: " + err.Error()
	}
	ev.Rebuilt = true
	if why != "" {
		c.logger.Warn("rebuilding repository cache", "repo", repo, "reason", why)
	}
	tmp, err := os.MkdirTemp(filepath.Join(c.dir, "tmp"), "build-"+repo+"-")
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	defer os.RemoveAll(tmp) // after a successful swap it no longer exists
	if err := c.initRepo(ctx, tmp); err != nil {
		return nil, err
	}
	fresh := &state{}
	if err := c.apply(ctx, repo, x, tmp, fresh, ev); err != nil {
		return nil, err
	}
	c.trustNew(tmp, fresh)
	if err := c.swap(tmp, dir); err != nil {
		return nil, err
	}
	ev.Healed = healed
	return &Snapshot{Repo: repo, Dir: dir, Index: x, Healed: healed}, nil
}

// Suspect records that serving repo failed in a way that may be the
// cache's fault: its next materialization verifies every cached pack
// against the sha256 the log recorded for its layer (and each pack index
// against its own checksum), and rebuilds the repository from the log when
// one differs. The cheap check of every materialization reads only the
// ends of each pack, so damage inside one goes unseen until then.
//
// It reports whether that verification will run: not when the repository
// was verified less than VerifyInterval ago, so that requests failing for
// other reasons (a client sending nonsense) cannot make the node hash a
// large repository again and again. See docs/adr/0016-cache-self-healing.md.
func (c *Cache) Suspect(repo string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if t, ok := c.verified[repo]; ok && now.Sub(t) < c.verifyEvery && !c.suspects[repo] {
		return false
	}
	for r, t := range c.verified {
		if now.Sub(t) >= c.verifyEvery {
			delete(c.verified, r)
		}
	}
	c.suspects[repo] = true
	return true
}

// takeSuspect consumes a Suspect mark, recording the verification about
// to run.
func (c *Cache) takeSuspect(repo string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.suspects[repo] {
		return false
	}
	delete(c.suspects, repo)
	c.verified[repo] = time.Now()
	return true
}

// apply brings the repository in dir, whose recorded state is st, to x:
// index the missing layers, reconcile refs, set HEAD.
func (c *Cache) apply(ctx context.Context, repo string, x *wal.Index, dir string, st *state, ev *Event) error {
	for i := st.seq; i < x.Seq; i++ {
		layer := x.Layers[i]
		pack, installed, err := c.indexLayer(ctx, dir, repo, layer)
		if installed {
			ev.Installed++
		}
		if err != nil {
			return fmt.Errorf("layer seq %d (%s): %w", i+1, layer.ULID, err)
		}
		st.layers = append(st.layers, stateLayer{id: layer.ULID, pack: pack})
		st.seq = i + 1
		ev.Layers++
		if err := writeState(dir, st); err != nil {
			return err
		}
	}
	if err := writeState(dir, st); err != nil {
		return err
	}
	if err := c.reconcileRefs(ctx, dir, x.Refs); err != nil {
		return err
	}
	return c.setHead(ctx, dir, x.Refs)
}

// check returns the cache's recorded state if the log explains it, or nil
// and the reason to rebuild.
func (c *Cache) check(dir string, x *wal.Index) (*state, string) {
	if _, err := os.Stat(dir); err != nil {
		return nil, "" // first materialization on this node: nothing to report
	}
	st, err := readState(dir)
	if err != nil {
		return nil, err.Error()
	}
	if st.seq > x.Seq {
		return nil, fmt.Sprintf("cache is at seq %d, ahead of the log at seq %d", st.seq, x.Seq)
	}
	for i, l := range st.layers {
		if x.Layers[i].ULID != l.id {
			return nil, fmt.Sprintf("layer seq %d is %s in the cache but %s in the log", i+1, l.id, x.Layers[i].ULID)
		}
		if l.pack == "" {
			continue
		}
		if err := checkPack(filepath.Join(dir, "objects", "pack"), l.pack); err != nil {
			return nil, fmt.Sprintf("layer seq %d: %v", i+1, err)
		}
	}
	for _, f := range []string{"HEAD", "config", "refs"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return nil, fmt.Sprintf("not a repository: %v", err)
		}
	}
	return st, ""
}

// repoConfig is appended to every cache repository's config. gc.auto=0
// matters: each layer's pack is recorded by name, and nothing but the
// cache itself may add or remove packs.
const repoConfig = `[core]
	logAllRefUpdates = false
[gc]
	auto = 0
[uploadpack]
	allowFilter = true
	allowReachableSHA1InWant = true
`

func (c *Cache) initRepo(ctx context.Context, dir string) error {
	if _, err := c.git.Run(ctx, "", nil, nil, "init", "--bare", "--quiet", "--template=", "--initial-branch=main", dir); err != nil {
		return fmt.Errorf("init cache repository: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("init cache repository: %w", err)
	}
	_, err = f.WriteString(repoConfig)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("init cache repository: %w", err)
	}
	return nil
}

// indexLayer streams one layer's pack from the log into git index-pack and
// returns the pack's name ("" for a layer without objects, e.g. a
// delete-only push).
func (c *Cache) indexLayer(ctx context.Context, dir, repo string, layer wal.Layer) (name string, installed bool, err error) {
	if layer.Size == 0 {
		return "", false, nil
	}
	name, err = c.installStoredIndex(ctx, dir, repo, layer)
	switch {
	case err == nil:
		return name, true, nil
	case ctx.Err() != nil:
		return "", false, err
	case !errors.Is(err, objstore.ErrNotFound):
		// A damaged or mismatched stored index costs an index-pack run,
		// nothing more.
		c.logger.Warn("stored pack index unusable; indexing the pack instead", "repo", repo, "layer", layer.ULID.String(), "err", err)
	}
	rc, _, err := c.log.OpenPack(ctx, repo, layer)
	if err != nil {
		return "", false, &logError{err}
	}
	defer rc.Close()
	src := &logReader{r: rc}
	cmd := c.git.Command(ctx, dir, nil, "index-pack", "--stdin")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", false, err
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return "", false, cmd.Wrap(err)
	}
	_, cpErr := io.Copy(stdin, src)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		if src.err != nil {
			// index-pack failed because the log's pack did not read
			// or verify (git usually notices first).
			return "", false, &logError{errors.Join(cmd.Wrap(err), src.err)}
		}
		return "", false, cmd.Wrap(errors.Join(err, cpErr))
	}
	if cpErr != nil {
		// The pack did not verify against the index (or the read broke):
		// never record it as applied.
		if src.err != nil {
			return "", false, &logError{src.err}
		}
		return "", false, cpErr
	}
	name, err = parsePackName(out.String())
	return name, false, err
}

// logError marks a failure to read the log (as opposed to a failure of
// the local repository), which rebuilding the cache cannot cure.
type logError struct{ err error }

func (e *logError) Error() string { return e.err.Error() }
func (e *logError) Unwrap() error { return e.err }

// logReader remembers the error its reader returned, so that a failed
// copy into git can be attributed to the log or to git.
type logReader struct {
	r   io.Reader
	err error
}

func (l *logReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if err != nil && err != io.EOF {
		l.err = err
	}
	return n, err
}

// installStoredIndex installs a layer's pack together with the pack index
// stored beside its entry (wal.PackIndexKey), which saves running git
// index-pack: a cold node then only copies bytes. Both files are written
// to a scratch directory and checked before they enter the repository:
// the pack's sha256 and size against the log's index (wal.OpenPack), the
// index's own trailing SHA-1, and the structural checks of checkPack,
// which tie the index to this very pack by its checksum. The pack is
// renamed into place before its index, because git finds packs through
// their index. It returns an error matching objstore.ErrNotFound when the
// entry has no stored index.
func (c *Cache) installStoredIndex(ctx context.Context, dir, repo string, layer wal.Layer) (string, error) {
	irc, _, err := c.log.OpenPackIndex(ctx, repo, layer)
	if err != nil {
		return "", err
	}
	defer irc.Close()
	scratch, err := c.TempDir()
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(scratch, "incoming-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	idxSum, err := copyToFile(filepath.Join(tmp, "idx"), irc, sha1.New())
	if err != nil {
		return "", fmt.Errorf("stored pack index: %w", err)
	}
	prc, _, err := c.log.OpenPack(ctx, repo, layer)
	if err != nil {
		return "", err
	}
	defer prc.Close()
	packSum, err := copyToFile(filepath.Join(tmp, "pack"), prc, nil)
	if err != nil {
		return "", fmt.Errorf("pack: %w", err)
	}
	if len(idxSum.tail) != sha1.Size || !bytes.Equal(idxSum.sum, idxSum.tail) {
		return "", errors.New("stored pack index fails its own checksum")
	}
	if len(packSum.tail) != sha1.Size {
		return "", errors.New("pack too short for a checksum")
	}
	name := hex.EncodeToString(packSum.tail)
	base := filepath.Join(tmp, "pack-"+name)
	if err := os.Rename(filepath.Join(tmp, "pack"), base+".pack"); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, "idx"), base+".idx"); err != nil {
		return "", err
	}
	if err := checkPack(tmp, name); err != nil {
		return "", fmt.Errorf("stored pack index does not fit the pack: %w", err)
	}
	final := filepath.Join(dir, "objects", "pack", "pack-"+name)
	if _, err := os.Stat(final + ".idx"); err == nil {
		return name, nil // the same pack is already installed (an identical earlier layer)
	}
	for _, ext := range []string{".pack", ".idx"} {
		if err := os.Rename(base+ext, final+ext); err != nil {
			return "", fmt.Errorf("install pack: %w", err)
		}
	}
	return name, nil
}

// fileSum is what copyToFile saw: the hash of all but the last 20 bytes
// (when a hash was asked for) and those last 20 bytes.
type fileSum struct {
	sum, tail []byte
}

// copyToFile streams r into a new file at path, fsyncs it, and returns the
// hash (h, over everything but the trailing sha1.Size bytes) and that
// trailer, the layout of git's pack and index checksums.
func copyToFile(path string, r io.Reader, h hash.Hash) (fileSum, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o444)
	if err != nil {
		return fileSum{}, err
	}
	t := &trailerWriter{h: h}
	_, err = io.Copy(io.MultiWriter(f, t), r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fileSum{}, err
	}
	out := fileSum{tail: t.tail}
	if h != nil {
		out.sum = h.Sum(nil)
	}
	return out, nil
}

// trailerWriter hashes what it is given except the last sha1.Size bytes,
// which it keeps.
type trailerWriter struct {
	h    hash.Hash
	tail []byte
}

func (t *trailerWriter) Write(p []byte) (int, error) {
	if len(p) >= sha1.Size {
		// What was held back, and all of p but its last bytes, is body:
		// only the trailer-sized tail is ever copied.
		t.hash(t.tail)
		t.hash(p[:len(p)-sha1.Size])
		t.tail = append(t.tail[:0], p[len(p)-sha1.Size:]...)
		return len(p), nil
	}
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - sha1.Size; over > 0 {
		t.hash(t.tail[:over])
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	return len(p), nil
}

func (t *trailerWriter) hash(b []byte) {
	if t.h != nil {
		t.h.Write(b)
	}
}

// parsePackName reads index-pack's output line (gitexec.ParsePackName).
func parsePackName(out string) (string, error) { return gitexec.ParsePackName(out) }

func isHex(s string) bool { return wal.IsObjectID(s) }

// reconcileRefs makes the repository's refs equal to want in one
// update-ref transaction, deleting refs want lacks. Refs edited by hand
// are thereby corrected on every materialization.
func (c *Cache) reconcileRefs(ctx context.Context, dir string, want []wal.Ref) error {
	out, err := c.git.Run(ctx, dir, nil, nil, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return fmt.Errorf("list cached refs: %w", err)
	}
	have := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		id, name, ok := strings.Cut(sc.Text(), " ")
		if ok {
			have[name] = id
		}
	}
	var dels, upds strings.Builder
	wantSet := make(map[string]bool, len(want))
	for _, r := range want {
		wantSet[r.Name] = true
		if have[r.Name] != r.ID {
			fmt.Fprintf(&upds, "update %s %s\n", r.Name, r.ID)
		}
	}
	for name := range have {
		if !wantSet[name] {
			fmt.Fprintf(&dels, "delete %s\n", name)
		}
	}
	if dels.Len() == 0 && upds.Len() == 0 {
		return nil
	}
	_, err = c.git.Run(ctx, dir, nil, strings.NewReader(dels.String()+upds.String()), "update-ref", "--stdin")
	if err == nil || dels.Len() == 0 || upds.Len() == 0 {
		if err != nil {
			return fmt.Errorf("reconcile refs: %w", err)
		}
		return nil
	}
	// One transaction cannot replace "a" by "a/b" in the files backend;
	// deleting first and then updating reaches the same state.
	if _, err := c.git.Run(ctx, dir, nil, strings.NewReader(dels.String()), "update-ref", "--stdin"); err != nil {
		return fmt.Errorf("reconcile refs (deletes): %w", err)
	}
	if _, err := c.git.Run(ctx, dir, nil, strings.NewReader(upds.String()), "update-ref", "--stdin"); err != nil {
		return fmt.Errorf("reconcile refs (updates): %w", err)
	}
	return nil
}

// DefaultBranch picks HEAD's target: main, then master, then the first
// branch in name order, then main for an empty repository.
func DefaultBranch(refs []wal.Ref) string {
	first := ""
	for _, r := range refs {
		if r.Name == "refs/heads/main" {
			return r.Name
		}
	}
	for _, r := range refs {
		if r.Name == "refs/heads/master" {
			return r.Name
		}
		if first == "" && strings.HasPrefix(r.Name, "refs/heads/") {
			first = r.Name
		}
	}
	if first == "" {
		return "refs/heads/main"
	}
	return first
}

func (c *Cache) setHead(ctx context.Context, dir string, refs []wal.Ref) error {
	want := DefaultBranch(refs)
	b, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	if err == nil && strings.TrimSpace(string(b)) == "ref: "+want {
		return nil
	}
	if _, err := c.git.Run(ctx, dir, nil, nil, "symbolic-ref", "HEAD", want); err != nil {
		return fmt.Errorf("set HEAD: %w", err)
	}
	return nil
}

// swap replaces dir by the freshly built tmp. Readers still inside the old
// directory keep their open files; the old tree is removed afterwards.
func (c *Cache) swap(tmp, dir string) error {
	if _, err := os.Stat(dir); err == nil {
		trash := filepath.Join(c.dir, "tmp", "trash-"+randHex())
		if err := os.Rename(dir, trash); err != nil {
			return fmt.Errorf("swap cache: %w", err)
		}
		defer os.RemoveAll(trash)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("swap cache: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("swap cache: %w", err)
	}
	return nil
}

func (c *Cache) discard(dir string) {
	if _, err := os.Stat(dir); err != nil {
		return
	}
	trash := filepath.Join(c.dir, "tmp", "trash-"+randHex())
	if os.Rename(dir, trash) == nil {
		_ = os.RemoveAll(trash)
	}
}

func randHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Adopt installs a pack the caller already indexed (a push's quarantine)
// as the layer at seq, when the cache holds exactly seq-1 layers; it
// saves re-reading the entry just written. It reports whether the pack
// was adopted; when not, the pack is left in place and a later
// Materialize indexes the layer from the log as usual. packHash "" means
// a layer without objects. Refs are not touched: call Materialize after.
func (c *Cache) Adopt(ctx context.Context, repo string, seq uint64, layer ulid.ULID, packDir, packHash string) (bool, error) {
	if err := wal.CheckRepoID(repo); err != nil {
		return false, err
	}
	s := c.slot(repo)
	select {
	case s.run <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-s.run }()
	if err := c.ensureDirs(); err != nil {
		return false, err
	}
	lk, err := lockFile(ctx, c.lockPath(repo))
	if err != nil {
		return false, err
	}
	defer lk.unlock()
	dir := c.repoPath(repo)
	st, err := readState(dir)
	if err != nil || st.seq+1 != seq {
		return false, nil
	}
	if packHash != "" {
		// .idx last: git discovers packs by their index, so a reader never
		// sees an index without its pack.
		for _, ext := range []string{".pack", ".rev", ".idx"} {
			src := filepath.Join(packDir, "pack-"+packHash+ext)
			if _, err := os.Stat(src); err != nil && ext == ".rev" {
				continue
			}
			if err := os.Rename(src, filepath.Join(dir, "objects", "pack", "pack-"+packHash+ext)); err != nil {
				return false, fmt.Errorf("adopt pack: %w", err)
			}
		}
	}
	st.layers = append(st.layers, stateLayer{id: layer, pack: packHash})
	st.seq = seq
	if err := writeState(dir, st); err != nil {
		return false, err
	}
	// The pack is the very file the log committed: known good.
	c.trustNew(dir, st)
	return true, nil
}

// state is what the cache has applied: the layers, in seq order, with the
// pack each produced. It lives in <repo>/ghost-state.
type state struct {
	seq    uint64
	layers []stateLayer
}

type stateLayer struct {
	id   ulid.ULID
	pack string // "" when the layer carried no objects
}

const stateFile = "ghost-state"
const stateMagic = "ghost-cache 1"

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("no cache state: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	bad := func(why string) (*state, error) { return nil, fmt.Errorf("cache state unreadable: %s", why) }
	if len(lines) < 2 || lines[0] != stateMagic {
		return bad("bad magic")
	}
	n, ok := strings.CutPrefix(lines[1], "seq ")
	if !ok {
		return bad("no seq")
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	if err != nil || seq != uint64(len(lines)-2) {
		return bad("seq does not match the layer list")
	}
	st := &state{seq: seq}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "layer" {
			return bad("bad layer line")
		}
		id, err := ulid.ParseStrict(f[1])
		if err != nil {
			return bad("bad layer id")
		}
		sl := stateLayer{id: id}
		if f[2] != "-" {
			if !isHex(f[2]) {
				return bad("bad pack name")
			}
			sl.pack = f[2]
		}
		st.layers = append(st.layers, sl)
	}
	return st, nil
}

// writeState replaces the state file atomically (write, then rename).
func writeState(dir string, st *state) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nseq %d\n", stateMagic, st.seq)
	for _, l := range st.layers {
		p := l.pack
		if p == "" {
			p = "-"
		}
		fmt.Fprintf(&b, "layer %s %s\n", l.id, p)
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write cache state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("write cache state: %w", err)
	}
	return nil
}
