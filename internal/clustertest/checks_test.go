package clustertest

import (
	"math/rand/v2"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

// These tests run with "go test ./..." (no cluster): they feed the
// checks of TestCluster histories with known faults and make sure each
// check reports them, so that a cluster run passing means something.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// testGraph: main is m0 <- m1 <- m2 <- m3, where m3 is a merge whose
// second parent s1 is off main's first-parent line; c0 is x0 <- x1 <- x2.
func testGraph() *graph {
	return &graph{
		refs: map[string]string{"refs/heads/main": "m3", "refs/heads/c0": "x2"},
		parents: map[string][]string{
			"m0": nil, "m1": {"m0"}, "m2": {"m1"}, "m3": {"m2", "s1"}, "s1": {"m0"},
			"x0": {"m0"}, "x1": {"x0"}, "x2": {"x1"},
		},
		objects: map[string]bool{"m0": true, "m1": true, "m2": true, "m3": true, "s1": true, "x0": true, "x1": true, "x2": true},
	}
}

func TestChainProblems(t *testing.T) {
	if r := testGraph().reach("m3"); len(r) != 5 || !r["s1"] || r["x0"] {
		t.Fatalf("m3 reaches %v, want m0-m3 and s1", r)
	}
	if l := testGraph().firstParents("m3"); len(l) != 4 || l["s1"] {
		t.Fatalf("m3's first-parent line %v, want m0-m3", l)
	}
	final := finals{"a/r": testGraph()}
	main := func(id string, s int) pushRecord {
		return pushRecord{Repo: "a/r", Ref: "refs/heads/main", New: id, End: at(s)}
	}
	own := func(id string, s int, forced bool) pushRecord {
		return pushRecord{Repo: "a/r", Ref: "refs/heads/c0", New: id, End: at(s), Forced: forced}
	}
	good := []pushRecord{main("m1", 1), main("m3", 3), main("m2", 2), own("x0", 1, false), own("x2", 5, false)}
	if checked, _, p := chainProblems(good, final); len(p) != 0 || checked != 5 {
		t.Fatalf("a clean history: checked %d, problems %v", checked, p)
	}
	for name, tc := range map[string]struct {
		acked []pushRecord
		want  string
	}{
		"lost push":           {append(good, main("mz", 4)), "mz (client 0, 0 attempts, last via node0, at 00:00:04.000) not in the repository"},
		"off the chain":       {append(good, main("s1", 4)), "present but off the ref's first-parent line"},
		"ref gone":            {append(good, pushRecord{Repo: "a/r", Ref: "refs/heads/c9", New: "x1", End: at(1)}), "refs/heads/c9: the ref is gone"},
		"repository not read": {append(good, pushRecord{Repo: "a/q", Ref: "refs/heads/main", New: "m1", End: at(1)}), "a/q: no clone"},
		// y1 was acknowledged, then a force push replaced it; without the
		// force flag, y1 must still be on the branch.
		"unforced rewrite": {append(good, own("y1", 0, false), own("x1", 3, false)), "y1"},
	} {
		_, _, p := chainProblems(tc.acked, final)
		if len(p) != 1 || !strings.Contains(p[0], tc.want) {
			t.Errorf("%s: problems %q, want one naming %q", name, p, tc.want)
		}
	}
	forced := append(good, own("y1", 0, false), own("x1", 3, true))
	if _, n, p := chainProblems(forced, final); len(p) != 0 || n != 1 {
		t.Errorf("a force push drops what came before it: %d forced, problems %v", n, p)
	}
}

func TestStaleClones(t *testing.T) {
	reach := map[string]map[string]bool{
		"refs/heads/main": {"m0": true, "m1": true},
		"refs/heads/c0":   {"m0": true, "x0": true, "x1": true},
	}
	clone := cloneRecord{Repo: "a/r", Start: at(10), Reach: reach}
	acked := []pushRecord{
		{Repo: "a/r", Ref: "refs/heads/main", New: "m1", End: at(5)},
		{Repo: "a/r", Ref: "refs/heads/c0", New: "x1", End: at(6)},
		{Repo: "a/r", Ref: "refs/heads/main", New: "m2", End: at(11)}, // after the clone began
		{Repo: "a/q", Ref: "refs/heads/main", New: "q1", End: at(1)},  // another repository
	}
	ok, failed, _, stale := staleClones([]cloneRecord{clone, {Repo: "a/r", Err: "git clone: exit status 128: fatal: unable to access"}}, acked, nil)
	if ok != 1 || failed != 1 || len(stale) != 0 {
		t.Fatalf("ok %d failed %d stale %v; want 1, 1, none", ok, failed, stale)
	}
	lateMain := append(acked, pushRecord{Repo: "a/r", Ref: "refs/heads/main", New: "m2", End: at(9)})
	if _, _, _, stale := staleClones([]cloneRecord{clone}, lateMain, nil); len(stale) != 1 || !strings.Contains(stale[0], "lacks refs/heads/main m2") {
		t.Errorf("a clone without an earlier acknowledged main: %v", stale)
	}
	lateOwn := append(acked, pushRecord{Repo: "a/r", Ref: "refs/heads/c0", New: "x2", End: at(8)})
	if _, _, _, stale := staleClones([]cloneRecord{clone}, lateOwn, nil); len(stale) != 1 || !strings.Contains(stale[0], "lacks refs/heads/c0 x2") {
		t.Errorf("a clone without the own branch's last acknowledged tip: %v", stale)
	}
	// A force push that began after x2 was acknowledged and before the
	// clone may have replaced it: no verdict on that ref.
	force := []pushRecord{{Repo: "a/r", Ref: "refs/heads/c0", New: "y1", Forced: true, Start: at(9)}}
	if _, _, _, stale := staleClones([]cloneRecord{clone}, lateOwn, force); len(stale) != 0 {
		t.Errorf("a ref a force push may have rewritten was judged: %v", stale)
	}
}

func TestTallyAlerts(t *testing.T) {
	s := func(blob string) planted {
		return planted{Repo: "a/r", Blob: blob, Secret: "ghp_" + blob + "xxxxxx", Path: blob + ".txt"}
	}
	want := []planted{s("b1"), s("b2"), s("b3")}
	all := append(want, s("b4")) // b4 never landed
	byBlob := map[string][]alertJSON{
		"b1": {{ID: "f1"}},
		"b3": {{ID: "f3"}, {ID: "f3bis"}},
		"b4": {{ID: "f4"}},
		"zz": {{ID: "f9"}},
	}
	tl := tallyAlerts(want, all, byBlob)
	if tl.alerted != 2 || len(tl.missing) != 1 || tl.missing[0].Blob != "b2" || len(tl.dupLines) != 1 || tl.unexpected != 1 {
		t.Fatalf("tally %+v; want 2 alerted, b2 missing, b3 doubled, one unexpected", tl)
	}
}

func TestGCProblems(t *testing.T) {
	out := `ghost gc: store s3://ghost/ at http://127.0.0.1:1 (dry run: nothing is deleted)
would delete repos/R1/entries/01A.pack 100 bytes (orphan entry)
would delete repos/R1/entries/01B.pack 100 bytes (folded by a checkpoint)
would tombstone orphan log R2 (no repository name points at it)
would tombstone orphan log R9 (no repository name points at it)
would delete 2 objects, 200 bytes; 2 orphan logs; 3 logs listed; kept 0 unreferenced objects within grace or retention`
	would, summary, bad := gcProblems(out, map[string]bool{"repos/R1/entries/01B.pack": true}, map[string]bool{"R1": true, "R2": true})
	if would != 2 || !strings.HasPrefix(summary, "would delete 2 objects") || len(bad) != 2 ||
		!strings.Contains(bad[0], "01B.pack") || !strings.Contains(bad[1], "orphan log R2") {
		t.Fatalf("would %d, summary %q, bad %q", would, summary, bad)
	}
}

func TestCountersExact(t *testing.T) {
	ok := "tenant 7c8d 12\nglobal 12\ncounters under /ghost/coord are correct\n"
	if err := countersExact(ok); err != nil {
		t.Errorf("exact counters: %v", err)
	}
	for _, bad := range []string{
		"tenant 7c8d 12\nglobal 12\nfixed /ghost/coord/count/global (was 13)\n",
		"",
	} {
		if err := countersExact(bad); err == nil {
			t.Errorf("%q passed", bad)
		}
	}
}

func TestScheduleIsSeeded(t *testing.T) {
	a := schedule(rand.New(rand.NewPCG(7, 0)), 65, 10*time.Minute, 3, 3)
	b := schedule(rand.New(rand.NewPCG(7, 0)), 65, 10*time.Minute, 3, 3)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("one seed gave two schedules")
	}
	if c := schedule(rand.New(rand.NewPCG(8, 0)), 65, 10*time.Minute, 3, 3); reflect.DeepEqual(a, c) {
		t.Fatal("two seeds gave one schedule")
	}
	if len(a) != 65 {
		t.Fatalf("%d faults, want 65", len(a))
	}
	for _, n := range []int{8, 12, 65} {
		if counts := faultCounts(schedule(rand.New(rand.NewPCG(7, 0)), n, time.Minute, 3, 3)); strings.Count(counts, ",") != 7 {
			t.Errorf("%d faults do not cover the 8 classes: %s", n, counts)
		}
	}
	valid := map[string]bool{"node0": true, "node1": true, "node2": true, "etcd0": true, "etcd1": true, "etcd2": true, "gateway": true}
	for i, f := range a {
		if f.At < 30*time.Second || f.At > 570*time.Second || (i > 0 && f.At < a[i-1].At) {
			t.Errorf("fault %d at %v: out of the window or out of order", i, f.At)
		}
		if f.Down < time.Second || f.Down > 8*time.Second || (f.Action != "kill" && f.Action != "stop") {
			t.Errorf("fault %d: %v", i, f)
		}
		for _, n := range f.Targets {
			if !valid[n] {
				t.Errorf("fault %d targets %q", i, n)
			}
		}
		if len(f.Targets) == 2 && f.Targets[0] == f.Targets[1] {
			t.Errorf("fault %d takes one member down twice: %v", i, f)
		}
	}
}

