package alerts

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// Page sizes and bounds of List (docs/adr/0090-bounded-serving.md): a
// page costs what it shows, whatever the tenant holds.
const (
	DefaultPageSize = 50
	// MaxPageSize caps the alerts of one page, as GitHub's per_page.
	MaxPageSize = 100
	// ListLocations is how many locations, bypasses and state changes an
	// alert of a list carries: the first locations and bypasses, the
	// newest changes. Get returns the whole record, whose locations the
	// API pages (Alert.LocationCount says how many there are).
	ListLocations = 3
	// defaultMaxExamined bounds the records one List call reads, so
	// that a filter that matches little cannot make one request read
	// every alert of a tenant: the page comes back short, with a Next
	// token.
	defaultMaxExamined = 2000
	// defaultMaxListed bounds the keys one List call lists, counting the
	// ones it skips unread (alerts of repositories the caller may not
	// read, in a tenant-wide list), for the same reason.
	defaultMaxListed = 5 * objstore.ListPageSize
	// defaultMaxReadBytes bounds the bytes of records one List call
	// reads and decodes: a record may be up to 2 MiB (1,000 locations),
	// while a page of a hundred ordinary alerts is well under this.
	defaultMaxReadBytes = 4 << 20
	// defaultMaxPageBytes bounds a page's alerts as they would be encoded
	// (their trimmed size): a page that would grow past it ends early, with
	// a Next token, but always holds one alert.
	defaultMaxPageBytes = 1 << 20
)

// List returns a page of the alerts f selects, in key order (repository
// id, then fingerprint), each trimmed to its first ListLocations
// locations and bypasses and its newest ListLocations state changes
// (LocationCount keeps the total). token is the Next of the previous
// page, or empty for the first; limit is clamped to 1..MaxPageSize (0:
// DefaultPageSize). Alerts never carry their secret.
//
// A page is bounded in every way a request could make it large: alerts
// (limit), records read, bytes read, keys listed and the size of what it
// returns. When a bound ends it early, it is shorter than limit, possibly
// empty, and Next is set.
//
// A tenant-wide list (empty f.RepoID) is one LIST over the tenant's
// prefix: alerts of repositories outside f.Repos are skipped without
// being read (but count as listed).
func (s *Store) List(ctx context.Context, f Filter, token string, limit int) (Page, error) {
	return s.list(ctx, f, token, limit, false)
}

// ListFull is List with every alert whole (all its locations, bypasses
// and history), for the command line's exports; it is bounded the same
// way but for the size of the page.
func (s *Store) ListFull(ctx context.Context, f Filter, token string, limit int) (Page, error) {
	return s.list(ctx, f, token, limit, true)
}

