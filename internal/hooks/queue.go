package hooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// RepoRef names the repository an event concerns.
type RepoRef struct {
	// Tenant owns it; ID is its log id. Both are required.
	Tenant string
	ID     string
	// Name is its name as displayed; Enqueue looks it up when empty.
	Name string
}

// Event is one event that is not in the log (pushes are: the dispatcher
// reads them there), for the hooks of a repository and of its owner.
// Event sources fill one and call Store.Enqueue; that is the whole API
// (issue 25's pull requests use it as alerts and scans do).
type Event struct {
	// Name is the event as X-GitHub-Event says it: "repository",
	// "secret_scanning_alert", "scan_run", "pull_request", ...
	Name string
	// Repo is the repository the event concerns.
	Repo RepoRef
	// Payload is a JSON object of the event's own fields, in GitHub's
	// shape where GitHub has the event ({"action": "created", "alert":
	// {...}}). Enqueue adds "repository" and "sender". It must never hold
	// a secret a hook's receiver should not see.
	Payload json.RawMessage
	// Sender names who caused the event (a tenant), if anyone.
	Sender string
	// ID, when set, names the event: enqueueing it again with the same ID
	// and At (a retry after an error whose outcome was unknown) queues it
	// once, and its deliveries carry the same delivery id.
	ID string
	// At is when it happened (default: now).
	At time.Time
	// OwnerOnly delivers to the tenant's hooks only: a deleted
	// repository's own hooks went with it.
	OwnerOnly bool
	// Repository, when set, is the repository as the payload shows it
	// (a deleted one can no longer be looked up).
	Repository *webhook.Repository
}

// queued is one waiting event of one hook, hooks/queue/<stream>/<hook>/<id>.
type queued struct {
	V int `json:"v"`
	// GUID is the delivery id every attempt carries.
	GUID  string          `json:"guid"`
	Event string          `json:"event"`
	Body  json.RawMessage `json:"body,omitempty"`
	// Seq, with no Body, asks for the push event of that seq (the test
	// endpoint's "latest push").
	Seq   uint64    `json:"seq,omitempty"`
	Epoch uint32    `json:"epoch"`
	At    time.Time `json:"at"`
	// Redelivery marks an event sent again on request.
	Redelivery bool `json:"redelivery,omitempty"`
}

var queueCodec = func() record.Codec[queued] {
	c := record.JSON[queued]()
	c.Max = 32 << 20
	return c
}()

func queueKey(stream, hook, id string) string { return queuePrefix + stream + "/" + hook + "/" + id }

// queueID is the key of an event in a hook's queue: a ULID whose time is
// the event's and whose randomness is derived from its ID, so the same
// event queues under the same key however often it is enqueued.
func queueID(at time.Time, id string) string {
	sum := sha256.Sum256([]byte(id))
	var u ulid.ULID
	_ = u.SetTime(ulid.Timestamp(at))
	_ = u.SetEntropy(sum[:10])
	return u.String()
}

// guid formats 16 bytes of a hash of parts as a UUID, GitHub's form of a
// delivery id. The same parts give the same id on every node, so a
// delivery sent again (a retry, a node that took over) is recognizable.
func guid(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x50 // version 5, name-based
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// pendingMark is hooks/pending/<stream>: a stream whose hooks may have
// events they have not delivered. Its body names the repository, so the
// reconciler can find its hooks.
type pendingMark struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name,omitempty"`
	// At is when it was last written: a push writes its mark before its
	// commit point, so a young mark may stand for a push that has not
	// landed yet.
	At time.Time `json:"at"`
}

func pendingKey(stream string) string { return pendingPrefix + stream }

// MarkPending records that a stream has events for hooks: the push path
// writes it before its commit point (only for a repository with hooks
// that follow the log), Enqueue before it queues. A node that dies right
// after leaves the mark for the reconciler; a mark for nothing costs it
// one look.
//
// Outcome unknown: the mark is one unconditional PUT of the same bytes
// for every push of the repository; a mark that landed unseen is such a
// mark, and the caller treats the error as a failure (the push is
// refused, nothing is queued).
func (s *Store) MarkPending(ctx context.Context, stream, tenant, name string) error {
	b, _ := json.Marshal(pendingMark{Tenant: tenant, Name: name, At: s.now().UTC()})
	if _, err := s.opts.Store.Put(ctx, pendingKey(stream), bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("hooks: mark %s pending: %w", stream, err)
	}
	return nil
}

