// Package coordtest is the conformance suite and seeded simulation every
// coord.Backend must pass. A backend's test plugs in with one line:
//
//	func TestBackend(t *testing.T) {
//		coordtest.Run(t, func(t *testing.T, lim coord.Limits) coord.Backend { return New(lim) })
//	}
//
// The factory must return a fresh, empty backend enforcing lim each time it is
// called; it may use t for cleanup.
package coordtest

import (
	"testing"

	"github.com/ghost-scm/ghost/internal/coord"
)

// Factory returns a fresh, empty backend that enforces lim.
type Factory func(t *testing.T, lim coord.Limits) coord.Backend

// Option adjusts Run.
type Option func(*options)

type options struct {
	seeds      int
	firstSeed  int64
	faultSteps int
	parallel   bool
	skipSim    bool
	skipConfor bool
}

// Seeds sets how many simulation seeds run (default 200). Slow backends, such
// as one talking to a real etcd, may pass a smaller number.
func Seeds(n int) Option { return func(o *options) { o.seeds = n } }

// FaultSteps sets how many steps each seed runs with faults enabled before
// the liveness phase (default 250). Slow backends may trade steps for seeds.
func FaultSteps(n int) Option { return func(o *options) { o.faultSteps = n } }

// FirstSeed sets the first simulation seed, to reproduce a reported failure:
// Run(t, f, FirstSeed(1234), Seeds(1)).
func FirstSeed(seed int64) Option { return func(o *options) { o.firstSeed = seed } }

// Parallel runs simulation seeds in parallel subtests.
func Parallel() Option { return func(o *options) { o.parallel = true } }

// SkipSimulation runs only the conformance suite.
func SkipSimulation() Option { return func(o *options) { o.skipSim = true } }

// SkipConformance runs only the simulation.
func SkipConformance() Option { return func(o *options) { o.skipConfor = true } }

// Run runs the conformance suite and the seeded simulation against backends
// made by f, as subtests "Conformance" and "Simulation".
func Run(t *testing.T, f Factory, opts ...Option) {
	o := options{seeds: 200, firstSeed: 1, faultSteps: simFaultSteps}
	for _, opt := range opts {
		opt(&o)
	}
	if !o.skipConfor {
		t.Run("Conformance", func(t *testing.T) { RunConformance(t, f) })
	}
	if !o.skipSim {
		t.Run("Simulation", func(t *testing.T) { runSimulation(t, f, o) })
	}
}