func TestBlobID(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the git binary is not on PATH (exec.LookPath(\"git\") failed)")
	}
	content := "# planted\ntoken = ghp_x\n"
	cmd := exec.Command("git", "hash-object", "--stdin")
	cmd.Stdin = strings.NewReader(content)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := blobID(content), strings.TrimSpace(string(out)); got != want {
		t.Fatalf("blobID %s, git says %s", got, want)
	}
}

func TestLandedFailures(t *testing.T) {
	seqs := pushSeqs{"R1": {"n1": 4, "n2": 5}}
	ids := map[string]string{"a/r": "R1"}
	failed := []pushRecord{
		{Repo: "a/r", Ref: "refs/heads/c0", New: "n1", Ambiguous: true, Err: "HTTP 500"},
		{Repo: "a/r", Ref: "refs/heads/c1", New: "n2", Err: "HTTP 503"},
		{Repo: "a/r", Ref: "refs/heads/c2", New: "n3", Err: "HTTP 503"}, // did not commit
		{Repo: "a/r", Ref: "refs/heads/main", Err: "gave up"},           // no id
	}
	landed, lied := landedFailures(failed, ids, seqs)
	if len(landed) != 2 || len(lied) != 1 || !strings.Contains(lied[0], "c1 n2 committed at seq 5") {
		t.Fatalf("landed %q, lied %q", landed, lied)
	}
	for cause, want := range map[string]bool{"connection refused": true, "HTTP 404": true, "HTTP 503": true, "HTTP 500": false, "stalled": false, "killed (timeout)": false} {
		if definiteCause(cause) != want {
			t.Errorf("definiteCause(%q) = %v", cause, !want)
		}
	}
}

