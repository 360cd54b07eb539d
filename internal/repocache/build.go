package repocache

import (
	"context"
	"fmt"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Built names the packs a build installed in its repository.
type Built struct {
	// Checkpoints holds the pack of each checkpoint, in the order given.
	Checkpoints []string
	// Layers holds the pack of each layer by entry ("" for a layer
	// without objects).
	Layers map[ulid.ULID]string
}

// BuildObjects installs the packs of the given checkpoints and layers of
// repo's log, in that order, into a new bare repository at dir, which
// must not exist, and sets no refs. A geometric compaction rolls up
// exactly these packs, so what it reads is proportional to what it
// rolls up, not to the repository
// (docs/adr/0051-geometric-checkpoints.md). Each pack of the log is
// self-contained, so the order only matters for reproducibility.
func (c *Cache) BuildObjects(ctx context.Context, repo string, cks []wal.Checkpoint, layers []wal.Layer, dir string, git *gitexec.Runner) (*Built, error) {
	if git == nil {
		git = c.git
	}
	if err := c.initRepo(ctx, git, dir); err != nil {
		return nil, err
	}
	return c.AddObjects(ctx, repo, cks, layers, dir, git)
}

// SetRefs makes the refs of the repository at dir (a build's) equal refs.
func (c *Cache) SetRefs(ctx context.Context, dir string, refs []wal.Ref, git *gitexec.Runner) error {
	if git == nil {
		git = c.git
	}
	return c.reconcileRefs(ctx, git, dir, refs)
}

// AddObjects is BuildObjects into the existing repository at dir (one a
// build made): a compaction adds the checkpoints its plan rolls up once
// it knows them.
func (c *Cache) AddObjects(ctx context.Context, repo string, cks []wal.Checkpoint, layers []wal.Layer, dir string, git *gitexec.Runner) (*Built, error) {
	if git == nil {
		git = c.git
	}
	b := &Built{Layers: make(map[ulid.ULID]string, len(layers))}
	for _, ck := range cks {
		pack, _, err := c.installPack(ctx, git, dir, repo, checkpointSource(c.log, repo, ck))
		if err != nil {
			return nil, fmt.Errorf("build %s: checkpoint at seq %d: %w", repo, ck.Seq, err)
		}
		b.Checkpoints = append(b.Checkpoints, pack)
	}
	for _, l := range layers {
		pack, _, err := c.indexLayer(ctx, git, dir, repo, l)
		if err != nil {
			return nil, fmt.Errorf("build %s: layer %s: %w", repo, l.ULID, err)
		}
		b.Layers[l.ULID] = pack
	}
	return b, nil
}
