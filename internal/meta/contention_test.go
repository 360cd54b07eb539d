package meta

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// rivalStore is a fake (it injects a fault): before every compare-and-swap
// of a key under prefix it rewrites that key itself, as a rival node
// would, so every attempt presents a stale ETag and loses.
type rivalStore struct {
	objstore.Store
	prefix string
}

func (r rivalStore) PutIfMatch(ctx context.Context, key string, body io.Reader, size int64, etag string) (objstore.Info, error) {
	if strings.HasPrefix(key, r.prefix) {
		b, _, err := objstore.ReadAll(ctx, r.Store, key, 1<<20)
		if err != nil {
			return objstore.Info{}, err
		}
		b = append(b, '\n') // the same record, a new ETag
		if _, err := r.Store.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			return objstore.Info{}, err
		}
	}
	return r.Store.PutIfMatch(ctx, key, body, size, etag)
}

// TestRepoUpdatesUnderContention checks that a repository record that
// changes under every attempt is reported as ErrContention (the API
// answers it 503, retry), and never as success or as a client's mistake.
func TestRepoUpdatesUnderContention(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		update func(s *Store) error
	}{
		{"delete", func(s *Store) error { return s.DeleteRepo(ctx, "ann", "r") }},
		{"visibility", func(s *Store) error { return s.SetVisibility(ctx, "ann", "r", true) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objects := memstore.New()
			s := newStore(objects)
			mustTenant(t, s, "ann", KindUser)
			if _, err := s.CreateRepo(ctx, "ann", "r", false); err != nil {
				t.Fatal(err)
			}
			hostile := newStore(rivalStore{Store: objects, prefix: repoKey("ann", "r")})
			err := tc.update(hostile)
			if !errors.Is(err, ErrContention) {
				t.Fatalf("got %v, want ErrContention", err)
			}
			r, err := s.Repo(ctx, "ann", "r")
			if err != nil {
				t.Fatalf("the repository is gone after a refused update: %v", err)
			}
			if r.Public {
				t.Error("the repository became public after a refused update")
			}
		})
	}
}
