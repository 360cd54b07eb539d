// Package storetest is the conformance suite every objstore.Store backend
// must pass. Backends run it from their own tests with one call:
//
//	storetest.Run(t, func(t *testing.T) objstore.Store { return newBackend(t) })
//
// The suite is the contract the write-ahead log relies on: linearizable
// conditional puts with one precondition error, ranged reads, streamed
// puts with flat memory, listing in key order across pages, and errors
// reported as an *objstore.Error naming the operation and the key.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// Option adjusts the suite for a backend.
type Option func(*config)

type config struct {
	largeSize     int64
	maxHeapGrowth uint64
	casRounds     int
	casWriters    int
}

// LargeObject sets the size of the streamed-put test; 0 skips it. The
// default is 256 MiB. Only a backend that by design holds objects in this
// process's memory (memstore) may turn it off.
func LargeObject(size int64) Option { return func(c *config) { c.largeSize = size } }

// MaxHeapGrowth bounds how far the Go heap may grow above its baseline
// while the large object is written and read back (default 48 MiB).
func MaxHeapGrowth(n uint64) Option { return func(c *config) { c.maxHeapGrowth = n } }

// CASRounds sets the number of rounds of the CAS race (default 100).
func CASRounds(n int) Option { return func(c *config) { c.casRounds = n } }

// Run runs the whole suite. newStore must return an empty store each call.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store, opts ...Option) {
	cfg := config{largeSize: 256 << 20, maxHeapGrowth: 48 << 20, casRounds: 100, casWriters: 32}
	for _, o := range opts {
		o(&cfg)
	}
	t.Run("GetPutDelete", func(t *testing.T) { testGetPutDelete(t, newStore(t)) })
	t.Run("InvalidKeys", func(t *testing.T) { testInvalidKeys(t, newStore(t)) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, newStore(t)) })
	t.Run("SizeMismatch", func(t *testing.T) { testSizeMismatch(t, newStore(t)) })
	t.Run("Conditional", func(t *testing.T) { testConditional(t, newStore(t)) })
	t.Run("Range", func(t *testing.T) { testRange(t, newStore(t)) })
	t.Run("List", func(t *testing.T) { testList(t, newStore(t)) })
	t.Run("Copy", func(t *testing.T) { testCopy(t, newStore(t)) })
	t.Run("CASRace", func(t *testing.T) { testCASRace(t, newStore(t), cfg.casRounds, cfg.casWriters) })
	t.Run("CreateRace", func(t *testing.T) { testCreateRace(t, newStore(t), cfg.casRounds, cfg.casWriters) })
	t.Run("Linearizable", func(t *testing.T) { testLinearizable(t, newStore(t)) })
	if cfg.largeSize > 0 {
		t.Run("LargeStream", func(t *testing.T) { testLarge(t, newStore(t), cfg.largeSize, cfg.maxHeapGrowth) })
	}
}

func put(t *testing.T, s objstore.Store, key, val string) objstore.Info {
	t.Helper()
	info, err := s.Put(context.Background(), key, strings.NewReader(val), int64(len(val)))
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if info.ETag == "" {
		t.Fatalf("Put(%q) returned no ETag", key)
	}
	return info
}

func get(t *testing.T, s objstore.Store, key string) (string, objstore.Info) {
	t.Helper()
	rc, info, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q) read: %v", key, err)
	}
	if int64(len(b)) != info.Size {
		t.Fatalf("Get(%q): read %d bytes, Info.Size %d", key, len(b), info.Size)
	}
	return string(b), info
}

