package cli

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestGCDryRun: "ghost gc --dry-run" names the store, lists every object
// that would go with its size and reason, sums the bytes and deletes
// nothing; "ghost gc" then deletes exactly that.
func TestGCDryRun(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	ctx := context.Background()
	mustGhost(t, dir, "tenant", "create", "alice")
	out := mustGhost(t, dir, "repo", "create", "alice/app")
	_, id, ok := strings.Cut(strings.TrimSpace(out), "(id ")
	id = strings.TrimSuffix(id, ")")
	if !ok || wal.CheckRepoID(id) != nil {
		t.Fatalf("repo create said %q", out)
	}

	objects, err := fsstore.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	// A push two days ago: referenced, so kept however old.
	past := time.Now().Add(-48 * time.Hour)
	old := wal.New(objects, wal.Options{Now: func() time.Time { return past }})
	pack := "PACK"
	if _, err := old.Commit(ctx, id, wal.Push{
		Transitions: []wal.Transition{{Ref: "refs/heads/main", Old: wal.ZeroID, New: strings.Repeat("1", 40)}},
		Pack:        strings.NewReader(pack), PackSize: int64(len(pack)),
	}); err != nil {
		t.Fatal(err)
	}
	put := func(key, body string) {
		t.Helper()
		if _, err := objects.Put(ctx, key, strings.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	// Orphans of a push that died two days ago (entry and .idx), and one
	// of a push a minute ago, which the grace period keeps.
	stale := ulid.MustNew(ulid.Timestamp(past), rand.Reader)
	put(wal.EntryKey(id, stale), "stale entry")
	put(wal.PackIndexKey(id, stale), "stale idx")
	put(wal.EntryKey(id, ulid.MustNew(ulid.Timestamp(time.Now().Add(-time.Minute)), rand.Reader)), "young")
	// A log no name points at, made two days ago by a fork that died
	// before claiming its name.
	orphan := ulid.MustNew(ulid.Timestamp(past), rand.Reader).String()
	if err := old.Fork(ctx, id, orphan); err != nil {
		t.Fatal(err)
	}
	// A write the filesystem store never finished, two days ago.
	tmp := filepath.Join(dir, "objects", "tmp", "put-123")
	if err := os.WriteFile(tmp, []byte("torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, past, past); err != nil {
		t.Fatal(err)
	}
	before := listKeys(t, objects)

	r := ghost(t, dir, "gc", "--dry-run")
	if r.code != 0 {
		t.Fatalf("gc --dry-run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	forked := before[0]
	for _, k := range before {
		if strings.HasPrefix(k, "repos/"+orphan+"/entries/") {
			forked = k
		}
	}
	size := func(key string) int64 {
		t.Helper()
		_, info, err := objects.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size
	}
	type line struct {
		key    string
		reason string
	}
	// Logs come in key order; ULIDs sort by time, so the orphan log
	// (two days old) sorts before the named one (made now).
	want := []string{fmt.Sprintf("ghost gc: store filesystem %s (dry run: nothing is deleted)", filepath.Join(dir, "objects"))}
	want = append(want, "would tombstone orphan log "+orphan+" (no repository name points at it)")
	var total int64
	for _, l := range []line{
		{forked, "orphan-log"},
		{wal.PackIndexKey(id, stale), "unreferenced"},
		{wal.EntryKey(id, stale), "unreferenced"},
	} {
		n := size(l.key)
		total += n
		want = append(want, fmt.Sprintf("would delete %s %d bytes (%s)", l.key, n, l.reason))
	}
	want = append(want, fmt.Sprintf("would delete temporary %s 4 bytes", tmp))
	total += 4
	want = append(want, fmt.Sprintf("would delete 4 objects, %d bytes; 1 orphan logs; 2 logs listed; kept 1 unreferenced objects within grace or retention", total))
	if got := strings.TrimSpace(r.stdout); got != strings.Join(want, "\n") {
		t.Fatalf("dry run printed\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
	if after := listKeys(t, objects); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("dry run changed the store:\n%v\n%v", before, after)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("dry run removed the temporary: %v", err)
	}

	out = mustGhost(t, dir, "gc")
	if !strings.Contains(out, fmt.Sprintf("deleted 4 objects, %d bytes", total)) {
		t.Fatalf("gc printed\n%s", out)
	}
	if out := mustGhost(t, dir, "gc", "--dry-run"); !strings.Contains(out, "would delete 0 objects, 0 bytes; 0 orphan logs") {
		t.Fatalf("second dry run printed\n%s", out)
	}
	// The named repository still reads whole.
	x, err := old.Head(ctx, id)
	if err != nil || len(x.Layers) != 1 {
		t.Fatalf("head after gc: %+v %v", x, err)
	}
	if _, _, err := old.OpenPack(ctx, id, x.Layers[0]); err != nil {
		t.Fatal(err)
	}
	if r := ghost(t, dir, "gc", "--grace", "1m"); r.code != 2 || !strings.Contains(r.stderr, "--grace 1m is below 1h, which in-flight pushes") {
		t.Fatalf("gc --grace 1m: exit %d, %s", r.code, r.stderr)
	}
}

func listKeys(t *testing.T, s objstore.Store) []string {
	t.Helper()
	var keys []string
	if err := objstore.Walk(context.Background(), s, "", func(o objstore.Info) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}
