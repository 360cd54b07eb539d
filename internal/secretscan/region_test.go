package secretscan

import (
	"bufio"
	"context"
	"fmt"
	"hash/maphash"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestChangedLines: the lines a blob's base lacks, counting repeats and
// the newline of the last line; the others map to the base's lines.
func TestChangedLines(t *testing.T) {
	seed := maphash.MakeSeed()
	for _, c := range []struct {
		name, base, blob string
		want             []string // changed lines
		runs             []lineRun
	}{
		{"same", "a\nb\n", "a\nb\n", nil, []lineRun{{0, 0, 2}}},
		{"insert in the middle", "a\nb\nc\n", "a\nb\nS\nc\n", []string{"S\n"}, []lineRun{{0, 0, 2}, {2, 3, 1}}},
		{"a repeat counts", "x\ny\n", "x\ny\nx\n", []string{"x\n"}, []lineRun{{0, 0, 2}}},
		{"newline added at the end", "a\nb", "a\nb\n", []string{"b\n"}, []lineRun{{0, 0, 1}}},
		{"newline removed at the end", "a\nb\n", "a\nb", []string{"b"}, []lineRun{{0, 0, 1}}},
		{"two runs merge", "a\nb\nc\n", "X\nY\nc\n", []string{"X\nY\n"}, []lineRun{{2, 2, 1}}},
		{"moved line", "a\nb\nc\n", "c\na\nb\n", nil, []lineRun{{2, 0, 1}, {0, 1, 2}}},
		{"first version", "", "a\nb\n", []string{"a\nb\n"}, nil},
	} {
		base := make(lineSet)
		changedLines([]byte(c.base), nil, base, seed, false)
		spans, runs := changedLines([]byte(c.blob), base, nil, seed, true)
		var got []string
		for _, s := range spans {
			got = append(got, c.blob[s.start:s.end])
		}
		if !slices.Equal(got, c.want) || !slices.Equal(runs, c.runs) {
			t.Errorf("%s: changed %q runs %v, want %q %v", c.name, got, runs, c.want, c.runs)
		}
	}
}

func TestAllKeptShiftLines(t *testing.T) {
	runs := []lineRun{{0, 0, 10}, {12, 11, 5}} // blob line 10 is new; base lines 10, 11 gone
	for _, c := range []struct {
		lo, hi int32
		want   bool
	}{{0, 9, true}, {8, 10, false}, {11, 15, true}, {15, 20, true}, {-3, 2, true}, {10, 10, false}, {16, 17, true}} {
		if got := allKept(runs, c.lo, c.hi, 16); got != c.want {
			t.Errorf("allKept(%d, %d) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	if d, ok := shiftLines(runs, 13, 14); !ok || d != -1 {
		t.Errorf("shiftLines(13, 14) = %d, %v; want -1, true", d, ok)
	}
	if _, ok := shiftLines(runs, 9, 12); ok {
		t.Error("shiftLines across two runs must fail")
	}
}

// TestChainOrder: each object comes after its base; a cycle of bases
// is broken and scanned whole.
func TestChainOrder(t *testing.T) {
	key := func(b byte) oidKey {
		var k oidKey
		k[0], k[32] = b, 20
		return k
	}
	objs := []scanObj{{key: key(3)}, {key: key(1)}, {key: key(2)}, {key: key(4)}, {key: key(5)}, {key: key(6)}}
	bases := map[oidKey]oidKey{key(3): key(2), key(2): key(1), key(4): key(1), key(5): key(6), key(6): key(5)}
	out, plan := chainOrder(objs, bases)
	pos := make(map[oidKey]int)
	for i, o := range out {
		pos[o.key] = i
	}
	if len(out) != len(objs) || len(pos) != len(objs) {
		t.Fatalf("chainOrder lost or doubled objects: %v", out)
	}
	for i, o := range out {
		b := plan.base[i]
		if want, ok := bases[o.key]; ok && b >= 0 && out[b].key != want {
			t.Errorf("object %d: base %v, want %v", o.key[0], out[b].key[0], want[0])
		}
		if b >= int32(i) {
			t.Errorf("object %d comes before its base", o.key[0])
		}
	}
	for _, k := range []byte{2, 3, 4} {
		if plan.base[pos[key(k)]] < 0 {
			t.Errorf("object %d is scanned whole, want against its base", k)
		}
	}
	if plan.base[pos[key(5)]] >= 0 && plan.base[pos[key(6)]] >= 0 {
		t.Error("a cycle of bases was not broken")
	}
	if plan.kids[pos[key(1)]] != 2 {
		t.Errorf("object 1 has %d derived objects, want 2", plan.kids[pos[key(1)]])
	}
}

// filler is n lines of code in which keywords abound and nothing is a
// secret.
func filler(n, seed int) []string {
	out := make([]string, n)
	for i := range out {
		switch i % 4 {
		case 0:
			out[i] = fmt.Sprintf("func handler%d_%d(key string, token int) error {", seed, i)
		case 1:
			out[i] = fmt.Sprintf("\tapiKey := lookup(key, %d) // the auth secret lives elsewhere", i)
		case 2:
			out[i] = "\treturn check(apiKey, token)"
		default:
			out[i] = "}"
		}
	}
	return out
}

// TestRegionScanHistory: a whole-history scan that matches only the
// lines a blob's base lacks finds, at the same commits and lines, what
// scanning every blob whole finds: a secret in a file's first version;
// one added in the middle of a big file; one spanning the border of the
// changed lines (its key line kept, its value line new); a private key
// of which only a middle line changed (beyond gitleaks); and a secret
// left in place while lines around it change is not reported again.
func TestRegionScanHistory(t *testing.T) {
	h := newHistory(t)
	lines := filler(3000, 1)
	first := slices.Clone(lines)
	first[1500] = `db_password = "Zq8rT2vW9xK4mN7pL3sB"`
	h.write("big.go", strings.Join(first, "\n")+"\n")
	h.write("key.pem", pemFile(pemBody(7)))
	c1 := h.commit("first versions")

	second := slices.Clone(first)
	second = slices.Insert(second, 2200, `aws_secret = "AKIAQ7XW2NBV5KD3LPMZ"`)
	h.write("big.go", strings.Join(second, "\n")+"\n")
	c2 := h.commit("a secret in the middle")

	third := slices.Clone(second)
	third = slices.Insert(third, 2700, `api_token =`, `"Hn4kT8pQ2wX6vB9mR3sL7yD1"`)
	h.write("big.go", strings.Join(third, "\n")+"\n")
	h.commit("a two-line secret")
	fourth := slices.Clone(third)
	fourth[2701] = `"Pf6jW3nV8tQ1xK5cZ9rM2hB4"` // only the value line changes
	h.write("big.go", strings.Join(fourth, "\n")+"\n")
	c4 := h.commit("the value changes, its key line does not")

	body := pemBody(7)
	body[6] = "Z" + body[6][1:]
	h.write("key.pem", pemFile(body))
	c5 := h.commit("a middle line of the key")

	fifth := slices.Clone(fourth)
	fifth[10] = "// a comment far from every secret"
	fifth[1499] = "\t// right above the first secret"
	h.write("big.go", strings.Join(fifth, "\n")+"\n")
	h.commit("lines around the secrets change")

	scan := func(whole bool) ([]string, Stats) {
		cfg, err := DefaultConfig()
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(cfg, Options{Workers: 2, MaxDecodeDepth: 5, WholeBlobs: whole})
		if err != nil {
			t.Fatal(err)
		}
		_, a, _ := h.scanAll(e)
		var got []string
		for _, f := range a.Findings {
			got = append(got, fmt.Sprintf("%s %.7s %s:%d", f.RuleID, f.Commit, f.Path, f.StartLine))
		}
		slices.Sort(got)
		ctx := context.Background()
		bs, err := e.ScanRepo(ctx, h.repo(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer bs.Close()
		return got, bs.Stats
	}
	whole, wst := scan(true)
	region, rst := scan(false)
	if !slices.Equal(whole, region) {
		t.Errorf("scanning only changed lines found\n%s\nscanning whole blobs\n%s", strings.Join(region, "\n"), strings.Join(whole, "\n"))
	}
	want := []string{
		fmt.Sprintf("generic-api-key %.7s big.go:1501", c1),
		fmt.Sprintf("aws-access-token %.7s big.go:2201", c2),
		fmt.Sprintf("generic-api-key %.7s big.go:2701", c4),
		fmt.Sprintf("private-key %.7s key.pem:1", c1),
		fmt.Sprintf("private-key %.7s key.pem:1", c5),
	}
	for _, w := range want {
		if !slices.Contains(region, w) {
			t.Errorf("missing %s; found\n%s", w, strings.Join(region, "\n"))
		}
	}
	if wst.BlobsChanged != 0 || rst.BlobsChanged < 4 {
		t.Errorf("blobs matched only where changed: %d whole, %d by default; want 0 and at least 4", wst.BlobsChanged, rst.BlobsChanged)
	}
	if rst.BytesChanged*10 > rst.BytesScanned {
		t.Errorf("changed lines are %d of %d bytes: the scan did not narrow", rst.BytesChanged, rst.BytesScanned)
	}
}

// TestRegionScanMergedWindows: where windows around many keyword hits
// merge into one region (a block of settings, each line a secret), the
// scan of a blob finds candidates far from its changed line too; only
// those near it are kept, the others are inherited from the base, and
// none is reported twice.
func TestRegionScanMergedWindows(t *testing.T) {
	h := newHistory(t)
	var block []string
	for i := range 40 {
		block = append(block, fmt.Sprintf("service_%02d_token = %q", i, fmt.Sprintf("Tk%02dq7Vw2Xr9Lm4Np8Zs3Bd6Hj", i)))
	}
	h.write("settings.env", strings.Join(block, "\n")+"\n")
	h.commit("settings")
	block[0] = "# settings of the services"
	h.write("settings.env", strings.Join(block, "\n")+"\n")
	h.commit("a comment on the first line")
	for _, whole := range []bool{true, false} {
		cfg, err := DefaultConfig()
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(cfg, Options{Workers: 2, WholeBlobs: whole})
		if err != nil {
			t.Fatal(err)
		}
		_, a, _ := h.scanAll(e)
		if len(a.Findings) != 40 {
			t.Errorf("whole blobs %v: %d findings, want the 40 secrets once each", whole, len(a.Findings))
		}
	}
}

// TestRegionEquivalentOnRepo compares, blob by blob, the candidates of a
// whole-history scan that matches only changed lines with those of one
// that matches every blob whole, on a local repository:
//
//	GHOST_REGION_REPO=/work/bench/gitleaks.git go test -run TestRegionEquivalentOnRepo ./internal/secretscan/
//
// (GHOST_REGION_REV=main scans one branch). It is skipped otherwise:
// a real history takes minutes.
func TestRegionEquivalentOnRepo(t *testing.T) {
	dir := os.Getenv("GHOST_REGION_REPO")
	if dir == "" {
		t.Skip("set GHOST_REGION_REPO to a local repository")
	}
	var revs []string
	if r := os.Getenv("GHOST_REGION_REV"); r != "" {
		revs = []string{r}
	}
	cfg, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	scan := func(whole bool) *BlobScan {
		e, err := New(cfg, Options{MaxDecodeDepth: 5, WholeBlobs: whole, MaxBlobSize: -1})
		if err != nil {
			t.Fatal(err)
		}
		bs, err := e.ScanRevs(context.Background(), Repo{Dir: dir}, revs, nil)
		if err != nil {
			t.Fatal(err)
		}
		bs.Close()
		return bs
	}
	w, r := scan(true), scan(false)
	keys := func(cs []candidate) map[string]int {
		m := make(map[string]int)
		for _, c := range cs {
			if !c.pathOnly {
				m[fmt.Sprintf("%s %d-%d %q %v", cfg.Rules[c.rule].ID, c.startLine, c.endLine, c.secret, c.tags)]++
			}
		}
		return m
	}
	diffs := 0
	ids := make(map[string]bool)
	for id := range w.blobs {
		ids[id] = true
	}
	for id := range r.blobs {
		ids[id] = true
	}
	for id := range ids {
		kw, kr := keys(w.blobs[id]), keys(r.blobs[id])
		for k := range kr {
			kw[k] -= kr[k]
		}
		for k, n := range kw {
			if n != 0 {
				if diffs++; diffs <= 20 {
					t.Errorf("blob %s: %+d (whole minus changed lines) %s", id, n, k)
				}
			}
		}
	}
	t.Logf("%d blobs with candidates; %d of %d bytes were changed lines", len(r.blobs), r.Stats.BytesChanged, r.Stats.BytesScanned)
}

// TestParseDiffTree: the hunks of the wanted pairs, by their index
// line, out of a diff-tree stream of several commits and files.
func TestParseDiffTree(t *testing.T) {
	a, b, c, d := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40), strings.Repeat("d", 40)
	stream := "1111111111111111111111111111111111111111\n" +
		"diff --git a/x b/x\nindex " + a + ".." + b + " 100644\n--- a/x\n+++ b/x\n@@ -1,0 +2,2 @@\n+one\n+two\n" +
		"diff --git a/y b/y\nindex " + c + ".." + d + " 100644\n--- a/y\n+++ b/y\n@@ -3 +3 @@\n-old\n+new\n" +
		"2222222222222222222222222222222222222222\n" +
		"diff --git a/z b/z\nindex " + b + ".." + c + " 100644\n--- a/z\n+++ b/z\n@@ -5,0 +9 @@\n+last\n\\ No newline at end of file\n"
	want := map[[2]string]bool{{a, b}: true, {b, c}: true}
	out := make(map[[2]string][]hunk)
	if err := parseDiffTree(bufio.NewReader(strings.NewReader(stream)), want, out); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(out[[2]string{a, b}], out[[2]string{b, c}])
	if exp := fmt.Sprint([]hunk{{2, []byte("one\ntwo\n")}}, []hunk{{9, []byte("last")}}); got != exp || len(out) != 2 {
		t.Errorf("got %d pairs, %s; want 2, %s", len(out), got, exp)
	}
}

func FuzzParseDiffTree(f *testing.F) {
	f.Add("diff --git a/x b/x\nindex aa..bb 100644\n@@ -1 +1,2 @@\n+x\n+y\n")
	f.Add("@@ bad\nindex ..\n")
	f.Fuzz(func(t *testing.T, s string) {
		out := make(map[[2]string][]hunk)
		parseDiffTree(bufio.NewReader(strings.NewReader(s)), map[[2]string]bool{{"aa", "bb"}: true}, out)
	})
}
