package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// header is what hooks need of a log entry: who pushed, when, and the
// ref transitions. It is also what compaction keeps of a folded layer
// that hooks have not delivered yet (hooks/layers/<repoID>/<seq>).
type header struct {
	V           int          `json:"v"`
	ULID        ulid.ULID    `json:"ulid"`
	CreatedAt   time.Time    `json:"created_at"`
	PushedBy    string       `json:"pushed_by"`
	Transitions []transition `json:"transitions"`
}

type transition struct {
	Ref string `json:"ref"`
	Old string `json:"old"`
	New string `json:"new"`
}

func headerOf(h *wal.EntryHeader) *header {
	out := &header{V: 1, ULID: h.ULID, CreatedAt: h.CreatedAt.UTC(), PushedBy: h.PushedBy}
	for _, t := range h.Transitions {
		out.Transitions = append(out.Transitions, transition{t.Ref, t.Old, t.New})
	}
	return out
}

var headerCodec = record.JSON[header]()

func layerKey(repo string, seq uint64) string {
	return fmt.Sprintf("%s%s/%020d", layersPrefix, repo, seq)
}

// pusher is the tenant of a pushed-by field ("alice (token 01J...)").
func pusher(pushedBy string) string {
	name, _, _ := strings.Cut(pushedBy, " (")
	return name
}

// logEvent is one event of one seq: each transition gives a push event,
// preceded by create or delete for a branch or tag created or deleted,
// as GitHub sends them. Part numbers them within the seq, whatever the
// hook subscribes to, so a watermark means the same for every hook.
type logEvent struct {
	Seq   uint64
	Part  int
	Event string
	T     transition
	Hdr   *header
}

// eventsOf lists the events of the seq whose header is h. A pull
// request's refs/pull/<n>/head is the server's to keep, and GitHub sends
// no event for it: its moves are the pull_request event's synchronize.
func eventsOf(seq uint64, h *header) []logEvent {
	var out []logEvent
	for _, t := range h.Transitions {
		if strings.HasPrefix(t.Ref, "refs/pull/") {
			continue
		}
		p := webhook.Push{Ref: t.Ref, Before: t.Old, After: t.New}
		if ev, _, ok, _ := webhook.RefEvent(p); ok {
			out = append(out, logEvent{Seq: seq, Part: len(out), Event: ev, T: t, Hdr: h})
		}
		out = append(out, logEvent{Seq: seq, Part: len(out), Event: EventPush, T: t, Hdr: h})
	}
	return out
}

// readHeader returns the header of seq in repo's log x: the entry's,
// while the index lists the layer, else the one compaction kept. ok is
// false when neither exists: the layer was folded before hooks needed
// it (the hook did not exist yet, or was off).
func (d *Dispatcher) readHeader(ctx context.Context, repo string, x *wal.Index, seq uint64) (*header, bool, error) {
	ck := repo + "/" + strconv.FormatUint(seq, 10)
	if h, ok := d.headers.get(ck); ok {
		return h, true, nil
	}
	var h *header
	if seq > x.CompactedThroughSeq && seq <= x.Seq {
		l := x.Layers[seq-x.CompactedThroughSeq-1]
		eh, err := d.store.opts.Log.ReadEntryHeader(ctx, repo, l.ULID)
		switch {
		case err == nil:
			h = headerOf(eh)
		case errors.Is(err, objstore.ErrNotFound):
			// Folded and collected since the index was read: fall through
			// to the kept copy.
		default:
			return nil, false, err
		}
	}
	if h == nil {
		got, _, err := record.Get(ctx, d.store.opts.Store, headerCodec, layerKey(repo, seq))
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			return nil, false, nil
		case err != nil:
			return nil, false, err
		}
		h = got
	}
	d.headers.put(ck, h)
	return h, true, nil
}

// PreserveEvents keeps, for hooks, the header of the layer at seq that a
// compaction is about to fold (compact.Events): one unconditional PUT of
// bytes only this layer has.
//
// Outcome unknown: an error; the compaction gives up and folds nothing,
// and whatever landed is the same bytes the next attempt writes (or
// removed once every hook is past seq).
func (s *Store) PreserveEvents(ctx context.Context, repo string, seq uint64, layer wal.Layer) error {
	eh, err := s.opts.Log.ReadEntryHeader(ctx, repo, layer.ULID)
	if err != nil {
		return fmt.Errorf("hooks: read the header of seq %d of %s: %w", seq, repo, err)
	}
	b, err := json.Marshal(headerOf(eh))
	if err != nil {
		return err
	}
	if _, err := s.opts.Store.Put(ctx, layerKey(repo, seq), bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("hooks: keep the header of seq %d of %s: %w", seq, repo, err)
	}
	return nil
}