func testGetPutDelete(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	if _, _, err := s.Get(ctx, "repos/r/index"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get missing: err = %v, want ErrNotFound", err)
	}
	if _, err := s.GetRange(ctx, "repos/r/index", 0, 4); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("GetRange missing: err = %v, want ErrNotFound", err)
	}
	p1 := put(t, s, "repos/r/index", "one")
	if got, info := get(t, s, "repos/r/index"); got != "one" || info.ETag != p1.ETag || info.Size != 3 {
		t.Fatalf("Get = %q %+v, want %q etag %s", got, info, "one", p1.ETag)
	}
	p2 := put(t, s, "repos/r/index", "two!")
	if p2.ETag == p1.ETag {
		t.Fatalf("overwrite kept ETag %s", p1.ETag)
	}
	if got, _ := get(t, s, "repos/r/index"); got != "two!" {
		t.Fatalf("Get after overwrite = %q", got)
	}
	put(t, s, "empty", "")
	if got, info := get(t, s, "empty"); got != "" || info.Size != 0 {
		t.Fatalf("empty object = %q size %d", got, info.Size)
	}
	if err := s.Delete(ctx, "repos/r/index"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, _, err := s.Get(ctx, "repos/r/index"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get deleted: err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "repos/r/index"); err != nil {
		t.Fatalf("Delete missing: %v, want nil", err)
	}
}

func testInvalidKeys(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	for _, k := range []string{"", "/abs", "a//b", "a/../b", "..", "a/./b", "trailing/", "nul\x00byte", `back\slash`} {
		if _, err := s.Put(ctx, k, strings.NewReader("x"), 1); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Put(%q): err = %v, want ErrInvalidKey", k, err)
		}
		if _, _, err := s.Get(ctx, k); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Errorf("Get(%q): err = %v, want ErrInvalidKey", k, err)
		}
	}
	if page, err := s.List(ctx, "", "", 10); err != nil || len(page) != 0 {
		t.Fatalf("after invalid puts List = %v, %v; want empty", page, err)
	}
}

// checkError reports whether err matches sentinel and is an
// *objstore.Error for op on key, and fails t if not.
func checkError(t *testing.T, err error, op, key string, sentinel error) {
	t.Helper()
	var e *objstore.Error
	switch {
	case !errors.Is(err, sentinel):
		t.Errorf("%s %q: err = %v, want %v", op, key, err, sentinel)
	case !errors.As(err, &e):
		t.Errorf("%s %q: err = %v (%T), want an *objstore.Error", op, key, err, err)
	case e.Op != op || e.Key != key:
		t.Errorf("%s %q: err = %v: *objstore.Error has Op %q and Key %q", op, key, err, e.Op, e.Key)
	}
}

// testErrors checks that a missing key, a lost compare-and-swap and an
// invalid key come back as an *objstore.Error that names the Store method
// and the key, so that callers can log every backend's failures the same
// way, and still match the sentinels.
func testErrors(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	const missing, present = "repos/r/missing", "repos/r/index"
	put(t, s, present, "v")

	_, _, err := s.Get(ctx, missing)
	checkError(t, err, "Get", missing, objstore.ErrNotFound)
	_, err = s.GetRange(ctx, missing, 0, 1)
	checkError(t, err, "GetRange", missing, objstore.ErrNotFound)
	err = s.Copy(ctx, missing, "repos/r/copy")
	checkError(t, err, "Copy", missing, objstore.ErrNotFound)

	_, err = s.PutIfMatch(ctx, missing, strings.NewReader("x"), 1, `"nope"`)
	checkError(t, err, "PutIfMatch", missing, objstore.ErrPreconditionFailed)
	_, err = s.PutIfAbsent(ctx, present, strings.NewReader("x"), 1)
	checkError(t, err, "PutIfAbsent", present, objstore.ErrPreconditionFailed)

	for _, k := range []string{"", "a//b", "../x", "nul\x00byte"} {
		_, _, err := s.Get(ctx, k)
		checkError(t, err, "Get", k, objstore.ErrInvalidKey)
		_, err = s.GetRange(ctx, k, 0, 1)
		checkError(t, err, "GetRange", k, objstore.ErrInvalidKey)
		_, err = s.Put(ctx, k, strings.NewReader("x"), 1)
		checkError(t, err, "Put", k, objstore.ErrInvalidKey)
		_, err = s.PutIfMatch(ctx, k, strings.NewReader("x"), 1, `"nope"`)
		checkError(t, err, "PutIfMatch", k, objstore.ErrInvalidKey)
		_, err = s.PutIfAbsent(ctx, k, strings.NewReader("x"), 1)
		checkError(t, err, "PutIfAbsent", k, objstore.ErrInvalidKey)
		err = s.Delete(ctx, k)
		checkError(t, err, "Delete", k, objstore.ErrInvalidKey)
		err = s.Copy(ctx, k, "repos/r/copy")
		checkError(t, err, "Copy", k, objstore.ErrInvalidKey)
		err = s.Copy(ctx, present, k)
		checkError(t, err, "Copy", k, objstore.ErrInvalidKey)
	}
}

