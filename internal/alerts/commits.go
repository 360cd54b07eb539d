package alerts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/ghost-scm/ghost/internal/objstore"
)

// The commit index (docs/adr/0128-alert-commit-index.md): which alerts a
// commit's locations belong to, so that a pull request's page reads the
// alerts of its own commits and nothing else.
//
//	meta/alertcommits/<tenant>/<repoID>/<commit>/<fp>
//
// An empty key, put before the record write that adds the first location
// of that alert in that commit (as the state hints are). A key is never
// deleted: a location is never removed. A key whose write never landed
// names an alert without that location: the reader checks the record.
const commitsPrefix = "meta/alertcommits/"

// MaxByCommits bounds the alerts ByCommits returns.
const MaxByCommits = 100

func commitPrefix(key, commit string) (string, error) {
	rel, ok := strings.CutPrefix(key, alertsPrefix)
	i := strings.LastIndexByte(rel, '/')
	if !ok || i <= 0 {
		return "", fmt.Errorf("alerts: %q is no alert key", key)
	}
	return commitsPrefix + rel[:i] + "/" + commit + "/", nil
}

// commitsOf is the set of commits r's locations name.
func commitsOf(r *record) map[string]bool {
	out := map[string]bool{}
	if r != nil {
		for _, l := range r.Locations {
			if l.Commit != "" {
				out[l.Commit] = true
			}
		}
	}
	return out
}

// putCommitKeys puts the commit keys of the alert at key for the commits
// next's locations name that had lacked, in order, stopping at the first
// failure (the record write does not go ahead).
func (s *Store) putCommitKeys(ctx context.Context, key string, had map[string]bool, next *record) error {
	for c := range commitsOf(next) {
		if had[c] || !ids.IsObjectID(c) {
			continue
		}
		p, err := commitPrefix(key, c)
		if err != nil {
			return err
		}
		if _, err := s.objects.Put(ctx, p+next.Fingerprint, strings.NewReader(""), 0); err != nil {
			return fmt.Errorf("alerts: commit index: %w", err)
		}
	}
	return nil
}

// ByCommits returns the alerts of repository repoID of tenant with a
// location in one of commits, at most limit (MaxByCommits), newest first,
// and whether there were more: one LIST per commit and a GET per alert.
// Alerts recorded before the index are found once BuildStateIndex has
// run (it writes both).
func (s *Store) ByCommits(ctx context.Context, tenant, repoID string, commits []string, limit int) ([]Alert, bool, error) {
	t, err := tenantKey(tenant)
	if err != nil {
		return nil, false, err
	}
	if err := checkRepoID(repoID); err != nil {
		return nil, false, err
	}
	if limit <= 0 || limit > MaxByCommits {
		limit = MaxByCommits
	}
	want := map[string]bool{}
	var fps []string
	seen := map[string]bool{}
	more := false
	for _, c := range commits {
		if !ids.IsObjectID(c) {
			return nil, false, fmt.Errorf("%w: commit %q", ErrInvalidArgument, c)
		}
		want[c] = true
		prefix := commitsPrefix + t + "/" + repoID + "/" + c + "/"
		infos, err := s.objects.List(ctx, prefix, "", limit+1)
		if err != nil {
			return nil, false, fmt.Errorf("alerts: list %s: %w", prefix, err)
		}
		for _, in := range infos {
			fp := strings.TrimPrefix(in.Key, prefix)
			if !validFingerprint(fp) || seen[fp] {
				continue
			}
			if len(fps) == limit {
				more = true
				break
			}
			seen[fp] = true
			fps = append(fps, fp)
		}
	}
	recs := make([]*record, len(fps))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, fp := range fps {
		g.Go(func() error {
			rec, _, err := s.read(gctx, alertKey(t, repoID, fp))
			switch {
			case errors.Is(err, objstore.ErrNotFound):
				return nil
			case err != nil:
				return err
			}
			recs[i] = rec
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, false, err
	}
	out := make([]Alert, 0, len(recs))
	for _, r := range recs {
		if r == nil {
			continue
		}
		for c := range commitsOf(r) {
			if want[c] {
				out = append(out, r.alert())
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b Alert) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, more, nil
}
