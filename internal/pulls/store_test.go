package pulls

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
)

const (
	repoA = "01JREPOAAAAAAAAAAAAAAAAAAA"
	forkB = "01JFORKBBBBBBBBBBBBBBBBBBB"
)

func draft(head string) PullRequest {
	return PullRequest{
		RepoID: repoA, BaseRepo: "alice/app", Title: "Add " + head, Body: "body of " + head, Author: "alice",
		Head: Branch{RepoID: repoA, Repo: "alice/app", Ref: head}, Base: "main",
	}
}

func numbers(prs []PullRequest) []uint64 {
	var out []uint64
	for _, pr := range prs {
		out = append(out, pr.Number)
	}
	return out
}

func mustList(t *testing.T, s *Store, f Filter) []uint64 {
	t.Helper()
	var all []uint64
	before := uint64(0)
	for {
		prs, next, err := s.List(context.Background(), repoA, f, before, 2)
		if err != nil {
			t.Fatalf("list %s: %v", f, err)
		}
		all = append(all, numbers(prs)...)
		if next == 0 {
			return all
		}
		before = next
	}
}

func setState(t *testing.T, s *Store, n uint64, st State) PullRequest {
	t.Helper()
	pr, err := s.Update(context.Background(), repoA, n, func(pr *PullRequest) (bool, error) {
		if pr.State == st {
			return false, nil
		}
		pr.State = st
		return true, nil
	})
	if err != nil {
		t.Fatalf("set #%d %s: %v", n, st, err)
	}
	return pr
}

