package secretscan

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// loc is what the recall tests compare: columns are left out on purpose
// (gitleaks counts them from the previous newline of its diff hunk, see
// docs/adr/0030-secret-scanning-engine.md, "Differences from gitleaks").
type loc struct {
	Rule, Commit, Path string
	Line               int
}

func (l loc) String() string { return fmt.Sprintf("%s %.10s %s:%d", l.Rule, l.Commit, l.Path, l.Line) }

// corpusRepo is a history holding every corpus sample, built to exercise
// what a blob-based scan must get right:
//   - samples spread over 3 branches and many commits, one merged;
//   - some files deleted in a later commit (still reported where added);
//   - some samples deep inside ~1 MiB files;
//   - some files modified later around an unchanged secret line, so the
//     secret sits in several blobs but was added once (reported once);
//   - some files copied to a new path (a new addition, reported there);
//   - some identical files added on two branches (two additions).
type corpusRepo struct {
	dir  string
	want []loc
}

func buildCorpusRepo(t *testing.T, samples []corpusSample) *corpusRepo {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	env := gittest.Env(t.TempDir())
	git := func(args ...string) string { return strings.TrimSpace(gittest.Git(t, env, dir, args...)) }
	write := func(path, content string) {
		p := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git("init", "-q", "-b", "main")
	write("README", "corpus\n")
	git("add", "-A")
	git("commit", "-q", "-m", "root")
	for _, b := range []string{"dev", "rel"} {
		git("branch", b)
	}
	r := &corpusRepo{dir: dir}
	type placed struct {
		i          int
		path, body string
		line       int
		branch     string
	}
	var all []placed
	branches := []string{"main", "dev", "rel"}
	const perCommit = 4
	for start := 0; start < len(samples); start += perCommit {
		branch := branches[(start/perCommit)%len(branches)]
		git("checkout", "-q", branch)
		var batch []placed
		for i := start; i < min(start+perCommit, len(samples)); i++ {
			var b strings.Builder
			path := fmt.Sprintf("svc%d/conf%03d.txt", i%7, i)
			filler := i % 5
			if i%40 == 0 {
				path = fmt.Sprintf("big/large%03d.txt", i)
				filler = 20000 // about 1 MiB before the secret
			}
			for k := 0; k < filler; k++ {
				fmt.Fprintf(&b, "filler line %d of sample %d, nothing to see here\n", k, i)
			}
			b.WriteString(samples[i].line + "\n")
			b.WriteString("trailing line\n")
			write(path, b.String())
			batch = append(batch, placed{i, path, b.String(), filler + 1, branch})
		}
		git("add", "-A")
		git("commit", "-q", "-m", fmt.Sprintf("add samples %d..", start))
		c := git("rev-parse", "HEAD")
		for _, p := range batch {
			r.want = append(r.want, loc{samples[p.i].rule, c, p.path, p.line})
		}
		all = append(all, batch...)
	}
	// Later changes, per branch.
	for _, branch := range branches {
		git("checkout", "-q", branch)
		var del, mod, cp []placed
		for _, p := range all {
			if p.branch != branch {
				continue
			}
			switch {
			case p.i%10 == 3:
				del = append(del, p)
			case p.i%6 == 1:
				mod = append(mod, p)
			case p.i%20 == 7:
				cp = append(cp, p)
			}
		}
		for _, p := range del {
			git("rm", "-q", p.path)
		}
		if len(del) > 0 {
			git("commit", "-q", "-m", "delete some")
		}
		for _, p := range mod {
			write(p.path, "a new first line\n"+p.body+"and a new last line\n")
		}
		if len(mod) > 0 {
			git("add", "-A")
			git("commit", "-q", "-m", "edit around secrets")
		}
		for _, p := range cp {
			write("copies/"+p.path, p.body)
		}
		if len(cp) > 0 {
			git("add", "-A")
			git("commit", "-q", "-m", "copy some")
			c := git("rev-parse", "HEAD")
			for _, p := range cp {
				r.want = append(r.want, loc{samples[p.i].rule, c, "copies/" + p.path, p.line})
			}
		}
	}
	// The same file added independently on main and rel.
	for _, p := range all {
		if p.i%30 == 11 && p.branch != "main" {
			git("checkout", "-q", "main")
			write("twin/"+p.path, p.body)
			git("add", "-A")
			git("commit", "-q", "-m", "twin on main")
			c1 := git("rev-parse", "HEAD")
			git("checkout", "-q", "rel")
			write("twin/"+p.path, p.body)
			git("add", "-A")
			git("commit", "-q", "-m", "twin on rel")
			c2 := git("rev-parse", "HEAD")
			r.want = append(r.want,
				loc{samples[p.i].rule, c1, "twin/" + p.path, p.line},
				loc{samples[p.i].rule, c2, "twin/" + p.path, p.line})
		}
	}
	// Some samples only base64-encoded, found by decoding (as gitleaks).
	git("checkout", "-q", "main")
	var enc []int
	for i := range samples {
		if i%15 == 4 {
			write(fmt.Sprintf("enc/conf%03d.b64", i), "data: "+base64.StdEncoding.EncodeToString([]byte(samples[i].line))+"\n")
			enc = append(enc, i)
		}
	}
	git("add", "-A")
	git("commit", "-q", "-m", "encoded")
	c := git("rev-parse", "HEAD")
	for _, i := range enc {
		r.want = append(r.want, loc{samples[i].rule, c, fmt.Sprintf("enc/conf%03d.b64", i), 1})
	}
	git("merge", "-q", "--no-edit", "dev")
	return r
}

func sortLocs(ls []loc) {
	sort.Slice(ls, func(i, j int) bool { return ls[i].String() < ls[j].String() })
}

// diffLocs returns what is only in a and only in b.
func diffLocs(a, b []loc) (onlyA, onlyB []loc) {
	count := make(map[loc]int)
	for _, l := range a {
		count[l]++
	}
	for _, l := range b {
		count[l]--
	}
	for l, n := range count {
		for ; n > 0; n-- {
			onlyA = append(onlyA, l)
		}
		for ; n < 0; n++ {
			onlyB = append(onlyB, l)
		}
	}
	sortLocs(onlyA)
	sortLocs(onlyB)
	return onlyA, onlyB
}

func scanLocs(t *testing.T, dir string, workers int) ([]loc, Stats) {
	t.Helper()
	cfg, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, Options{Workers: workers, MaxDecodeDepth: 5})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo := Repo{Dir: dir}
	bs, err := e.ScanRepo(ctx, repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := bs.Attribute(ctx, repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []loc
	for _, f := range fs {
		got = append(got, loc{f.RuleID, f.Commit, f.Path, f.StartLine})
	}
	return got, bs.Stats
}

// TestRecallHistory scans the corpus history and wants every sample at
// the commit, path and line that added it, and nothing twice.
func TestRecallHistory(t *testing.T) {
	samples := loadCorpus(t)
	r := buildCorpusRepo(t, samples)
	got, st := scanLocs(t, r.dir, 2)
	missing, extra := diffLocs(r.want, got)
	for _, l := range missing {
		t.Errorf("missing: %v", l)
	}
	for _, l := range extra {
		t.Errorf("unexpected: %v", l)
	}
	rules := make(map[string]bool)
	for _, l := range got {
		rules[l.Rule] = true
	}
	if len(rules) < 50 {
		t.Errorf("found %d distinct rules, want >= 50", len(rules))
	}
	if st.BlobsScanned == 0 || st.BinarySkipped != 0 || st.LargeSkipped != 0 {
		t.Errorf("stats = %+v", st)
	}
	t.Logf("%d findings over %d rules; %d blobs, %d bytes scanned", len(got), len(rules), st.BlobsScanned, st.BytesScanned)

	// gitleaks itself on the same history, when installed (.ci/run
	// installs it).
	gl, err := exec.LookPath("gitleaks")
	if err != nil {
		t.Skip("gitleaks not on PATH: skipping the comparison with gitleaks (go install github.com/zricethezav/gitleaks/v8@v8.30.1)")
	}
	out := filepath.Join(t.TempDir(), "gitleaks.json")
	cmd := exec.Command(gl, "git", "--no-banner", "--log-level", "error", "--exit-code", "0",
		"--report-format", "json", "--report-path", out, r.dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gitleaks: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var glf []struct {
		RuleID, Commit, File string
		StartLine            int
	}
	if err := json.Unmarshal(data, &glf); err != nil {
		t.Fatal(err)
	}
	var theirs []loc
	for _, f := range glf {
		theirs = append(theirs, loc{f.RuleID, f.Commit, f.File, f.StartLine})
	}
	onlyGitleaks, onlyGhost := diffLocs(theirs, got)
	for _, l := range onlyGitleaks {
		t.Errorf("gitleaks found, ghost did not: %v", l)
	}
	for _, l := range onlyGhost {
		t.Errorf("ghost found, gitleaks did not: %v", l)
	}
	t.Logf("gitleaks: %d findings, identical to ghost's", len(theirs))
}
