package memcoord_test

import (
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/coordtest"
	"github.com/ghost-scm/ghost/internal/coord/memcoord"
)

func TestBackend(t *testing.T) {
	coordtest.Run(t, func(t *testing.T, lim coord.Limits) coord.Backend { return memcoord.New(lim) }, coordtest.Parallel())
}