func testSizeMismatch(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	if _, err := s.Put(ctx, "short", strings.NewReader("abc"), 5); err == nil {
		t.Fatal("Put with a short body succeeded")
	}
	if _, err := s.Put(ctx, "long", strings.NewReader("abcdef"), 2); err == nil {
		t.Fatal("Put with a long body succeeded")
	}
	for _, k := range []string{"short", "long"} {
		if _, _, err := s.Get(ctx, k); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("failed Put left %q behind (err %v)", k, err)
		}
	}
}

func testConditional(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	const k = "repos/r/index"
	if _, err := s.PutIfMatch(ctx, k, strings.NewReader("x"), 1, `"nope"`); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch on missing key: err = %v, want ErrPreconditionFailed", err)
	}
	a, err := s.PutIfAbsent(ctx, k, strings.NewReader("a"), 1)
	if err != nil {
		t.Fatalf("PutIfAbsent on missing key: %v", err)
	}
	if _, err := s.PutIfAbsent(ctx, k, strings.NewReader("b"), 1); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfAbsent on existing key: err = %v, want ErrPreconditionFailed", err)
	}
	b, err := s.PutIfMatch(ctx, k, strings.NewReader("bb"), 2, a.ETag)
	if err != nil {
		t.Fatalf("PutIfMatch with current ETag: %v", err)
	}
	if _, err := s.PutIfMatch(ctx, k, strings.NewReader("c"), 1, a.ETag); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch with stale ETag: err = %v, want ErrPreconditionFailed", err)
	}
	if got, info := get(t, s, k); got != "bb" || info.ETag != b.ETag {
		t.Fatalf("after lost CAS: %q etag %s, want %q etag %s", got, info.ETag, "bb", b.ETag)
	}
	// An unconditional put of other bytes moves the ETag on, so the old one
	// is stale. (Rewriting equal bytes may keep the ETag: on S3 it is the
	// MD5 of the content. The log never writes equal bytes twice, since
	// every index carries a new seq.)
	put(t, s, k, "other")
	if _, err := s.PutIfMatch(ctx, k, strings.NewReader("d"), 1, b.ETag); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch after an unconditional rewrite: err = %v, want ErrPreconditionFailed", err)
	}
	if err := s.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutIfMatch(ctx, k, strings.NewReader("e"), 1, b.ETag); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("PutIfMatch after delete: err = %v, want ErrPreconditionFailed", err)
	}
	if _, err := s.PutIfAbsent(ctx, k, strings.NewReader("f"), 1); err != nil {
		t.Fatalf("PutIfAbsent after delete: %v", err)
	}
}

