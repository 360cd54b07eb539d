package secretscan

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// history is a work tree for tests that shape history by hand.
type history struct {
	t   *testing.T
	dir string
	env []string
}

func newHistory(t *testing.T) *history {
	t.Helper()
	h := &history{t: t, dir: filepath.Join(t.TempDir(), "repo"), env: gittest.Env(t.TempDir())}
	gittest.Git(t, h.env, "", "init", "-q", "-b", "main", h.dir)
	return h
}

func (h *history) git(args ...string) string {
	h.t.Helper()
	return strings.TrimSpace(gittest.Git(h.t, h.env, h.dir, args...))
}

func (h *history) gitIn(stdin string, args ...string) string {
	h.t.Helper()
	out, err := gittest.Run(h.env, h.dir, strings.NewReader(stdin), args...)
	if err != nil {
		h.t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(out)
}

func (h *history) write(path, content string) {
	h.t.Helper()
	p := filepath.Join(h.dir, path)
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.Remove(p)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *history) commit(msg string) string {
	h.t.Helper()
	h.git("add", "-A")
	h.git("commit", "-q", "--allow-empty", "-m", msg)
	return h.git("rev-parse", "HEAD")
}

func (h *history) repo() Repo { return Repo{Dir: h.dir} }

// scanAll scans every object reachable from refs, with messages, and
// places what it finds; unplaced blobs are located under the refs that
// peel to trees and blobs.
func (h *history) scanAll(e *Engine) (*BlobScan, *Attribution, []Finding) {
	h.t.Helper()
	ctx := context.Background()
	bs, err := e.ScanRepo(ctx, h.repo(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	a, err := bs.AttributeAll(ctx, h.repo(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	refs, err := TreeAndBlobRefs(ctx, h.repo())
	if err != nil {
		h.t.Fatal(err)
	}
	reach, err := Locate(ctx, h.repo(), refs, nil, a.Unplaced)
	if err != nil {
		h.t.Fatal(err)
	}
	return bs, a, bs.LocatedFindings(a.Unplaced, reach)
}

func messagesEngine(t testing.TB) *Engine {
	t.Helper()
	cfg, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, Options{Workers: 2, FingerprintKey: []byte("k"), Messages: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestAttributeMerges: a file an evil merge adds, a secret typed while
// resolving a conflict and a file an octopus merge adds are placed at
// the merge (pass 2), while a secret a side branch added is placed at
// that branch's commit only, never again at the merge that brings it in.
func TestAttributeMerges(t *testing.T) {
	h := newHistory(t)
	h.write("conflict.txt", "base\n")
	h.commit("base")
	h.git("checkout", "-q", "-b", "side")
	h.write("side.txt", "side "+fakePAT+"\n")
	h.write("conflict.txt", "side version\n")
	side := h.commit("side")
	h.git("checkout", "-q", "main")
	h.write("conflict.txt", "main version\n")
	h.commit("main")
	// The merge conflicts; the resolution holds a secret, and the merge
	// also adds a file no parent has.
	if _, err := gittest.Run(h.env, h.dir, nil, "merge", "-q", "side"); err == nil {
		t.Fatal("the merge did not conflict")
	}
	h.write("conflict.txt", "resolved "+fakePAT2+"\n")
	h.write("evil.txt", "evil "+fakePAT3+"\n")
	merge := h.commit("merge side")
	// An octopus merge of two clean branches that adds a file.
	for _, b := range []string{"o1", "o2"} {
		h.git("checkout", "-q", "-b", b, "main")
		h.write(b+".txt", b+"\n")
		h.commit(b)
	}
	h.git("checkout", "-q", "main")
	h.git("merge", "-q", "--no-commit", "o1", "o2")
	h.write("octopus.txt", "octo "+fakePAT4+"\n")
	octopus := h.commit("octopus")

	bs, a, located := h.scanAll(defaultEngine(t))
	if len(a.Unplaced) != 0 || len(located) != 0 {
		t.Fatalf("unplaced %v, located %+v", a.Unplaced, located)
	}
	got := map[string]string{}
	for _, f := range a.Findings {
		got[f.Path+":"+f.Commit] = f.RuleID
	}
	want := []string{"side.txt:" + side, "conflict.txt:" + merge, "evil.txt:" + merge, "octopus.txt:" + octopus}
	if len(a.Findings) != len(want) {
		t.Errorf("findings %v, want %v", got, want)
	}
	for _, w := range want {
		if _, ok := got[w]; !ok {
			t.Errorf("no finding at %s; have %v", w, got)
		}
	}
	if bs.FindingBlobs() != 4 {
		t.Errorf("%d blobs with candidates, want 4", bs.FindingBlobs())
	}
}

// TestAttributeTypeChange: a file that replaces a symlink at the same
// path is placed at the commit that replaced it.
func TestAttributeTypeChange(t *testing.T) {
	h := newHistory(t)
	if err := os.Symlink("target", filepath.Join(h.dir, "link")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	h.commit("symlink")
	h.write("link", "now a file "+fakePAT+"\n")
	c := h.commit("file")
	_, a, _ := h.scanAll(defaultEngine(t))
	if len(a.Findings) != 1 || a.Findings[0].Commit != c || a.Findings[0].Path != "link" || len(a.Unplaced) != 0 {
		t.Fatalf("attribution %+v", a)
	}
}

// TestLocateTagsAndUnreachable: a blob reached only through an annotated
// tag of a blob, or of a tree, is unplaced and then located under that
// tag; a blob no ref reaches is reported at no ref and no path; a
// lightweight tag of a commit on no branch and a note are ordinary
// history.
func TestLocateTagsAndUnreachable(t *testing.T) {
	h := newHistory(t)
	h.write("README", "hi\n")
	h.commit("one")
	blob := h.gitIn("blob "+fakePAT+"\n", "hash-object", "-w", "--stdin")
	h.git("tag", "-a", "-m", "a blob", "blobtag", blob)
	inner := h.gitIn("dir tree "+fakePAT2+"\n", "hash-object", "-w", "--stdin")
	sub := h.gitIn("100644 blob "+inner+"\tkey.txt\n", "mktree")
	tree := h.gitIn("040000 tree "+sub+"\tconf\n", "mktree")
	h.git("tag", "-a", "-m", "a tree", "treetag", tree)
	lost := h.gitIn("lost "+fakePAT3+"\n", "hash-object", "-w", "--stdin")
	h.git("checkout", "-q", "--detach")
	h.write("detached.txt", "detached "+fakePAT4+"\n")
	detached := h.commit("detached")
	h.git("tag", "light", detached)
	h.git("checkout", "-q", "main")
	h.git("notes", "add", "-m", "note "+fakePAT5, "HEAD")

	ctx := context.Background()
	e := defaultEngine(t)
	bs, err := e.ScanRepo(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// ScanRepo reaches from refs only; the lost blob is scanned by id,
	// as a full scan run lists every object.
	lostScan, err := e.ScanObjects(ctx, h.repo(), []string{lost}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for id, c := range lostScan.blobs {
		bs.blobs[id] = c
	}
	a, err := bs.AttributeAll(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{blob, inner, lost}
	slices.Sort(want)
	if !slices.Equal(a.Unplaced, want) {
		t.Fatalf("unplaced %v, want %v", a.Unplaced, want)
	}
	var placed []string
	for _, f := range a.Findings {
		placed = append(placed, f.Commit[:7]+" "+f.Path)
	}
	if len(a.Findings) != 2 || a.Findings[0].Commit == "" || a.Findings[1].Commit == "" {
		t.Errorf("placed findings %v: want the detached commit's and the note's", placed)
	}
	refs, err := TreeAndBlobRefs(ctx, h.repo())
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[0].Ref != "refs/tags/blobtag" || refs[1].Ref != "refs/tags/treetag" {
		t.Fatalf("tree and blob refs %+v", refs)
	}
	reach, err := Locate(ctx, h.repo(), refs, nil, a.Unplaced)
	if err != nil {
		t.Fatal(err)
	}
	if reach[blob] != (Reach{Ref: "refs/tags/blobtag"}) || reach[inner] != (Reach{Ref: "refs/tags/treetag", Path: "conf/key.txt"}) {
		t.Errorf("reach %+v", reach)
	}
	if _, ok := reach[lost]; ok {
		t.Errorf("the lost blob was located: %+v", reach[lost])
	}
	fs := bs.LocatedFindings(a.Unplaced, reach)
	if len(fs) != 3 {
		t.Fatalf("located findings %+v", fs)
	}
	for _, f := range fs {
		if f.Commit != "" || f.Fingerprint == "" || f.RuleID != "github-pat" {
			t.Errorf("located finding %+v", f)
		}
	}
}

// TestMessages: with Options.Messages, secrets in a commit message and
// in an annotated tag's message are found at their objects; without it
// they are not.
func TestMessages(t *testing.T) {
	h := newHistory(t)
	h.write("a.txt", "a\n")
	c := h.commit("subject\n\nthe token is " + fakePAT + "\n")
	h.git("tag", "-a", "-m", "release\n\n"+fakePAT2, "v1")
	tag := h.git("rev-parse", "v1")

	_, a, located := h.scanAll(messagesEngine(t))
	if len(a.Findings) != 0 || len(located) != 0 {
		t.Fatalf("file findings %+v %+v", a.Findings, located)
	}
	ctx := context.Background()
	bs, err := messagesEngine(t).ScanRepo(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if bs.Stats.Messages != 2 || bs.Stats.MessagesScanned != 2 {
		t.Errorf("stats %+v", bs.Stats)
	}
	fs := bs.MessageFindings()
	if len(fs) != 2 {
		t.Fatalf("message findings %+v", fs)
	}
	for _, f := range fs {
		switch f.BlobID {
		case c:
			// tree, author, committer, blank, subject, blank, body
			if f.Source != SourceCommitMessage || f.Commit != c || f.StartLine != 7 || f.Path != "" {
				t.Errorf("commit message finding %+v", f)
			}
		case tag:
			if f.Source != SourceTagMessage || f.Commit != "" || f.Path != "" {
				t.Errorf("tag message finding %+v", f)
			}
		default:
			t.Errorf("finding in %s: %+v", f.BlobID, f)
		}
	}
	plain, err := defaultEngine(t).ScanRepo(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if plain.FindingMessages() != 0 || plain.Stats.Messages != 0 {
		t.Errorf("messages scanned without Options.Messages: %+v", plain.Stats)
	}
}

// TestLeadingNUL: a text file whose first bytes hold a NUL is found,
// attributed like any file.
func TestLeadingNUL(t *testing.T) {
	h := newHistory(t)
	h.write("notes.txt", "\x00\nline two\ntoken "+fakePAT+"\n")
	c := h.commit("nul")
	_, a, _ := h.scanAll(defaultEngine(t))
	if len(a.Findings) != 1 || a.Findings[0].Commit != c || a.Findings[0].StartLine != 3 {
		t.Fatalf("findings %+v", a.Findings)
	}
}

// TestReplaceRefsIgnored: a refs/replace/ ref that swaps a secret's blob
// (and its commit) for harmless ones changes nothing a scan sees: git
// runs with GIT_NO_REPLACE_OBJECTS (gitexec).
func TestReplaceRefsIgnored(t *testing.T) {
	h := newHistory(t)
	h.write("conf.txt", "token "+fakePAT+"\n")
	c := h.commit("secret\n\n" + fakePAT2)
	blob := h.git("rev-parse", "HEAD:conf.txt")
	harmless := h.gitIn("nothing here\n", "hash-object", "-w", "--stdin")
	h.git("replace", blob, harmless)
	h.git("checkout", "-q", "-b", "other")
	h.write("x", "x\n")
	clean := h.commit("clean")
	h.git("checkout", "-q", "main")
	h.git("replace", "-f", c, clean)
	if out := h.git("cat-file", "-p", blob); out != "nothing here" {
		t.Fatalf("the replace ref does not work on the client: %q", out)
	}
	_, a, _ := h.scanAll(messagesEngine(t))
	if len(a.Findings) != 1 || a.Findings[0].BlobID != blob || a.Findings[0].Commit != c {
		t.Fatalf("findings %+v: want the real blob at the real commit", a.Findings)
	}
	bs, err := messagesEngine(t).ScanObjects(context.Background(), h.repo(), []string{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fs := bs.MessageFindings(); len(fs) != 1 || fs[0].BlobID != c {
		t.Fatalf("message findings %+v: want the real commit's", fs)
	}
}

// More fake credentials, split so that no scanner flags this file.
const (
	fakePAT2 = "ghp_" + "Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0Kk1Ll2M"
	fakePAT3 = "ghp_" + "Qw3Er5Ty7Ui9Op1As2Df4Gh6Jk8Lz0Xc2Vb4N"
	fakePAT4 = "ghp_" + "Mn8Bv6Cx4Za2Lk9Jh7Gf5Ds3Ap1Oi0Uy2Tr4E"
	fakePAT5 = "ghp_" + "Zx9Cv8Bn7Ml6Kj5Hg4Fd3Sa2Qw1Er0Ty9Ui8O"
)