// Enqueue queues e for every active hook of its repository and owner that
// subscribes to it, and wakes the dispatcher. It returns when the event
// is durable: every hook's copy is stored, and a node that dies after
// leaves it to another.
//
// Outcome unknown: each copy is an unconditional PUT at a key derived
// from the event (queueID), so enqueueing the same event again (same ID
// and At) stores each copy once; an error says some copies may be
// missing, and the caller may enqueue again.
func (s *Store) Enqueue(ctx context.Context, e Event) error {
	if e.Name == "" || e.Name == EventPing {
		return fmt.Errorf("%w: event name %q", ErrInvalid, e.Name)
	}
	if e.Repo.Tenant == "" || wal.CheckRepoID(e.Repo.ID) != nil {
		return fmt.Errorf("%w: event %s names no repository", ErrInvalid, e.Name)
	}
	if e.At.IsZero() {
		e.At = s.now()
	}
	if e.ID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		e.ID = fmt.Sprintf("%x", b)
	}
	var sets []*setRecord
	if !e.OwnerOnly {
		rs, err := s.readSet(ctx, setsPrefix+"r/"+e.Repo.ID)
		if err != nil {
			return err
		}
		sets = append(sets, rs)
	}
	ts, err := s.readSet(ctx, Scope{Tenant: e.Repo.Tenant}.setKey())
	if err != nil {
		return err
	}
	sets = append(sets, ts)
	type target struct {
		key   string
		epoch uint32
	}
	var targets []target
	for _, set := range sets {
		sc := set.scope()
		if sc.Tenant == "" { // an absent set
			continue
		}
		for i := range set.Hooks {
			h := &set.Hooks[i]
			if h.Active && subscribed(h.Events, e.Name) {
				targets = append(targets, target{hookKey(sc, h.ID), h.Epoch})
			}
		}
	}
	if len(targets) == 0 {
		return nil
	}
	repo, err := s.repository(ctx, e)
	if err != nil {
		return err
	}
	body, err := eventBody(e.Payload, repo, e.Sender)
	if err != nil {
		return err
	}
	// The mark first: a node that dies after the copies leaves it.
	if err := s.MarkPending(ctx, e.Repo.ID, e.Repo.Tenant, repo.Name); err != nil {
		return err
	}
	qid := queueID(e.At, e.ID)
	var errs []error
	var work []Work
	for _, t := range targets {
		q := queued{V: 1, GUID: guid(t.key, qid), Event: e.Name, Body: body, Epoch: t.epoch, At: e.At.UTC()}
		if err := s.putQueued(ctx, queueKey(e.Repo.ID, t.key, qid), &q); err != nil {
			errs = append(errs, err)
			continue
		}
		work = append(work, Work{Hook: t.key, Stream: e.Repo.ID, Tenant: e.Repo.Tenant, Name: repo.Name})
	}
	s.notify(ctx, work)
	return errors.Join(errs...)
}

func (s *Store) putQueued(ctx context.Context, key string, q *queued) error {
	b, err := queueCodec.Encode(q)
	if err != nil {
		return err
	}
	if _, err := s.opts.Store.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("hooks: queue an event: %w", err)
	}
	return nil
}

func (s *Store) notify(ctx context.Context, w []Work) {
	if s.wake != nil && len(w) > 0 {
		s.wake(ctx, w)
	}
}

// eventBody adds "repository" and "sender" to payload, a JSON object.
func eventBody(payload json.RawMessage, repo webhook.Repository, sender string) ([]byte, error) {
	fields := map[string]json.RawMessage{}
	if len(payload) > 0 {
		if err := json.Unmarshal(payload, &fields); err != nil {
			return nil, fmt.Errorf("%w: an event's payload must be a JSON object: %w", ErrInvalid, err)
		}
	}
	r, err := json.Marshal(repo)
	if err != nil {
		return nil, err
	}
	fields["repository"] = r
	if sender != "" {
		fields["sender"], _ = json.Marshal(map[string]string{"login": sender})
	}
	return json.Marshal(fields)
}

// repository describes e's repository as payloads show it.
func (s *Store) repository(ctx context.Context, e Event) (webhook.Repository, error) {
	if e.Repository != nil {
		r := *e.Repository
		if r.BaseURL == "" {
			r.BaseURL = s.opts.BaseURL
		}
		return r, nil
	}
	return s.describe(ctx, e.Repo)
}

// describe looks a repository up: its name (when not given), visibility
// and default branch.
func (s *Store) describe(ctx context.Context, ref RepoRef) (webhook.Repository, error) {
	r := webhook.Repository{ID: ref.ID, Owner: ref.Tenant, Name: ref.Name, BaseURL: s.opts.BaseURL}
	if s.opts.Meta != nil {
		if r.Name == "" {
			name, err := s.repoName(ctx, ref.Tenant, ref.ID)
			if err != nil {
				return r, err
			}
			r.Name = name
		}
		m, err := s.opts.Meta.Repo(ctx, ref.Tenant, r.Name)
		switch {
		case err == nil && m.ID == ref.ID:
			r.Owner, r.Name, r.Private = m.Owner, m.Name, !m.Public
		case err == nil, errors.Is(err, meta.ErrNotFound):
			r.Private = true // gone, or the name holds another repository now
		default:
			return r, fmt.Errorf("hooks: %w: %w", ErrUnavailable, err)
		}
	}
	if s.opts.Log != nil {
		x, err := s.opts.Log.Head(ctx, ref.ID)
		switch {
		case err == nil:
			r.DefaultBranch = defaultBranch(x)
		case errors.Is(err, wal.ErrRepoDeleted):
		default:
			return r, fmt.Errorf("hooks: %w: %w", ErrUnavailable, err)
		}
	}
	return r, nil
}

