package faultstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/objstore/storetest"
)

// With no plan the decorator is transparent: it passes the conformance
// suite like the store it wraps.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return faultstore.New(memstore.New()) },
		storetest.LargeObject(0), storetest.CASRounds(20))
}

// TestOutcomes checks each outcome on each write: whether the wrapped store
// changed, and whether the error is ambiguous.
func TestOutcomes(t *testing.T) {
	ctx := context.Background()
	type write struct {
		op faultstore.Op
		do func(s objstore.Store) error
		// applied reports whether the write is visible in inner.
		applied func(inner objstore.Store) bool
	}
	exists := func(key string) func(objstore.Store) bool {
		return func(inner objstore.Store) bool { _, _, err := inner.Get(ctx, key); return err == nil }
	}
	writes := []write{
		{faultstore.OpPut, func(s objstore.Store) error {
			_, err := s.Put(ctx, "new", strings.NewReader("v"), 1)
			return err
		}, exists("new")},
		{faultstore.OpPutIfAbsent, func(s objstore.Store) error {
			_, err := s.PutIfAbsent(ctx, "new", strings.NewReader("v"), 1)
			return err
		}, exists("new")},
		{faultstore.OpPutIfMatch, func(s objstore.Store) error {
			rc, info, err := s.Get(ctx, "old")
			if err != nil {
				return err
			}
			rc.Close()
			_, err = s.PutIfMatch(ctx, "old", strings.NewReader("changed"), 7, info.ETag)
			return err
		}, func(inner objstore.Store) bool {
			b, _, _ := objstore.ReadAll(ctx, inner, "old", 100)
			return string(b) == "changed"
		}},
		{faultstore.OpDelete, func(s objstore.Store) error { return s.Delete(ctx, "old") },
			func(inner objstore.Store) bool { return !exists("old")(inner) }},
		{faultstore.OpCopy, func(s objstore.Store) error { return s.Copy(ctx, "old", "new") }, exists("new")},
	}
	for _, w := range writes {
		for _, o := range faultstore.Faults() {
			t.Run(w.op.String()+"/"+o.String(), func(t *testing.T) {
				inner := memstore.New()
				if _, err := inner.Put(ctx, "old", strings.NewReader("old"), 3); err != nil {
					t.Fatal(err)
				}
				fs := faultstore.New(inner)
				fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
					if c.Op == w.op {
						return faultstore.Fault{Outcome: o}
					}
					return faultstore.Fault{}
				})
				err := w.do(fs)
				if !errors.Is(err, faultstore.ErrInjected) {
					t.Fatalf("err = %v, want an injected error", err)
				}
				if got, want := errors.Is(err, objstore.ErrOutcomeUnknown), o != faultstore.Refused; got != want {
					t.Errorf("ambiguous = %v, want %v (err %v)", got, want, err)
				}
				if got, want := w.applied(inner), o == faultstore.LandedThenError; got != want {
					t.Errorf("applied = %v, want %v", got, want)
				}
				if fs.Count(w.op) != 1 {
					t.Errorf("Count(%s) = %d, want 1", w.op, fs.Count(w.op))
				}
			})
		}
	}
	// Reads fail without changing anything; Err replaces the error.
	fs := faultstore.New(memstore.New())
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		return faultstore.Fault{Outcome: faultstore.LandedThenError, Err: objstore.ErrPreconditionFailed}
	})
	if _, _, err := fs.Get(ctx, "k"); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("Get with Err set: %v", err)
	}
	if _, err := fs.List(ctx, "", "", 10); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("List with Err set: %v", err)
	}
}
