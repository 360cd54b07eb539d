package latencystore

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/objstore/storetest"
)

// TestConformance: delayed or not, the decorator is a Store like any
// other.
func TestConformance(t *testing.T) {
	t.Run("zero", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) objstore.Store {
			return New(memstore.New(), Fixed(0), 1)
		}, storetest.LargeObject(0)) // memstore holds objects in memory
	})
	// A tiny S3-shaped distribution: every request waits, with a tail.
	tiny := Dist{Median: 20 * time.Microsecond, P99: 200 * time.Microsecond}
	p := Profile{Name: "tiny", Get: tiny, Put: tiny, CondPut: tiny, List: tiny, Delete: tiny, Copy: tiny}
	t.Run("tiny", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) objstore.Store {
			return New(memstore.New(), p, 2)
		}, storetest.LargeObject(0), storetest.CASRounds(20))
	})
}

// draws returns n delays of d from a store seeded with seed.
func draws(seed uint64, d Dist, n int) []time.Duration {
	s := New(memstore.New(), Profile{}, seed)
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d.draw(s.rng)
	}
	return out
}

// TestDeterministic: the same seed gives the same delays, another seed
// others.
func TestDeterministic(t *testing.T) {
	d := S3Standard().CondPut
	a, b, c := draws(7, d, 100), draws(7, d, 100), draws(8, d, 100)
	if !slices.Equal(a, b) {
		t.Error("two stores seeded alike drew different delays")
	}
	if slices.Equal(a, c) {
		t.Error("two stores seeded differently drew the same delays")
	}
}

// TestDistribution: the draws have the profile's median and 99th
// percentile, and never exceed the cap; a fixed profile is exact.
func TestDistribution(t *testing.T) {
	for _, p := range []Profile{S3Standard(), S3Express()} {
		for _, d := range []Dist{p.Get, p.Put, p.CondPut, p.List, p.Delete, p.Copy} {
			ds := draws(1, d, 20000)
			slices.Sort(ds)
			med, p99 := ds[len(ds)/2], ds[len(ds)*99/100]
			if r := float64(med) / float64(d.Median); r < 0.95 || r > 1.05 {
				t.Errorf("%s %v: median %v", p.Name, d, med)
			}
			if r := float64(p99) / float64(d.P99); r < 0.9 || r > 1.1 {
				t.Errorf("%s %v: p99 %v", p.Name, d, p99)
			}
			if ds[len(ds)-1] > 4*d.P99 {
				t.Errorf("%s %v: a draw of %v, past the cap", p.Name, d, ds[len(ds)-1])
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	f := Fixed(60 * time.Millisecond)
	for _, d := range []Dist{f.Get, f.Put, f.CondPut, f.List, f.Delete, f.Copy} {
		if got := d.draw(r); got != 60*time.Millisecond {
			t.Errorf("fixed 60ms drew %v", got)
		}
	}
}

// TestDelays: each kind of request waits at least its fixed delay.
func TestDelays(t *testing.T) {
	const d = 20 * time.Millisecond
	s := New(memstore.New(), Fixed(d), 1)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		do   func() error
	}{
		{"Put", func() error { _, err := s.Put(ctx, "a", strings.NewReader("x"), 1); return err }},
		{"PutIfAbsent", func() error { _, err := s.PutIfAbsent(ctx, "b", strings.NewReader("x"), 1); return err }},
		{"Get", func() error { rc, _, err := s.Get(ctx, "a"); rc.Close(); return err }},
		{"GetRange", func() error { rc, err := s.GetRange(ctx, "a", 0, 1); rc.Close(); return err }},
		{"List", func() error { _, err := s.List(ctx, "", "", 10); return err }},
		{"Copy", func() error { return s.Copy(ctx, "a", "c") }},
		{"Delete", func() error { return s.Delete(ctx, "c") }},
	} {
		t0 := time.Now()
		if err := c.do(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if took := time.Since(t0); took < d {
			t.Errorf("%s took %v, less than its %v", c.name, took, d)
		}
	}
}

// TestCancelled: a request whose context ends while it waits returns the
// context's error as an *objstore.Error, and never reaches the wrapped
// store.
func TestCancelled(t *testing.T) {
	inner := memstore.New()
	s := New(inner, Fixed(time.Hour), 1)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	_, err := s.PutIfAbsent(ctx, "k", strings.NewReader("x"), 1)
	var oe *objstore.Error
	if !errors.Is(err, context.Canceled) || !errors.As(err, &oe) || oe.Op != "PutIfAbsent" || oe.Key != "k" {
		t.Fatalf("cancelled PutIfAbsent: %v", err)
	}
	if _, _, err := inner.Get(context.Background(), "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("the cancelled put reached the store: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.List(ctx, "", "", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("List past its deadline: %v", err)
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"s3-standard": "s3-standard",
		"s3-express":  "s3-express",
		"60ms":        "fixed 60ms",
		"fixed:10ms":  "fixed 10ms",
		"0":           "fixed 0s",
	} {
		p, err := Parse(in)
		if err != nil || p.Name != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, p.Name, err, want)
		}
	}
	for _, in := range []string{"", "s3", "-1ms", "fixed:"} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) accepted", in)
		}
	}
}