// keysUnder lists every key under prefix.
func keysUnder(t *testing.T, st objstore.Store, prefix string) []string {
	t.Helper()
	var out []string
	if err := objstore.Walk(context.Background(), st, prefix, func(i objstore.Info) error {
		out = append(out, i.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCreateGetListStates(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	s := NewStore(mem)
	for i := 1; i <= 5; i++ {
		pr, err := s.Create(ctx, draft(fmt.Sprintf("b%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if pr.Number != uint64(i) || pr.State != Open || pr.Gen != 1 {
			t.Fatalf("created %+v, want #%d open", pr, i)
		}
	}
	got, err := s.Get(ctx, repoA, 3)
	if err != nil || got.Title != "Add b3" || got.Head.Ref != "b3" || got.Base != "main" || got.Author != "alice" {
		t.Fatalf("get #3: %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, repoA, 6); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get #6: %v, want not found", err)
	}
	if l := mustList(t, s, FilterOpen); !slices.Equal(l, []uint64{5, 4, 3, 2, 1}) {
		t.Fatalf("open list %v", l)
	}
	setState(t, s, 2, Closed)
	setState(t, s, 4, Merged)
	if l := mustList(t, s, FilterOpen); !slices.Equal(l, []uint64{5, 3, 1}) {
		t.Fatalf("open list %v", l)
	}
	if l := mustList(t, s, FilterClosed); !slices.Equal(l, []uint64{4, 2}) {
		t.Fatalf("closed list %v", l)
	}
	if l := mustList(t, s, FilterAll); !slices.Equal(l, []uint64{5, 4, 3, 2, 1}) {
		t.Fatalf("all list %v", l)
	}
	setState(t, s, 2, Open) // reopened
	if l := mustList(t, s, FilterOpen); !slices.Equal(l, []uint64{5, 3, 2, 1}) {
		t.Fatalf("open list after reopen %v", l)
	}
	// Each pull request has exactly its live keys: the writers tidied.
	if k := keysUnder(t, mem, listPrefix); len(k) != 5 {
		t.Fatalf("listing keys %v, want one per pull request", k)
	}
	if k := keysUnder(t, mem, headsPrefix); len(k) != 4 {
		t.Fatalf("head keys %v, want one per open pull request", k)
	}
	// A title edit stays in its list and writes no key.
	pr, err := s.Update(ctx, repoA, 3, func(pr *PullRequest) (bool, error) { pr.Title = "New title"; return true, nil })
	if err != nil || pr.Title != "New title" || pr.Gen != 2 {
		t.Fatalf("edit: %+v, %v", pr, err)
	}
	if k := keysUnder(t, mem, listPrefix); len(k) != 5 {
		t.Fatalf("listing keys after an edit %v", k)
	}
	if _, _, err := s.List(ctx, repoA, "draft", 0, 10); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad filter: %v", err)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	s := NewStore(memstore.New())
	for name, edit := range map[string]func(*PullRequest){
		"empty title":     func(p *PullRequest) { p.Title = " " },
		"two-line title":  func(p *PullRequest) { p.Title = "a\nb" },
		"long title":      func(p *PullRequest) { p.Title = strings.Repeat("x", MaxTitleBytes+1) },
		"long body":       func(p *PullRequest) { p.Body = strings.Repeat("x", MaxBodyBytes+1) },
		"bad utf-8":       func(p *PullRequest) { p.Body = "\xff" },
		"bad branch":      func(p *PullRequest) { p.Head.Ref = "a..b" },
		"full ref":        func(p *PullRequest) { p.Base = "refs/heads/main" },
		"bad repo id":     func(p *PullRequest) { p.RepoID = "../x" },
		"no author":       func(p *PullRequest) { p.Author = "" },
		"branch with nul": func(p *PullRequest) { p.Head.Ref = "a\x00" },
	} {
		d := draft("topic")
		edit(&d)
		if _, err := s.Create(context.Background(), d); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if l := mustList(t, s, FilterAll); len(l) != 0 {
		t.Fatalf("a refused create left %v", l)
	}
}

// Racing creators each get their own number, and every number is used.
func TestCreateRace(t *testing.T) {
	s := NewStore(memstore.New())
	const n = 16
	var wg sync.WaitGroup
	got := make([]uint64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, err := s.Create(context.Background(), draft(fmt.Sprintf("b%d", i)))
			got[i], errs[i] = pr.Number, err
		}()
	}
	wg.Wait()
	var ok []uint64
	for i := range n {
		if errs[i] == nil {
			ok = append(ok, got[i])
		} else if !errors.Is(errs[i], ErrContention) {
			t.Errorf("create %d: %v", i, errs[i])
		}
	}
	slices.Sort(ok)
	if len(slices.Compact(slices.Clone(ok))) != len(ok) {
		t.Fatalf("numbers handed out twice: %v", ok)
	}
	listed := mustList(t, s, FilterOpen)
	slices.Sort(listed)
	if !slices.Equal(listed, ok) {
		t.Fatalf("listed %v, created %v", listed, ok)
	}
}

// faulted returns a Store over a fault store whose plan faults, with
// outcome o, the first call of op on a key that starts with prefix.
func faulted(prefix string, op faultstore.Op, o faultstore.Outcome) (*Store, *faultstore.Store) {
	fs := faultstore.New(memstore.New())
	var once sync.Once
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		hit := false
		if c.Op == op && strings.HasPrefix(c.Key, prefix) {
			once.Do(func() { hit = true })
		}
		if hit {
			return faultstore.Fault{Outcome: o}
		}
		return faultstore.Fault{}
	})
	return NewStore(fs), fs
}

// The number's write (the counter's compare-and-swap) lands and then
// reports an error: the creator reads the counter back, finds its own
// nonce, and uses the number it took. Nothing is lost and nothing is
// numbered twice; with the other outcomes it simply tries again.
func TestAllocationUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	for _, op := range []faultstore.Op{faultstore.OpPutIfAbsent, faultstore.OpPutIfMatch} {
		for _, o := range faultstore.Faults() {
			t.Run(op.String()+"/"+o.String(), func(t *testing.T) {
				fs := faultstore.New(memstore.New())
				s := NewStore(fs)
				if op == faultstore.OpPutIfMatch { // the counter exists: its update is a PutIfMatch
					if _, err := s.Create(ctx, draft("first")); err != nil {
						t.Fatal(err)
					}
				}
				var once sync.Once
				fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
					hit := false
					if c.Op == op && strings.HasPrefix(c.Key, nextPrefix) {
						once.Do(func() { hit = true })
					}
					if hit {
						return faultstore.Fault{Outcome: o}
					}
					return faultstore.Fault{}
				})
				want := uint64(1)
				if op == faultstore.OpPutIfMatch {
					want = 2
				}
				pr, err := s.Create(ctx, draft("topic"))
				if err != nil {
					t.Fatalf("create: %v", err)
				}
				if pr.Number != want {
					t.Fatalf("created #%d, want #%d: the number the landed write took", pr.Number, want)
				}
				next, err := s.Create(ctx, draft("later"))
				if err != nil || next.Number != want+1 {
					t.Fatalf("the next create: #%d, %v; want #%d (no gap, no reuse)", next.Number, err, want+1)
				}
				if l := mustList(t, s, FilterOpen); len(l) != int(want+1) {
					t.Fatalf("listed %v", l)
				}
			})
		}
	}
}

// The counter's write lands, reports an error, and it cannot be read
// back either (the store is down for the settle reads): the creator
// cannot know which number it took, so it creates nothing and says to
// retry. The number is spent (a gap), never given twice.
func TestAllocationUnknownAndUnreadable(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New())
	s := NewStore(fs)
	if _, err := s.Create(ctx, draft("first")); err != nil {
		t.Fatal(err)
	}
	down := false
	var mu sync.Mutex
	fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case c.Op == faultstore.OpPutIfMatch && strings.HasPrefix(c.Key, nextPrefix) && !down:
			down = true
			return faultstore.Fault{Outcome: faultstore.LandedThenError}
		case down && strings.HasPrefix(c.Key, nextPrefix):
			return faultstore.Fault{Outcome: faultstore.Lost}
		}
		return faultstore.Fault{}
	})
	_, err := s.Create(ctx, draft("topic"))
	if !errors.Is(err, ErrContention) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("create with an unknowable number: %v, want ErrContention (nothing created)", err)
	}
	fs.SetPlan(nil)
	if l := mustList(t, s, FilterAll); !slices.Equal(l, []uint64{1}) {
		t.Fatalf("listed %v: the failed create left a pull request", l)
	}
	if k := keysUnder(t, fs, pullsPrefix); len(k) != 1 {
		t.Fatalf("records %v", k)
	}
	pr, err := s.Create(ctx, draft("again"))
	if err != nil || pr.Number != 3 {
		t.Fatalf("the next create: #%d, %v; want #3 (#2 was spent by the landed write)", pr.Number, err)
	}
}