func testRange(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	const body = "0123456789abcdef"
	put(t, s, "obj", body)
	cases := []struct {
		off, n int64
		want   string
	}{
		{0, 4, "0123"},
		{4, 6, "456789"},
		{10, 100, "abcdef"},
		{15, 1, "f"},
		{0, 16, body},
		{16, 4, ""},
		{40, 4, ""},
		{3, 0, ""},
	}
	for _, c := range cases {
		rc, err := s.GetRange(ctx, "obj", c.off, c.n)
		if err != nil {
			t.Errorf("GetRange(%d, %d): %v", c.off, c.n, err)
			continue
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != c.want {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q", c.off, c.n, b, err, c.want)
		}
	}
}

func testList(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	var want []string
	for i := range 25 {
		k := fmt.Sprintf("repos/a/entries/%03d.pack", i)
		put(t, s, k, k)
		want = append(want, k)
	}
	// Keys whose byte order differs from a directory walk's order.
	for _, k := range []string{"repos/a.b/x", "repos/a/index", "repos/a0"} {
		put(t, s, k, k)
	}
	var got []string
	after := ""
	pages := 0
	for {
		page, err := s.List(ctx, "repos/a/entries/", after, 10)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		pages++
		for _, o := range page {
			got = append(got, o.Key)
			if o.Size != int64(len(o.Key)) || o.ETag == "" {
				t.Errorf("List info %+v: want size %d and an ETag", o, len(o.Key))
			}
		}
		if len(page) < 10 {
			break
		}
		after = page[len(page)-1].Key
	}
	if pages != 3 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged listing in %d pages = %v, want 3 pages of %v", pages, got, want)
	}

	var all []string
	if err := objstore.Walk(ctx, s, "repos/a", func(o objstore.Info) error { all = append(all, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	wantAll := append([]string{"repos/a.b/x"}, want...)
	wantAll = append(wantAll, "repos/a/index", "repos/a0")
	if strings.Join(all, ",") != strings.Join(wantAll, ",") {
		t.Fatalf("Walk(repos/a) = %v, want %v (byte-wise key order)", all, wantAll)
	}
	if page, err := s.List(ctx, "nothing/", "", 10); err != nil || len(page) != 0 {
		t.Fatalf("List of empty prefix = %v, %v", page, err)
	}
	// A partial last segment works as a prefix too.
	page, err := s.List(ctx, "repos/a/entries/02", "", 100)
	if err != nil || len(page) != 5 {
		t.Fatalf("List(partial segment) = %d objects, %v; want 5", len(page), err)
	}
}

func testCopy(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	put(t, s, "repos/a/entries/1.pack", "payload")
	if err := s.Copy(ctx, "repos/a/entries/1.pack", "repos/b/entries/1.pack"); err != nil {
		t.Fatalf("Copy: %v", err)
	}
	if got, _ := get(t, s, "repos/b/entries/1.pack"); got != "payload" {
		t.Fatalf("copied object = %q", got)
	}
	// The copy is an object of its own: replacing or deleting the source
	// leaves it as it was, and replacing it leaves the source.
	put(t, s, "repos/a/entries/1.pack", "replaced")
	if got, _ := get(t, s, "repos/b/entries/1.pack"); got != "payload" {
		t.Fatalf("copy after its source was replaced = %q, want the copied bytes", got)
	}
	put(t, s, "repos/b/entries/1.pack", "copy replaced")
	if got, _ := get(t, s, "repos/a/entries/1.pack"); got != "replaced" {
		t.Fatalf("source after its copy was replaced = %q", got)
	}
	if err := s.Copy(ctx, "repos/a/entries/1.pack", "repos/b/entries/1.pack"); err != nil {
		t.Fatalf("Copy over an existing object: %v", err)
	}
	if err := s.Delete(ctx, "repos/a/entries/1.pack"); err != nil {
		t.Fatal(err)
	}
	if got, _ := get(t, s, "repos/b/entries/1.pack"); got != "replaced" {
		t.Fatalf("copy after its source was deleted = %q, want %q", got, "replaced")
	}
	if err := s.Copy(ctx, "repos/a/missing", "repos/b/x"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Copy of missing source: err = %v, want ErrNotFound", err)
	}
}

// testCASRace runs rounds in which every writer reads the same ETag, then
// all race a PutIfMatch on it: exactly one may win each round.
func testCASRace(t *testing.T, s objstore.Store, rounds, writers int) {
	ctx := context.Background()
	const k = "repos/race/index"
	put(t, s, k, "init")
	for round := range rounds {
		_, info := get(t, s, k)
		var wins atomic.Int32
		var other atomic.Value
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				v := fmt.Sprintf("r%d-w%d", round, w)
				_, err := s.PutIfMatch(ctx, k, strings.NewReader(v), int64(len(v)), info.ETag)
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, objstore.ErrPreconditionFailed):
					other.Store(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if e := other.Load(); e != nil {
			t.Fatalf("round %d: unexpected error %v", round, e)
		}
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d writers won the CAS, want exactly 1", round, n)
		}
		if got, _ := get(t, s, k); !strings.HasPrefix(got, fmt.Sprintf("r%d-", round)) {
			t.Fatalf("round %d: value %q is not this round's winner", round, got)
		}
	}
}

// testCreateRace runs rounds in which every writer races a PutIfAbsent on
// a fresh key: exactly one may win each round, the rest must see
// ErrPreconditionFailed, and the stored value must be the winner's. Record
// creation (repository names, tenants, first index writes) rests on this.
func testCreateRace(t *testing.T, s objstore.Store, rounds, writers int) {
	ctx := context.Background()
	for round := range rounds {
		k := fmt.Sprintf("meta/race/%d", round)
		var wins atomic.Int32
		var winner atomic.Value
		var other atomic.Value
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				v := fmt.Sprintf("r%d-w%d", round, w)
				_, err := s.PutIfAbsent(ctx, k, strings.NewReader(v), int64(len(v)))
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(v)
				case !errors.Is(err, objstore.ErrPreconditionFailed):
					other.Store(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if e := other.Load(); e != nil {
			t.Fatalf("round %d: unexpected error %v", round, e)
		}
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d writers won PutIfAbsent, want exactly 1", round, n)
		}
		if got, _ := get(t, s, k); got != winner.Load() {
			t.Fatalf("round %d: value %q, but %q won", round, got, winner.Load())
		}
	}
}

// register ops for porcupine: a read returns the value; a CAS presents the
// value it read (its ETag stands for it: every write is a unique value) and
// reports whether it won.
type regInput struct {
	cas      bool
	expect   string // value whose ETag was presented
	newValue string
}

type regOutput struct {
	ok    bool
	value string
}

// registerModel is a register whose writes are compare-and-swaps. init is
// the value the history starts from.
func registerModel(init string) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			st, in, out := state.(string), input.(regInput), output.(regOutput)
			if !in.cas {
				return out.value == st, st
			}
			if out.ok {
				return st == in.expect, in.newValue
			}
			return st != in.expect, st
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(regInput), output.(regOutput)
			if in.cas {
				return fmt.Sprintf("cas(%s->%s)=%v", in.expect, in.newValue, out.ok)
			}
			return "read()=" + out.value
		},
	}
}

