package hooks

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// Key prefixes (doc.go has the whole layout).
const (
	setsPrefix       = "hooks/sets/"
	pendingPrefix    = "hooks/pending/"
	statePrefix      = "hooks/state/"
	queuePrefix      = "hooks/queue/"
	layersPrefix     = "hooks/layers/"
	deliveriesPrefix = "hooks/deliveries/"
)

// Options configure a Store.
type Options struct {
	// Store is the object store, Log the repositories' log over it.
	Store objstore.Store
	Log   *wal.Log
	// Meta resolves repositories for payloads and tenants for the API;
	// nil in tests that need neither.
	Meta *meta.Store
	// Policy refuses literal hook addresses at creation as deliveries
	// would (serve's --webhook-allow-private and allow-list).
	Policy webhook.Policy
	// BaseURL is the server's public URL, for the URLs payloads carry.
	BaseURL string
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Store keeps hooks, their queues and their delivery logs in the object
// store. It is safe for concurrent use and keeps no state of its own:
// every node sees the same hooks at once.
type Store struct {
	opts   Options
	logger *slog.Logger
	now    func() time.Time
	// wake, when set, is told of every enqueued event so that a
	// dispatcher delivers it at once (SetWake).
	wake func(ctx context.Context, w []Work)
}

// Work names a hook that has events to deliver on a stream.
type Work struct {
	Hook   string // hookKey
	Stream string // a repository id, or "~<tenant>"
	Tenant string
	Name   string // the repository's name ("" for a tenant stream)
}

// New returns a Store.
func New(opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Store{opts: opts, logger: opts.Logger, now: opts.Now}
}

// SetWake makes fn hear of every event enqueued from now on (the
// dispatcher's Notify). Call it before the store is shared.
func (s *Store) SetWake(fn func(ctx context.Context, w []Work)) { s.wake = fn }

// setRecord is every hook of one scope.
type setRecord struct {
	V      int          `json:"v"`
	Tenant string       `json:"tenant"`
	Repo   string       `json:"repo,omitempty"`
	Name   string       `json:"name,omitempty"`
	Hooks  []hookRecord `json:"hooks"`
}

// hookRecord is one hook as stored. Secret is the HMAC key deliveries
// are signed with; it is read by the dispatcher only.
type hookRecord struct {
	ID          int64     `json:"id"`
	URL         string    `json:"url"`
	Secret      string    `json:"secret,omitempty"`
	InsecureSSL bool      `json:"insecure_ssl,omitempty"`
	Events      []string  `json:"events"`
	Active      bool      `json:"active"`
	Epoch       uint32    `json:"epoch"`
	ActiveSince time.Time `json:"active_since"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	Failures    int       `json:"failures,omitempty"`
	Disabled    string    `json:"disabled_reason,omitempty"`
	// Op is the nonce of the last change, so that a change whose write
	// had an unknown outcome recognizes itself (record.Update).
	Op string `json:"op,omitempty"`
}

const setVersion = 1

var setCodec = func() record.Codec[setRecord] {
	c := record.JSON[setRecord]()
	c.Max = 8 << 20 // MaxHooks hooks of MaxURLBytes and MaxSecretBytes fit
	inner := c.Decode
	c.Decode = func(b []byte, v *setRecord) error {
		if err := inner(b, v); err != nil {
			return err
		}
		if v.V != setVersion {
			return fmt.Errorf("hook set version %d, want %d", v.V, setVersion)
		}
		return nil
	}
	return c
}()

func (h *hookRecord) hook(s Scope) Hook {
	return Hook{
		ID: h.ID, Scope: s, URL: h.URL, SecretSet: h.Secret != "", InsecureSSL: h.InsecureSSL,
		Events: slices.Clone(h.Events), Active: h.Active, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt,
		Failures: h.Failures, DisabledReason: h.Disabled,
	}
}

func (r *setRecord) scope() Scope { return Scope{Tenant: r.Tenant, Repo: r.Repo, Name: r.Name} }

func (r *setRecord) find(id int64) int {
	return slices.IndexFunc(r.Hooks, func(h hookRecord) bool { return h.ID == id })
}

// storeErr maps what record and objstore say to the package's errors,
// keeping the chain (an unknown outcome still matches
// objstore.ErrOutcomeUnknown).
func storeErr(what string, err error) error {
	var de *record.DecodeError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrNotFound):
		return err
	case errors.As(err, &de):
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}

// readSet returns the scope's set; an absent set is empty.
func (s *Store) readSet(ctx context.Context, key string) (*setRecord, error) {
	rec, _, err := record.Get(ctx, s.opts.Store, setCodec, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return &setRecord{V: setVersion}, nil
	}
	if err != nil {
		return nil, storeErr("read hooks", err)
	}
	return rec, nil
}

// updateSet applies change to the scope's set by compare-and-swap
// (record.Update). change must be idempotent, as record.Update requires:
// given a set that already holds its change, it returns nil.
func (s *Store) updateSet(ctx context.Context, sc Scope, change func(cur *setRecord) (*setRecord, error)) (*setRecord, error) {
	rec, err := record.Update(ctx, s.opts.Store, setCodec, sc.setKey(), record.Options{}, func(cur *setRecord) (*setRecord, error) {
		if cur == nil {
			cur = &setRecord{V: setVersion, Tenant: sc.Tenant, Repo: sc.Repo, Name: sc.Name}
		} else {
			c := *cur
			c.Hooks = slices.Clone(cur.Hooks)
			cur = &c
		}
		return change(cur)
	})
	if err != nil {
		return nil, storeErr("update the hooks of "+sc.String(), err)
	}
	return rec, nil
}

// newHookID returns a random positive id that is exact in JavaScript
// (53 bits), as GitHub's hook ids are numbers.
func newHookID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>11) | 1
}

func newOp() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}

// Create adds a hook to the scope and enqueues its ping, as GitHub sends
// one when a hook is created. sender names who created it (for the
// ping's sender).
func (s *Store) Create(ctx context.Context, sc Scope, in Input, sender string) (Hook, error) {
	if err := sc.check(); err != nil {
		return Hook{}, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	h := hookRecord{ID: newHookID(), Active: true, Epoch: 1, ActiveSince: now, CreatedAt: now, UpdatedAt: now, Events: []string{EventPush}, Op: newOp()}
	if in.Active != nil {
		h.Active = *in.Active
	}
	if err := s.apply(&h, in, true); err != nil {
		return Hook{}, err
	}
	rec, err := s.updateSet(ctx, sc, func(cur *setRecord) (*setRecord, error) {
		if cur.find(h.ID) >= 0 {
			return nil, nil // ours landed (ids are random: another's is all but impossible)
		}
		if len(cur.Hooks) >= MaxHooks {
			return nil, fmt.Errorf("%w: %s has %d hooks already", ErrLimit, sc, MaxHooks)
		}
		cur.Hooks = append(cur.Hooks, h)
		return cur, nil
	})
	if err != nil {
		return Hook{}, err
	}
	out := h.hook(rec.scope())
	if h.Active {
		if err := s.Ping(ctx, sc, h.ID, sender); err != nil {
			// The hook exists; its ping can be asked for again.
			s.logger.WarnContext(ctx, "enqueueing a new webhook's ping failed", "scope", sc.String(), "hook", h.ID, "err", err)
		}
	}
	return out, nil
}

// apply checks in and writes it into h (create: every default filled).
func (s *Store) apply(h *hookRecord, in Input, create bool) error {
	if in.URL != nil || create {
		u := ""
		if in.URL != nil {
			u = strings.TrimSpace(*in.URL)
		}
		if err := checkURL(u, s.opts.Policy); err != nil {
			return err
		}
		h.URL = u
	}
	if in.ContentType != nil && *in.ContentType != "json" {
		return fmt.Errorf("%w: config.content_type %q: only \"json\" is supported", ErrInvalid, *in.ContentType)
	}
	if in.Secret != nil {
		if len(*in.Secret) > MaxSecretBytes {
			return fmt.Errorf("%w: config.secret is longer than %d bytes", ErrInvalid, MaxSecretBytes)
		}
		h.Secret = *in.Secret
	}
	if in.InsecureSSL != nil {
		h.InsecureSSL = *in.InsecureSSL
	}
	if in.Events != nil {
		evs, err := checkEvents(in.Events)
		if err != nil {
			return err
		}
		h.Events = evs
	}
	return nil
}

// List returns the scope's hooks, oldest first.
func (s *Store) List(ctx context.Context, sc Scope) ([]Hook, error) {
	if err := sc.check(); err != nil {
		return nil, err
	}
	rec, err := s.readSet(ctx, sc.setKey())
	if err != nil {
		return nil, err
	}
	out := make([]Hook, 0, len(rec.Hooks))
	for i := range rec.Hooks {
		out = append(out, rec.Hooks[i].hook(sc))
	}
	return out, nil
}

// Get returns one hook of the scope.
func (s *Store) Get(ctx context.Context, sc Scope, id int64) (Hook, error) {
	h, err := s.get(ctx, sc, id)
	if err != nil {
		return Hook{}, err
	}
	return h.hook(sc), nil
}

func (s *Store) get(ctx context.Context, sc Scope, id int64) (*hookRecord, error) {
	if err := sc.check(); err != nil {
		return nil, err
	}
	rec, err := s.readSet(ctx, sc.setKey())
	if err != nil {
		return nil, err
	}
	i := rec.find(id)
	if i < 0 {
		return nil, fmt.Errorf("%w: hook %d of %s", ErrNotFound, id, sc)
	}
	return &rec.Hooks[i], nil
}

// Update changes what in sets. Turning a hook on again (active) starts it
// afresh: it gets the events from then on, as GitHub's hooks do, and its
// failure count and reason are cleared.
func (s *Store) Update(ctx context.Context, sc Scope, id int64, in Input) (Hook, error) {
	if err := sc.check(); err != nil {
		return Hook{}, err
	}
	op := newOp()
	now := s.now().UTC().Truncate(time.Millisecond)
	var out hookRecord
	rec, err := s.updateSet(ctx, sc, func(cur *setRecord) (*setRecord, error) {
		i := cur.find(id)
		if i < 0 {
			return nil, fmt.Errorf("%w: hook %d of %s", ErrNotFound, id, sc)
		}
		if cur.Hooks[i].Op == op {
			out = cur.Hooks[i]
			return nil, nil
		}
		h := cur.Hooks[i]
		h.Events = slices.Clone(h.Events)
		if err := s.apply(&h, in, false); err != nil {
			return nil, err
		}
		if in.Active != nil {
			if *in.Active && !h.Active {
				h.Epoch++
				h.ActiveSince = now
				h.Failures, h.Disabled = 0, ""
			}
			h.Active = *in.Active
		}
		h.UpdatedAt, h.Op = now, op
		cur.Hooks[i] = h
		out = h
		return cur, nil
	})
	if err != nil {
		return Hook{}, err
	}
	return out.hook(rec.scope()), nil
}

// Delete removes a hook. Its queue and progress on the scope's own
// stream go with it; a tenant hook's progress on each repository is
// removed by that repository's next compaction (an orphan, read by
// nothing).
func (s *Store) Delete(ctx context.Context, sc Scope, id int64) error {
	if err := sc.check(); err != nil {
		return err
	}
	sent := false
	_, err := s.updateSet(ctx, sc, func(cur *setRecord) (*setRecord, error) {
		i := cur.find(id)
		switch {
		case i < 0 && sent:
			return nil, nil // our delete landed on an earlier attempt
		case i < 0:
			return nil, fmt.Errorf("%w: hook %d of %s", ErrNotFound, id, sc)
		}
		cur.Hooks = slices.Delete(cur.Hooks, i, i+1)
		sent = true
		return cur, nil
	})
	if err != nil {
		return err
	}
	// Best effort: leftovers are read by nothing (the hook is gone).
	key := hookKey(sc, id)
	s.removeStream(ctx, streamOf(sc), key)
	_ = objstore.Walk(ctx, s.opts.Store, deliveriesPrefix+key+"/", func(o objstore.Info) error {
		return s.opts.Store.Delete(ctx, o.Key)
	})
	return nil
}

// Forget removes every hook of a scope whose owner is gone: a deleted
// repository's, or a deleted tenant's, so that a tenant created again
// under the name never inherits them. Their states and queues are read
// by nothing from then on (compaction removes the states it meets).
//
// Outcome unknown: a DELETE that may not have landed; the caller calls
// Forget again (the API does on the next creation of the name).
func (s *Store) Forget(ctx context.Context, sc Scope) error {
	if err := sc.check(); err != nil {
		return err
	}
	if err := s.opts.Store.Delete(ctx, sc.setKey()); err != nil {
		return storeErr("forget the hooks of "+sc.String(), err)
	}
	_ = s.opts.Store.Delete(ctx, pendingKey(streamOf(sc)))
	return nil
}

// removeStream deletes a hook's state and queue on one stream.
func (s *Store) removeStream(ctx context.Context, stream, key string) {
	_ = objstore.Walk(ctx, s.opts.Store, queuePrefix+stream+"/"+key+"/", func(o objstore.Info) error {
		return s.opts.Store.Delete(ctx, o.Key)
	})
	_ = s.opts.Store.Delete(ctx, stateKey(stream, key))
}

// streamOf is the stream a scope's own events go on: the repository, or
// the tenant's.
func streamOf(sc Scope) string {
	if sc.IsRepo() {
		return sc.Repo
	}
	return tenantStream(sc.Tenant)
}

func tenantStream(tenant string) string { return "~" + strings.ToLower(tenant) }

// redact hides what a URL's query may carry (a token some receivers take
// there) in logs.
func redact(u string) string {
	if i := strings.IndexAny(u, "?"); i >= 0 {
		return u[:i] + "?..."
	}
	return u
}
