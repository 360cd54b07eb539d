package gc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
)

// metaReposPrefix is where the metadata layer keeps repository name
// records, meta/repos/<owner>/<name> (docs/design.md §2.3).
const metaReposPrefix = "meta/repos/"

// ErrNoNames is returned by MetaLive when the store holds no repository
// name at all while GC would act on names. An empty namespace over a
// store full of logs is far more likely a misconfiguration (or a
// metadata loss) than a store whose every log is an orphan, so GC refuses
// to treat logs as orphans on that evidence.
var ErrNoNames = errors.New("no repository names in the store")

// MetaLive returns an Options.Live that reads every name record under
// meta/repos/ and resolves it with m.Repo, which skips deleted names.
// Any record it cannot read fails the whole lookup: GC then stops before
// it decides anything, rather than take a named log for an orphan.
func MetaLive(objects objstore.Store, m *meta.Store) func(ctx context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		live := make(map[string]bool)
		records := 0
		err := objstore.Walk(ctx, objects, metaReposPrefix, func(o objstore.Info) error {
			owner, name, ok := strings.Cut(strings.TrimPrefix(o.Key, metaReposPrefix), "/")
			if !ok {
				return nil
			}
			records++
			r, err := m.Repo(ctx, owner, name)
			if errors.Is(err, meta.ErrNotFound) {
				return nil // a deleted name: its log was tombstoned first
			}
			if err != nil {
				return fmt.Errorf("name %s/%s: %w", owner, name, err)
			}
			live[r.ID] = true
			return nil
		})
		if err != nil {
			return nil, err
		}
		if records == 0 {
			return nil, ErrNoNames
		}
		return live, nil
	}
}

// MetaOwners returns an Options.Owners that reads every name record
// under meta/repos/ and maps each live repository's log id to its
// owning tenant. Like MetaLive, any record it cannot read fails the
// whole lookup.
func MetaOwners(objects objstore.Store, m *meta.Store) func(ctx context.Context) (map[string]string, error) {
	return func(ctx context.Context) (map[string]string, error) {
		out := make(map[string]string)
		err := objstore.Walk(ctx, objects, metaReposPrefix, func(o objstore.Info) error {
			owner, name, ok := strings.Cut(strings.TrimPrefix(o.Key, metaReposPrefix), "/")
			if !ok {
				return nil
			}
			r, err := m.Repo(ctx, owner, name)
			if errors.Is(err, meta.ErrNotFound) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("name %s/%s: %w", owner, name, err)
			}
			out[r.ID] = r.Owner
			return nil
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}