// The record's own write lands and then reports an error: the creator
// reads it back, finds its bytes, and reports success.
func TestCreateRecordUnknownOutcome(t *testing.T) {
	ctx := context.Background()
	for _, o := range faultstore.Faults() {
		t.Run(o.String(), func(t *testing.T) {
			s, _ := faulted(pullsPrefix, faultstore.OpPutIfAbsent, o)
			pr, err := s.Create(ctx, draft("topic"))
			if err != nil || pr.Number != 1 {
				t.Fatalf("create: #%d, %v", pr.Number, err)
			}
			if l := mustList(t, s, FilterOpen); !slices.Equal(l, []uint64{1}) {
				t.Fatalf("listed %v", l)
			}
		})
	}
}

// A record write whose outcome cannot be learned is reported as unknown,
// and lists show the pull request exactly when it landed: the keys
// written before it make listers read the record.
func TestCreateRecordUnknowable(t *testing.T) {
	ctx := context.Background()
	for _, landed := range []bool{true, false} {
		t.Run(fmt.Sprint("landed=", landed), func(t *testing.T) {
			fs := faultstore.New(memstore.New())
			s := NewStore(fs)
			down := false
			var mu sync.Mutex
			fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case c.Op == faultstore.OpPutIfAbsent && strings.HasPrefix(c.Key, pullsPrefix) && !down:
					down = true
					if landed {
						return faultstore.Fault{Outcome: faultstore.LandedThenError}
					}
					return faultstore.Fault{Outcome: faultstore.Lost}
				case down && strings.HasPrefix(c.Key, pullsPrefix):
					return faultstore.Fault{Outcome: faultstore.Lost}
				}
				return faultstore.Fault{}
			})
			_, err := s.Create(ctx, draft("topic"))
			if !errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("create: %v, want ErrOutcomeUnknown", err)
			}
			fs.SetPlan(nil)
			want := []uint64(nil)
			if landed {
				want = []uint64{1}
			}
			if l := mustList(t, s, FilterOpen); !slices.Equal(l, want) {
				t.Fatalf("listed %v, want %v", l, want)
			}
			if !landed {
				// The stray key stays for a write that may land; a day
				// later a lister removes it.
				if k := keysUnder(t, fs, listPrefix); len(k) != 1 {
					t.Fatalf("keys %v", k)
				}
				s.now = func() time.Time { return time.Now().Add(25 * time.Hour) }
				mustList(t, s, FilterOpen)
				if k := keysUnder(t, fs, listPrefix); len(k) != 0 {
					t.Fatalf("keys a day later %v", k)
				}
			}
		})
	}
}

