package lfs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// MaxListPage bounds a page of Objects.
const MaxListPage = 100

// Object is one LFS object a repository references.
type Object struct {
	OID  string
	Size int64
}

// Objects returns a page of the LFS objects repository repoID references,
// by oid after after, at most limit (MaxListPage), and the after of the
// next page ("" when none): one LIST of its references and a GET of each
// shown.
func (h *Handler) Objects(ctx context.Context, repoID, after string, limit int) ([]Object, string, error) {
	if limit <= 0 || limit > MaxListPage {
		limit = MaxListPage
	}
	if after != "" && !validOID(after) {
		return nil, "", fmt.Errorf("%w: after %q", ErrBadOID, after)
	}
	prefix := refKey(repoID, "")
	start := ""
	if after != "" {
		start = prefix + after
	}
	infos, err := h.opts.Store.List(ctx, prefix, start, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("lfs: list %s: %w", prefix, err)
	}
	next := ""
	if len(infos) > limit {
		infos = infos[:limit]
		next = strings.TrimPrefix(infos[limit-1].Key, prefix)
	}
	out := make([]Object, len(infos))
	found := make([]bool, len(infos))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, in := range infos {
		oid := strings.TrimPrefix(in.Key, prefix)
		if !validOID(oid) {
			continue
		}
		g.Go(func() error {
			ref, err := h.ref(gctx, repoID, oid)
			switch {
			case errors.Is(err, objstore.ErrNotFound): // removed meanwhile
				return nil
			case err != nil:
				return err
			}
			out[i], found[i] = Object{OID: oid, Size: ref.Size}, true
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	page := out[:0]
	for i, o := range out {
		if found[i] {
			page = append(page, o)
		}
	}
	return page, next, nil
}

// Usage returns the LFS bytes tenant stores, each object counted once
// however many of its repositories reference it (the usage record the
// quota keeps, docs/adr/0129-lfs-gc.md).
func (h *Handler) Usage(ctx context.Context, tenant string) (int64, error) {
	return h.usage(ctx, tenant)
}