// testLinearizable lets 8 clients interleave reads and CASes freely and
// checks each recorded history with porcupine. Histories are kept small
// (8 clients, two read+CAS pairs each, per round) because the checker's
// search grows exponentially with overlap; the 32-writer race is
// CASRace's job.
func testLinearizable(t *testing.T, s objstore.Store) {
	ctx := context.Background()
	const k = "repos/lin/index"
	put(t, s, k, "v0")
	for round := range 20 {
		init, _ := get(t, s, k)
		var (
			mu     sync.Mutex
			events []porcupine.Operation
			wg     sync.WaitGroup
			epoch  = time.Now()
			failed atomic.Value
		)
		now := func() int64 { return int64(time.Since(epoch)) }
		record := func(op porcupine.Operation) { mu.Lock(); events = append(events, op); mu.Unlock() }
		for c := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 2 {
					call := now()
					rc, info, err := s.Get(ctx, k)
					if err != nil {
						failed.Store(err)
						return
					}
					b, err := io.ReadAll(rc)
					rc.Close()
					if err != nil {
						failed.Store(err)
						return
					}
					record(porcupine.Operation{ClientId: c, Input: regInput{}, Output: regOutput{value: string(b)}, Call: call, Return: now()})
					nv := fmt.Sprintf("r%d-c%d-%d", round, c, i)
					call = now()
					_, err = s.PutIfMatch(ctx, k, strings.NewReader(nv), int64(len(nv)), info.ETag)
					if err != nil && !errors.Is(err, objstore.ErrPreconditionFailed) {
						failed.Store(err)
						return
					}
					record(porcupine.Operation{ClientId: c, Input: regInput{cas: true, expect: string(b), newValue: nv}, Output: regOutput{ok: err == nil}, Call: call, Return: now()})
				}
			}()
		}
		wg.Wait()
		if e := failed.Load(); e != nil {
			t.Fatalf("round %d: unexpected error: %v", round, e)
		}
		res, _ := porcupine.CheckOperationsVerbose(registerModel(init), events, time.Minute)
		if res != porcupine.Ok {
			t.Fatalf("round %d: history of %d operations is not linearizable (result %v)", round, len(events), res)
		}
	}
}

