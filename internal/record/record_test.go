package record_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// set is a record: a set of members and a nonce.
type set struct {
	Nonce   string   `json:"nonce,omitempty"`
	Members []string `json:"members"`
}

var codec = record.JSON[set]()

// add is an idempotent mutation: it adds m unless it is there.
func add(m string) record.Mutate[set] {
	return func(cur *set) (*set, error) {
		if cur != nil && slices.Contains(cur.Members, m) {
			return nil, nil
		}
		next := &set{}
		if cur != nil {
			next.Members = slices.Clone(cur.Members)
		}
		next.Members = append(next.Members, m)
		return next, nil
	}
}

var fast = record.Options{Backoff: func(int) time.Duration { return 0 }}

func stored(t *testing.T, st objstore.Store, key string) (*set, bool) {
	t.Helper()
	v, _, err := record.Get(context.Background(), st, codec, key)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

// outcome classifies an error into ADR 0006's three outcomes.
func outcome(t *testing.T, err error) string {
	t.Helper()
	switch {
	case err == nil:
		return "applied"
	case errors.Is(err, objstore.ErrOutcomeUnknown):
		if errors.Is(err, record.ErrNotApplied) {
			t.Fatalf("an error is both unknown and not applied: %v", err)
		}
		return "unknown"
	case errors.Is(err, record.ErrNotApplied):
		return "not applied"
	}
	t.Fatalf("an error of no outcome: %v", err)
	return ""
}

// TestUpdateUnderEveryFault injects each fault (a request lost, landed
// then reported failed, refused) at each of the first calls of each kind
// an Update makes, once or from that call on (an outage that outlasts the
// attempts), over an existing record and over an absent one, and
// checks that the outcome it reports is true of the store: applied means
// the change is stored, not applied means it is not (and never will be:
// faultstore applies nothing later), unknown is allowed either way.
func TestUpdateUnderEveryFault(t *testing.T) {
	ops := []faultstore.Op{faultstore.OpGet, faultstore.OpPutIfMatch, faultstore.OpPutIfAbsent}
	for _, exists := range []bool{true, false} {
		for _, op := range ops {
			for _, f := range faultstore.Faults() {
				for _, persist := range []bool{false, true} {
					for n := 1; n <= 4; n++ {
						name := fmt.Sprintf("exists=%v/%s/%s/call%d/persist=%v", exists, op, f, n, persist)
						t.Run(name, func(t *testing.T) {
							fs := faultstore.New(memstore.New())
							ctx := context.Background()
							const key = "r/k"
							if exists {
								if _, err := record.Update(ctx, fs, codec, key, fast, add("a")); err != nil {
									t.Fatal(err)
								}
							}
							calls := 0
							fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
								if c.Op != op {
									return faultstore.Fault{}
								}
								calls++
								if calls == n || persist && calls > n {
									return faultstore.Fault{Outcome: f}
								}
								return faultstore.Fault{}
							})
							_, err := record.Update(ctx, fs, codec, key, fast, add("b"))
							fs.SetPlan(nil)
							v, ok := stored(t, fs, key)
							has := ok && slices.Contains(v.Members, "b")
							switch o := outcome(t, err); {
							case o == "applied" && !has:
								t.Fatalf("reported applied, but the store holds %+v", v)
							case o == "not applied" && has:
								t.Fatalf("reported not applied (%v), but the store holds %+v", err, v)
							}
							if exists && (!ok || !slices.Contains(v.Members, "a")) {
								t.Fatalf("the earlier member went: %+v", v)
							}
						})
					}
				}
			}
		}
	}
}

// TestUpdateRacers: sixteen writers add one member each to one record;
// every one reported applied is there, and none is there twice.
func TestUpdateRacers(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = record.Update(ctx, st, codec, "r/k", record.Options{Attempts: 64}, add(fmt.Sprint(i)))
		}()
	}
	wg.Wait()
	v, _ := stored(t, st, "r/k")
	for i, err := range errs {
		if o := outcome(t, err); o == "applied" && !slices.Contains(v.Members, fmt.Sprint(i)) {
			t.Errorf("writer %d reported applied but is missing: %v", i, v.Members)
		}
	}
	sorted := slices.Sorted(slices.Values(v.Members))
	if len(slices.Compact(sorted)) != len(v.Members) {
		t.Errorf("a member twice: %v", v.Members)
	}
}

// TestUpdateContentionIsNotApplied: a record that changes under every
// attempt ends in "not applied", after the configured attempts.
func TestUpdateContentionIsNotApplied(t *testing.T) {
	fs := faultstore.New(memstore.New())
	ctx := context.Background()
	if _, err := record.Update(ctx, fs, codec, "r/k", fast, add("a")); err != nil {
		t.Fatal(err)
	}
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfMatch {
			return faultstore.Fault{Outcome: faultstore.Refused, Err: objstore.ErrPreconditionFailed}
		}
		return faultstore.Fault{}
	})
	_, err := record.Update(ctx, fs, codec, "r/k", record.Options{Attempts: 5, Backoff: fast.Backoff}, add("b"))
	if outcome(t, err) != "not applied" || !errors.Is(err, record.ErrContention) {
		t.Fatalf("err %v, want contention, not applied", err)
	}
	if n := fs.Count(faultstore.OpPutIfMatch); n != 5 {
		t.Fatalf("%d writes, want one per attempt (5)", n)
	}
}