func TestShortCause(t *testing.T) {
	for out, want := range map[string]string{
		"error: RPC failed; HTTP 500 curl 22 The requested URL returned error: 500\nsend-pack: unexpected disconnect": "HTTP 500",
		"fatal: unable to access 'http://127.0.0.1:1/a/b.git/': The requested URL returned error: 503":                "HTTP 503",
		"error: RPC failed; curl 7 Failed to connect to 127.0.0.1 port 1 after 0 ms: Couldn't connect to server":      "connection refused",
		"fatal: unable to access 'http://127.0.0.1:1/a/b.git/': Recv failure: Connection reset by peer":               "connection reset",
		"fatal: unable to access 'http://127.0.0.1:1/a/b.git/': Empty reply from server":                              "empty reply",
		"fatal: Authentication failed for 'http://127.0.0.1:1/a/b.git/'":                                              "HTTP 401 (git: Authentication failed)",
		"To http://x\n!\tHEAD:refs/heads/c1\t[remote rejected] (atomic push failure)\nDone":                           "[remote rejected] (atomic push failure)",
		"": "killed (timeout)",
	} {
		if got := shortCause(out); got != want {
			t.Errorf("shortCause(%q) = %q, want %q", out, got, want)
		}
	}
}

func TestSeqRanges(t *testing.T) {
	if got := seqRanges([]uint64{9, 1, 2, 3, 4, 7, 10}); got != "1-4,7,9-10" {
		t.Fatalf("seqRanges = %q", got)
	}
}

func TestMaskedReason(t *testing.T) {
	a := "failed 3 attempts; last: scanner: invalid argument: seq 10 is not a layer of the log (compacted through 22, head 28)"
	b := "failed 4 attempts; last: scanner: invalid argument: seq 9 is not a layer of the log (compacted through 35, head 45)"
	if x, y := digits.ReplaceAllString(a, "N"), digits.ReplaceAllString(b, "N"); x != y {
		t.Fatalf("%q and %q group apart", x, y)
	}
	if got := digits.ReplaceAllString("read index of 01M8SB9G9NJ9M3D295SBE6BPSE at 127.0.0.1:80", "N"); got != "read index of 01M8SB9G9NJ9M3D295SBE6BPSE at N.N.N.N:N" {
		t.Fatalf("masked %q", got)
	}
}