// pattern is a deterministic incompressible stream that never holds more
// than one buffer.
type pattern struct {
	r *rand.ChaCha8
	n int64
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > p.n {
		b = b[:p.n]
	}
	p.r.Read(b)
	p.n -= int64(len(b))
	return len(b), nil
}

func newPattern(size int64) *pattern {
	return &pattern{r: rand.NewChaCha8([32]byte{'g', 'h', 'o', 's', 't'}), n: size}
}

// heapSampler records the peak heap in use while it runs.
type heapSampler struct {
	stop chan struct{}
	done chan uint64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan uint64)}
	go func() {
		var peak uint64
		var ms runtime.MemStats
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-h.stop:
				h.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) peak() uint64 { close(h.stop); return <-h.done }

func testLarge(t *testing.T, s objstore.Store, size int64, maxGrowth uint64) {
	ctx := context.Background()
	const k = "repos/big/entries/big.pack"
	wantSum := sha256.New()
	if _, err := io.Copy(wantSum, newPattern(size)); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	h := sampleHeap()
	if _, err := s.Put(ctx, k, newPattern(size), size); err != nil {
		h.peak()
		t.Fatalf("Put of %d bytes: %v", size, err)
	}
	rc, info, err := s.Get(ctx, k)
	if err != nil {
		h.peak()
		t.Fatal(err)
	}
	gotSum := sha256.New()
	n, err := io.Copy(gotSum, rc)
	rc.Close()
	peak := h.peak()
	if err != nil || n != size || info.Size != size {
		t.Fatalf("read back %d bytes (Info.Size %d), err %v; want %d", n, info.Size, err, size)
	}
	if !bytes.Equal(gotSum.Sum(nil), wantSum.Sum(nil)) {
		t.Fatal("large object read back with different content")
	}
	growth := uint64(0)
	if peak > base {
		growth = peak - base
	}
	t.Logf("streamed %d MiB: heap in use grew by %.1f MiB (baseline %.1f MiB)", size>>20, float64(growth)/(1<<20), float64(base)/(1<<20))
	if growth > maxGrowth {
		t.Fatalf("heap grew by %d bytes while streaming %d bytes; want at most %d", growth, size, maxGrowth)
	}
	// A ranged read deep inside the object returns the right bytes.
	rc, err = s.GetRange(ctx, k, size-10, 10)
	if err != nil {
		t.Fatal(err)
	}
	tail, _ := io.ReadAll(rc)
	rc.Close()
	p := newPattern(size)
	io.CopyN(io.Discard, p, size-10)
	want, _ := io.ReadAll(p)
	if !bytes.Equal(tail, want) {
		t.Fatalf("tail range = %x, want %x", tail, want)
	}
}