// maxCommitMessage bounds a commit message in a payload; maxGitOutput the
// output read of the git process that lists a push's commits.
const (
	maxCommitMessage = 16 << 10
	maxGitOutput     = 4 << 20
)

// pushBody returns the body of a push event: the transition t of the
// seq whose header is h, in repository repo, with the commits it made
// reachable from the ref listed through git in the node's cache (up to
// webhook.MaxPushCommits, and their count).
func (d *Dispatcher) pushBody(ctx context.Context, repo webhook.Repository, h *header, t transition) ([]byte, error) {
	p := webhook.Push{Ref: t.Ref, Before: t.Old, After: t.New, Pusher: pusher(h.PushedBy), Repo: repo, At: h.CreatedAt}
	if t.New != wal.ZeroID && d.opts.Cache != nil {
		commits, size, forced, err := d.commits(ctx, repo.ID, t)
		if err != nil {
			// The objects are gone (a force-push long ago, repacked) or git
			// failed: the event still goes, without its commits.
			d.logger.WarnContext(ctx, "webhook push payload without its commits", "repo", repo.ID, "ref", t.Ref, "err", err)
		} else {
			p.Commits, p.Size, p.Forced = commits, size, forced
		}
	}
	return webhook.PushPayload(p)
}

// commits lists what t made reachable from its ref, the newest
// webhook.MaxPushCommits oldest first, their count, and whether t was a
// forced update.
func (d *Dispatcher) commits(ctx context.Context, repoID string, t transition) ([]webhook.Commit, int, bool, error) {
	snap, err := d.opts.Cache.Materialize(ctx, repoID)
	if err != nil {
		return nil, 0, false, err
	}
	var revs []string
	if t.Old == wal.ZeroID {
		// Every ref but this one (--all would add HEAD, which may name it).
		revs = []string{t.New, "--not", "--exclude=" + t.Ref, "--glob=refs/*"}
	} else {
		revs = []string{t.New, "--not", t.Old}
	}
	out, err := d.git.Run(ctx, snap.Dir, nil, nil, append([]string{"rev-list", "--count"}, revs...)...)
	if err != nil {
		return nil, 0, false, err
	}
	size, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return nil, 0, false, fmt.Errorf("rev-list --count: %q", out)
	}
	c := d.git.Command(ctx, snap.Dir, nil, append([]string{"log", "--reverse", "-n", strconv.Itoa(webhook.MaxPushCommits),
		"--format=%H%x00%T%x00%an%x00%ae%x00%cn%x00%ce%x00%ct%x00%B%x1e"}, revs...)...)
	var buf capped
	buf.max = maxGitOutput
	c.Stdout = &buf
	if err := c.Run(); err != nil {
		return nil, 0, false, c.Wrap(err)
	}
	var commits []webhook.Commit
	for _, rec := range strings.Split(buf.b.String(), "\x1e") {
		f := strings.SplitN(strings.TrimPrefix(rec, "\n"), "\x00", 8)
		if len(f) != 8 {
			continue
		}
		secs, _ := strconv.ParseInt(f[6], 10, 64)
		msg := f[7]
		if len(msg) > maxCommitMessage {
			msg = msg[:maxCommitMessage]
		}
		commits = append(commits, webhook.Commit{ID: f[0], TreeID: f[1], AuthorName: f[2], AuthorEmail: f[3],
			CommitterName: f[4], CommitterEmail: f[5], Timestamp: time.Unix(secs, 0).UTC(), Message: strings.ToValidUTF8(msg, "\uFFFD")})
	}
	forced := false
	if t.Old != wal.ZeroID {
		c := d.git.Command(ctx, snap.Dir, nil, "merge-base", "--is-ancestor", t.Old, t.New)
		err := c.Run()
		switch {
		case err == nil:
		case gitexec.ExitCode(err) == 1:
			forced = true
		default:
			return nil, 0, false, c.Wrap(err)
		}
	}
	return commits, size, forced, nil
}

// capped keeps the first max bytes written and drops the rest, so that a
// process's output is bounded without breaking its pipe.
type capped struct {
	b   bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