// defaultBranch is the branch HEAD points at, as the cache decides it
// (docs/design.md §5.2 step 6): main, else master, else the first branch.
func defaultBranch(x *wal.Index) string {
	first := ""
	for _, r := range x.Refs {
		name, ok := strings.CutPrefix(r.Name, "refs/heads/")
		if !ok {
			continue
		}
		if name == "main" {
			return name
		}
		if first == "" {
			first = name
		}
	}
	if x.Ref("refs/heads/master") != "" {
		return "master"
	}
	if first == "" {
		return "main"
	}
	return first
}

// repoName finds the name of the tenant's repository with log id id: the
// repository's hook set holds it when it has hooks; otherwise the
// tenant's listing (one LIST a thousand repositories).
func (s *Store) repoName(ctx context.Context, tenant, id string) (string, error) {
	rs, err := s.readSet(ctx, setsPrefix+"r/"+id)
	if err != nil {
		return "", err
	}
	if rs.Name != "" {
		return rs.Name, nil
	}
	after := ""
	for {
		page, next, err := s.opts.Meta.ListRepoPage(ctx, tenant, after, meta.MaxPageSize, false)
		if err != nil {
			return "", fmt.Errorf("hooks: find repository %s of %s: %w: %w", id, tenant, ErrUnavailable, err)
		}
		for _, r := range page {
			if r.ID == id {
				return r.Name, nil
			}
		}
		if next == "" {
			return "", fmt.Errorf("%w: repository %s of %s", ErrNotFound, id, tenant)
		}
		after = next
	}
}

// zen is the ping's line, as GitHub sends one.
const zen = "Design for failure."

// Ping queues a ping for one hook (sent when a hook is created, and on
// request).
func (s *Store) Ping(ctx context.Context, sc Scope, id int64, sender string) error {
	h, err := s.get(ctx, sc, id)
	if err != nil {
		return err
	}
	wh := webhook.Hook{ID: h.ID, URL: h.URL, Events: h.Events, Active: h.Active, InsecureSSL: h.InsecureSSL}
	var repo webhook.Repository
	if sc.IsRepo() {
		if repo, err = s.describe(ctx, RepoRef{Tenant: sc.Tenant, ID: sc.Repo, Name: sc.Name}); err != nil {
			return err
		}
	} else {
		wh.Org = sc.Tenant
	}
	body, err := webhook.PingPayload(wh, repo, sender, zen)
	if err != nil {
		return err
	}
	return s.enqueueOne(ctx, sc, h, queued{Event: EventPing, Body: body})
}

// Test queues the push event of the repository's latest push for one
// hook, as GitHub's "test" does. A hook that does not subscribe to push
// events, or a repository without pushes, gets nothing (and no error).
func (s *Store) Test(ctx context.Context, sc Scope, id int64) error {
	if !sc.IsRepo() {
		return fmt.Errorf("%w: a tenant's hook has no latest push to test with; ping it instead", ErrInvalid)
	}
	h, err := s.get(ctx, sc, id)
	if err != nil {
		return err
	}
	if !subscribed(h.Events, EventPush) {
		return nil
	}
	x, err := s.opts.Log.Head(ctx, sc.Repo)
	if err != nil {
		return storeErr("read the log of "+sc.String(), err)
	}
	if x.Seq == 0 || x.Deleted {
		return nil
	}
	return s.enqueueOne(ctx, sc, h, queued{Event: EventPush, Seq: x.Seq})
}

// enqueueOne queues q for hook h of sc, on the scope's own stream.
func (s *Store) enqueueOne(ctx context.Context, sc Scope, h *hookRecord, q queued) error {
	return s.enqueueOneOn(ctx, sc, streamOf(sc), h, q)
}

// enqueueOneOn queues q for hook h of sc on stream.
func (s *Store) enqueueOneOn(ctx context.Context, sc Scope, stream string, h *hookRecord, q queued) error {
	name := ""
	if stream == streamOf(sc) {
		name = sc.Name
	}
	if err := s.MarkPending(ctx, stream, sc.Tenant, name); err != nil {
		return err
	}
	now := s.now()
	var b [16]byte
	_, _ = rand.Read(b[:])
	qid := queueID(now, fmt.Sprintf("%x", b))
	key := hookKey(sc, h.ID)
	q.V, q.Epoch, q.At = 1, h.Epoch, now.UTC()
	if q.GUID == "" {
		q.GUID = guid(key, qid)
	}
	if err := s.putQueued(ctx, queueKey(stream, key, qid), &q); err != nil {
		return err
	}
	s.notify(ctx, []Work{{Hook: key, Stream: stream, Tenant: sc.Tenant, Name: name}})
	return nil
}

// readQueued returns a queued event; ok is false when it is gone.
func (s *Store) readQueued(ctx context.Context, key string) (*queued, bool, error) {
	q, _, err := record.Get(ctx, s.opts.Store, queueCodec, key)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return q, true, nil
}

func parseULID(s string) (ulid.ULID, error) { return ulid.ParseStrict(s) }
