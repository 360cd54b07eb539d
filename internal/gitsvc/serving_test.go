package gitsvc_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc"
)

// servingCount is a gitsvc.ServingTracker that counts requests.
type servingCount struct {
	mu              sync.Mutex
	started, active int
}

func (c *servingCount) Serving() func() {
	c.mu.Lock()
	c.started++
	c.active++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.active--
			c.mu.Unlock()
		})
	}
}

// TestServingIsTracked: every git request, a push and a clone, counts as
// served while it runs and stops counting when it is done, so background
// work pauses for it (docs/adr/0051-geometric-checkpoints.md).
func TestServingIsTracked(t *testing.T) {
	c := &servingCount{}
	e := newStreamEnvWith(t, func(o *gitsvc.Options) { o.Serving = c })
	src := filepath.Join(t.TempDir(), "src")
	e.gitIn("", "init", "-q", "-b", "main", src)
	os.WriteFile(filepath.Join(src, "a"), []byte("one\n"), 0o644)
	e.gitIn(src, "add", "a")
	e.gitIn(src, "commit", "-qm", "one")
	e.gitIn(src, "push", "-q", e.url+"/r1", "main")
	e.gitIn("", "clone", "-q", e.url+"/r1", filepath.Join(t.TempDir(), "clone"))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started < 2 || c.active != 0 {
		t.Fatalf("%d requests tracked, %d still active; want at least 2 and none", c.started, c.active)
	}
}