func (s *Store) list(ctx context.Context, f Filter, token string, limit int, full bool) (Page, error) {
	t, err := tenantKey(f.Tenant)
	if err != nil {
		return Page{}, err
	}
	prefix := alertsPrefix + t + "/"
	if f.RepoID != "" {
		if err := checkRepoID(f.RepoID); err != nil {
			return Page{}, err
		}
		prefix = repoPrefix(t, f.RepoID)
	}
	switch f.State {
	case "", StateOpen, StateResolved:
	default:
		return Page{}, fmt.Errorf("%w: state %q: want open or resolved", ErrInvalidArgument, f.State)
	}
	switch {
	case limit <= 0:
		limit = DefaultPageSize
	case limit > MaxPageSize:
		limit = MaxPageSize
	}
	// A list of one state reads that state's hints (states.go) once the
	// index is complete; before, every alert of the prefix.
	byState := false
	if f.State != "" {
		if byState, err = s.stateIndexReady(ctx); err != nil {
			return Page{}, err
		}
	}
	if byState {
		prefix = statePrefix(t, f.State)
		if f.RepoID != "" {
			prefix += f.RepoID + "/"
		}
	}
	after := ""
	if token != "" {
		rel, err := decodeToken(token)
		if err != nil {
			return Page{}, err
		}
		after = prefix + rel
	}

	out := []Alert{}
	examined, listed := 0, 0
	var readBytes, pageBytes int64
	next := func(key string) Page {
		return Page{Alerts: out, Next: encodeToken(strings.TrimPrefix(key, prefix))}
	}
	for {
		infos, err := s.objects.List(ctx, prefix, after, objstore.ListPageSize)
		if err != nil {
			return Page{}, fmt.Errorf("list alerts: %w", err)
		}
		for i, o := range infos {
			prev := after
			after = o.Key
			listed++
			more := i < len(infos)-1 || len(infos) == objstore.ListPageSize
			rel := strings.TrimPrefix(o.Key, prefix)
			if f.RepoID != "" {
				rel = f.RepoID + "/" + rel
			}
			repo, fp, _ := strings.Cut(rel, "/")
			var gen uint64
			valid := validFingerprint(fp)
			if byState {
				repo, fp, gen, valid = parseHint(rel)
			}
			if valid && (f.Repos == nil || f.Repos[repo]) {
				examined++
				rec, n, err := s.readSized(ctx, alertKey(t, repo, fp))
				readBytes += n
				switch {
				case errors.Is(err, objstore.ErrNotFound):
				case err != nil:
					return Page{}, err
				case byState && (rec.State != f.State || rec.StateGen != gen):
					if rec.Gen >= gen {
						// Stale: the record took that generation without
						// this change, or changed since. A write in flight
						// (the record short of gen) keeps its hint.
						_ = s.objects.Delete(ctx, o.Key)
					}
				case f.matches(rec):
					a := rec.alert()
					if !full {
						a.trim()
						size := a.approxSize()
						if len(out) > 0 && pageBytes+size > s.maxPageBytes {
							// This one starts the next page.
							return next(prev), nil
						}
						pageBytes += size
					}
					out = append(out, a)
				}
			}
			if !more {
				return Page{Alerts: out}, nil
			}
			if len(out) == limit || examined >= s.maxExamined || listed >= s.maxListed || readBytes >= s.maxReadBytes {
				return next(after), nil
			}
		}
		if len(infos) < objstore.ListPageSize {
			return Page{Alerts: out}, nil
		}
	}
}

// trim keeps what a list shows of an alert (see List).
func (a *Alert) trim() {
	a.Locations = a.Locations[:min(len(a.Locations), ListLocations)]
	a.Bypasses = a.Bypasses[:min(len(a.Bypasses), ListLocations)]
	a.History = a.History[max(len(a.History)-ListLocations, 0):]
}

// approxSize is about the bytes a encodes to: its strings and a fixed
// allowance for names, numbers and times.
func (a *Alert) approxSize() int64 {
	n := 512 + len(a.Tenant) + len(a.RepoID) + len(a.Fingerprint) + len(a.RuleID) + len(a.Description) +
		len(a.Redacted) + len(a.ResolvedBy) + len(a.Comment)
	for _, r := range a.Rules {
		n += 8 + len(r)
	}
	for _, l := range a.Locations {
		n += 256 + len(l.Commit) + len(l.Path) + len(l.BlobID) + len(l.RuleID) + len(l.Match) + len(l.RunID)
	}
	for _, b := range a.Bypasses {
		n += 128 + len(b.ID) + len(b.By) + len(b.Commit) + len(b.Path)
	}
	for _, e := range a.History {
		n += 128 + len(e.ID) + len(e.By) + len(e.Comment)
	}
	return int64(n)
}

func (f *Filter) matches(r *record) bool {
	if f.State != "" && r.State != f.State {
		return false
	}
	if f.Rule != "" && r.RuleID != f.Rule && !slices.Contains(r.Rules, f.Rule) {
		return false
	}
	return true
}

// Page tokens are the key of the last record examined, relative to the
// listed prefix, in URL-safe base64: opaque to clients, and a token of
// one list used with another only starts at a different place.
func encodeToken(rel string) string { return base64.RawURLEncoding.EncodeToString([]byte(rel)) }

func decodeToken(tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) == 0 || len(b) > 512 {
		return "", fmt.Errorf("%w: malformed page token", ErrInvalidArgument)
	}
	return string(b), nil
}