// TestMutateErrorAndDecodeError: a mutation's error ends the update with
// nothing written; a record that does not decode is reported, not
// overwritten.
func TestMutateErrorAndDecodeError(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	boom := errors.New("boom")
	if _, err := record.Update(ctx, st, codec, "r/k", fast, func(*set) (*set, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err %v, want the mutation's", err)
	}
	if _, ok := stored(t, st, "r/k"); ok {
		t.Fatal("a failed mutation wrote")
	}
	if _, err := st.Put(ctx, "r/bad", strings.NewReader("{not json"), 9); err != nil {
		t.Fatal(err)
	}
	_, err := record.Update(ctx, st, codec, "r/bad", fast, add("x"))
	var de *record.DecodeError
	if !errors.As(err, &de) || outcome(t, err) != "not applied" {
		t.Fatalf("err %v, want a DecodeError, not applied", err)
	}
}

// TestCreateUnderEveryFault: Create's outcome is true of the store under
// each fault of its PutIfAbsent and of the read that settles it.
func TestCreateUnderEveryFault(t *testing.T) {
	for _, op := range []faultstore.Op{faultstore.OpPutIfAbsent, faultstore.OpGet} {
		for _, f := range faultstore.Faults() {
			t.Run(fmt.Sprintf("%s/%s", op, f), func(t *testing.T) {
				fs := faultstore.New(memstore.New())
				fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
					if c.Op == op && c.N == 1 {
						return faultstore.Fault{Outcome: f}
					}
					return faultstore.Fault{}
				})
				mine := &set{Nonce: "n1", Members: []string{"x"}}
				_, err := record.Create(context.Background(), fs, codec, "r/k", mine)
				fs.SetPlan(nil)
				v, ok := stored(t, fs, "r/k")
				switch o := outcome(t, err); {
				case o == "applied" && (!ok || v.Nonce != "n1"):
					t.Fatalf("reported created, store holds %+v", v)
				case o == "not applied" && ok && v.Nonce == "n1":
					t.Fatalf("reported not created (%v), store holds ours", err)
				}
			})
		}
	}
	// Someone else's record is ErrExists, not ours.
	st := memstore.New()
	ctx := context.Background()
	if _, err := record.Create(ctx, st, codec, "r/k", &set{Nonce: "theirs"}); err != nil {
		t.Fatal(err)
	}
	if _, err := record.Create(ctx, st, codec, "r/k", &set{Nonce: "ours"}); !errors.Is(err, record.ErrExists) {
		t.Fatalf("err %v, want ErrExists", err)
	}
}

// TestCreateOnceAgrees: racing creators all get the record of the first,
// and a creator whose own write landed then failed gets its own.
func TestCreateOnceAgrees(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := record.CreateOnce(ctx, st, codec, "r/k", &set{Nonce: fmt.Sprint(i)})
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = v.Nonce
		}()
	}
	wg.Wait()
	for _, g := range got {
		if g != got[0] {
			t.Fatalf("creators disagree: %v", got)
		}
	}
	fs := faultstore.New(memstore.New())
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		if c.Op == faultstore.OpPutIfAbsent {
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		}
		return faultstore.Fault{}
	})
	v, err := record.CreateOnce(ctx, fs, codec, "r/k", &set{Nonce: "mine"})
	if err != nil || v.Nonce != "mine" {
		t.Fatalf("landed then failed: %+v, %v; want our own record", v, err)
	}
}

// TestLastWriteLandedThenFailed: when the last attempt's write lands but
// reports a failure, the update is applied (learned by reading back) or,
// when the store does not answer the read either, unknown, never "not
// applied".
func TestLastWriteLandedThenFailed(t *testing.T) {
	for _, readsFail := range []bool{false, true} {
		fs := faultstore.New(memstore.New())
		ctx := context.Background()
		writes := 0
		fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
			switch {
			case c.Op == faultstore.OpPutIfAbsent:
				writes++
				return faultstore.Fault{Outcome: faultstore.LandedThenError}
			case c.Op == faultstore.OpGet && readsFail && writes > 0:
				return faultstore.Fault{Outcome: faultstore.Lost}
			}
			return faultstore.Fault{}
		})
		_, err := record.Update(ctx, fs, codec, "r/k", record.Options{Attempts: 1}, add("b"))
		want := "applied"
		if readsFail {
			want = "unknown"
		}
		if o := outcome(t, err); o != want {
			t.Fatalf("reads fail %v: %s (%v), want %s", readsFail, o, err, want)
		}
	}
}