// Every write of a state change is faulted in turn with each outcome:
// afterwards the lists agree with the records at once, and one lister
// pass a day later leaves exactly the live keys.
func TestStateChangeFaults(t *testing.T) {
	ctx := context.Background()
	for _, o := range faultstore.Faults() {
		for call := 1; call <= 8; call++ {
			t.Run(fmt.Sprintf("%s/call%d", o, call), func(t *testing.T) {
				fs := faultstore.New(memstore.New())
				s := NewStore(fs)
				for _, b := range []string{"a", "b"} {
					if _, err := s.Create(ctx, draft(b)); err != nil {
						t.Fatal(err)
					}
				}
				var mu sync.Mutex
				seen := 0
				fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
					mu.Lock()
					defer mu.Unlock()
					if c.Op == faultstore.OpGet || c.Op == faultstore.OpList || c.Op == faultstore.OpGetRange {
						return faultstore.Fault{}
					}
					seen++
					if seen == call {
						return faultstore.Fault{Outcome: o}
					}
					return faultstore.Fault{}
				})
				_, err := s.Update(ctx, repoA, 1, func(pr *PullRequest) (bool, error) {
					if pr.State == Closed {
						return false, nil
					}
					pr.State = Closed
					return true, nil
				})
				fs.SetPlan(nil)
				rec, gerr := s.Get(ctx, repoA, 1)
				if gerr != nil {
					t.Fatal(gerr)
				}
				if err == nil && rec.State != Closed {
					t.Fatalf("update succeeded but the record is %s", rec.State)
				}
				check := func() {
					t.Helper()
					open, closed := mustList(t, s, FilterOpen), mustList(t, s, FilterClosed)
					wantOpen, wantClosed := []uint64{2, 1}, []uint64(nil)
					if rec.State == Closed {
						wantOpen, wantClosed = []uint64{2}, []uint64{1}
					}
					if !slices.Equal(open, wantOpen) || !slices.Equal(closed, wantClosed) {
						t.Fatalf("record %s, err %v: open %v closed %v", rec.State, err, open, closed)
					}
				}
				check()
				// That lister pass deleted every key whose write was
				// replaced or lost (the record's generation is past it):
				// none of this write is in flight any more.
				if k := keysUnder(t, fs, listPrefix); len(k) != 2 {
					t.Fatalf("keys after a lister pass %v, want the 2 live ones", k)
				}
				s.now = func() time.Time { return time.Now().Add(25 * time.Hour) }
				check()
				if _, err := s.OpenByHead(ctx, repoA, "a"); err != nil {
					t.Fatal(err)
				}
				if k := keysUnder(t, fs, listPrefix); len(k) != 2 {
					t.Fatalf("keys after a lister pass %v, want the 2 live ones", k)
				}
				if k := keysUnder(t, fs, headsPrefix); len(k) != 1+boolInt(rec.State == Open) {
					t.Fatalf("head keys %v", k)
				}
			})
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Closes and reopens race: a writer that tidies late must never take
// away the key of a later write, so the open list shows a pull request
// exactly when its record is open.
func TestCloseReopenRace(t *testing.T) {
	ctx := context.Background()
	mem := memstore.New()
	s := NewStore(mem)
	if _, err := s.Create(ctx, draft("topic")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := Closed
			if i%2 == 1 {
				st = Open
			}
			for range 5 {
				_, err := s.Update(ctx, repoA, 1, func(pr *PullRequest) (bool, error) {
					if pr.State == st {
						return false, nil
					}
					pr.State = st
					return true, nil
				})
				if err != nil && !errors.Is(err, ErrContention) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	rec, err := s.Get(ctx, repoA, 1)
	if err != nil {
		t.Fatal(err)
	}
	open := mustList(t, s, FilterOpen)
	if (rec.State == Open) != slices.Equal(open, []uint64{1}) {
		t.Fatalf("record %s, open list %v", rec.State, open)
	}
	heads, err := s.OpenByHead(ctx, repoA, "topic")
	if err != nil || (rec.State == Open) != (len(heads) == 1) {
		t.Fatalf("record %s, by head %v, %v", rec.State, heads, err)
	}
}

func TestOpenByHead(t *testing.T) {
	ctx := context.Background()
	s := NewStore(memstore.New())
	a, _ := s.Create(ctx, draft("topic"))
	d := draft("topic")
	d.Base = "release"
	b, _ := s.Create(ctx, d)
	if _, err := s.Create(ctx, draft("other")); err != nil {
		t.Fatal(err)
	}
	// A pull request into another repository from a fork's branch of the
	// same name is the fork's, not ours.
	f := draft("topic")
	f.Head = Branch{RepoID: forkB, Repo: "bob/app", Ref: "topic"}
	fork, _ := s.Create(ctx, f)
	got, err := s.OpenByHead(ctx, repoA, "topic")
	if err != nil || !slices.Equal(numbers(got), []uint64{b.Number, a.Number}) {
		t.Fatalf("by head: %v, %v", numbers(got), err)
	}
	got, _ = s.OpenByHead(ctx, forkB, "topic")
	if !slices.Equal(numbers(got), []uint64{fork.Number}) {
		t.Fatalf("fork's head: %v", numbers(got))
	}
	setState(t, s, a.Number, Closed)
	got, _ = s.OpenByHead(ctx, repoA, "topic")
	if !slices.Equal(numbers(got), []uint64{b.Number}) {
		t.Fatalf("by head after a close: %v", numbers(got))
	}
}

// Pages cost one LIST per list and a GET per pull request shown, however
// many pull requests the repository holds.
func TestListCost(t *testing.T) {
	ctx := context.Background()
	fs := faultstore.New(memstore.New())
	s := NewStore(fs)
	for i := range 40 {
		if _, err := s.Create(ctx, draft(fmt.Sprintf("b%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := uint64(1); i <= 40; i += 2 {
		setState(t, s, i, Closed)
	}
	gets, lists := fs.Count(faultstore.OpGet), fs.Count(faultstore.OpList)
	prs, next, err := s.List(ctx, repoA, FilterAll, 0, 10)
	if err != nil || len(prs) != 10 || next != 31 {
		t.Fatalf("page: %v next %d, %v", numbers(prs), next, err)
	}
	if g, l := fs.Count(faultstore.OpGet)-gets, fs.Count(faultstore.OpList)-lists; g != 10 || l != 2 {
		t.Fatalf("a page of 10 cost %d GETs and %d LISTs, want 10 and 2", g, l)
	}
	prs, _, _ = s.List(ctx, repoA, FilterAll, next, 10)
	if !slices.Equal(numbers(prs), []uint64{30, 29, 28, 27, 26, 25, 24, 23, 22, 21}) {
		t.Fatalf("second page %v", numbers(prs))
	}
}
