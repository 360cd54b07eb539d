package memstore_test

import (
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/objstore/storetest"
)

// memstore holds every object in this process's heap by design, so the
// flat-memory streaming test does not apply to it.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return memstore.New() }, storetest.LargeObject(0))
}

// TestConformanceDeflated runs the same suite on the store that keeps
// objects deflated.
func TestConformanceDeflated(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return memstore.NewDeflated() }, storetest.LargeObject(0))
}
