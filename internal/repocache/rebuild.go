package repocache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/wal"
)

func (c *Cache) bringForward(ctx context.Context, repo string, ev *Event) (*Snapshot, error) {
	lk, err := c.lockRepo(ctx, repo)
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
		// Falling behind a checkpoint is routine (ADR 0050), not damage.
		level := slog.LevelWarn
		if strings.HasPrefix(why, behindCheckpoint) {
			level = slog.LevelInfo
		}
		c.logger.Log(ctx, level, "rebuilding repository cache", "repo", repo, "reason", why)
	}
	tmp, err := os.MkdirTemp(filepath.Join(c.dir, "tmp"), "build-"+repo+"-")
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	defer os.RemoveAll(tmp) // after a successful swap it no longer exists
	if err := c.initRepo(ctx, c.git, tmp); err != nil {
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
	if why := checkAgainstLog(st, x); why != "" {
		return nil, why
	}
	packDir := filepath.Join(dir, "objects", "pack")
	for _, p := range st.base.packs {
		if err := checkPack(packDir, p); err != nil {
			return nil, fmt.Sprintf("packs through seq %d: %v", st.base.seq, err)
		}
	}
	for i, l := range st.layers {
		if l.pack == "" {
			continue
		}
		if err := checkPack(packDir, l.pack); err != nil {
			return nil, fmt.Sprintf("layer seq %d: %v", st.base.seq+uint64(i)+1, err)
		}
	}
	for _, f := range []string{"HEAD", "config", "refs"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return nil, fmt.Sprintf("not a repository: %v", err)
		}
	}
	return st, ""
}

// behindCheckpoint starts the reason for rebuilding a cache that lacks
// layers the log's oldest checkpoint folded.
const behindCheckpoint = "behind the log's checkpoint"

// checkAgainstLog compares what the state recorded with what the log
// still lists, and returns why they disagree ("" when they do not). Layers
// a checkpoint folded are no longer listed, so they are taken as recorded:
// their packs were checked against the log when they were installed.
//
// A cache that lacks some of the layers the log's oldest checkpoint
// folded is rebuilt, which installs the checkpoints: it costs what a cold
// node pays, and it leaves the repository exactly as a cold node's, the
// unreachable objects a full repack dropped included (docs/design.md
// §5.3). A cache past the oldest checkpoint but behind the last one is
// not: it installs the later checkpoints, which hold every object of
// their ranges (applyObjects, docs/adr/0051-geometric-checkpoints.md).
func checkAgainstLog(st *state, x *wal.Index) string {
	ctc := x.CompactedThroughSeq
	if ctc > 0 && st.seq < x.Checkpoints[0].Seq {
		return fmt.Sprintf("%s: cache at seq %d, checkpoint at seq %d", behindCheckpoint, st.seq, x.Checkpoints[0].Seq)
	}
	b := st.base
	if b.checkpoint != ([32]byte{}) {
		// A checkpoint ending at a given seq is unique in a log's history
		// (the index CAS admits one compaction through that seq), so one
		// the log names at that seq with other bytes is not the cache's.
		if c := checkpointAt(x, b.seq); b.seq > ctc || c != nil && c.SHA256 != b.checkpoint {
			return fmt.Sprintf("cache holds a checkpoint at seq %d the log does not name", b.seq)
		}
	}
	if b.last != (ulid.ULID{}) && b.seq > ctc && x.Layers[b.seq-ctc-1].ULID != b.last {
		return fmt.Sprintf("layer seq %d is %s in the cache but %s in the log", b.seq, b.last, x.Layers[b.seq-ctc-1].ULID)
	}
	for i, l := range st.layers {
		seq := b.seq + uint64(i) + 1
		if seq <= ctc {
			continue
		}
		if got := x.Layers[seq-ctc-1].ULID; got != l.id {
			return fmt.Sprintf("layer seq %d is %s in the cache but %s in the log", seq, l.id, got)
		}
	}
	return ""
}

// checkpointAt returns x's checkpoint that ends at seq, or nil.
func checkpointAt(x *wal.Index, seq uint64) *wal.Checkpoint {
	for i := range x.Checkpoints {
		if x.Checkpoints[i].Seq == seq {
			return &x.Checkpoints[i]
		}
	}
	return nil
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

func (c *Cache) initRepo(ctx context.Context, git *gitexec.Runner, dir string) error {
	if _, err := git.Run(ctx, "", nil, nil, "init", "--bare", "--quiet", "--template=", "--initial-branch=main", dir); err != nil {
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
