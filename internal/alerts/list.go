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

// Page sizes of List.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
	// defaultMaxExamined bounds the records one List call reads, so
	// that a filter that matches little cannot make one request read
	// every alert of a tenant: the page comes back short, with a Next
	// token.
	defaultMaxExamined = 2000
)

// List returns a page of the alerts f selects, in key order (repository
// id, then fingerprint). token is the Next of the previous page, or empty
// for the first; limit is clamped to 1..MaxPageSize (0: DefaultPageSize).
// Alerts never carry their secret.
//
// A tenant-wide list (empty f.RepoID) is one LIST over the tenant's
// prefix: alerts of repositories outside f.Repos are skipped without
// being read.
func (s *Store) List(ctx context.Context, f Filter, token string, limit int) (Page, error) {
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
	after := ""
	if token != "" {
		rel, err := decodeToken(token)
		if err != nil {
			return Page{}, err
		}
		after = prefix + rel
	}

	out := []Alert{}
	examined := 0
	for {
		infos, err := s.objects.List(ctx, prefix, after, objstore.ListPageSize)
		if err != nil {
			return Page{}, fmt.Errorf("list alerts: %w", err)
		}
		for i, o := range infos {
			after = o.Key
			more := i < len(infos)-1 || len(infos) == objstore.ListPageSize
			rel := strings.TrimPrefix(o.Key, prefix)
			repo, fp := f.RepoID, rel
			if repo == "" {
				repo, fp, _ = strings.Cut(rel, "/")
			}
			if !validFingerprint(fp) || f.Repos != nil && !f.Repos[repo] {
				continue
			}
			examined++
			rec, _, err := s.read(ctx, o.Key)
			switch {
			case errors.Is(err, objstore.ErrNotFound):
				continue
			case err != nil:
				return Page{}, err
			}
			if f.matches(rec) {
				out = append(out, rec.alert())
			}
			if !more {
				return Page{Alerts: out}, nil
			}
			if len(out) == limit || examined >= s.maxExamined {
				return Page{Alerts: out, Next: encodeToken(strings.TrimPrefix(after, prefix))}, nil
			}
		}
		if len(infos) < objstore.ListPageSize {
			return Page{Alerts: out}, nil
		}
	}
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
