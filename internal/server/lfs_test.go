package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/lfs/pointer"
)

// TestLFSEndToEnd pushes a 100 MiB file (issue 23) through the stock git-lfs client
// over HTTP into a private repository and clones it back (issue 23).
func TestLFSEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("git-lfs"); err != nil {
		t.Skip("git-lfs is not installed (apt-get install git-lfs; .ci/run installs it): the LFS end-to-end test needs the real client")
	}
	f := newOrgFixture(t)
	home := t.TempDir()
	env := gittest.Env(home)
	gittest.Git(t, env, home, "lfs", "install", "--skip-repo")
	remote := strings.Replace(f.url, "http://", "http://alice:"+f.alice+"@", 1) + "/alice/mine.git"

	src := filepath.Join(t.TempDir(), "src")
	gittest.Git(t, env, "", "init", "-q", "-b", "main", src)
	gittest.Git(t, env, src, "lfs", "track", "*.bin")
	data := make([]byte, 100<<20)
	rng := rand.NewChaCha8([32]byte{23})
	rng.Read(data)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, env, src, "add", ".gitattributes", "big.bin")
	gittest.Git(t, env, src, "commit", "-q", "-m", "large file")
	gittest.Git(t, env, src, "push", "-q", remote, "main")

	// The object is stored once, under the tenant, and referenced by the
	// repository; the commit holds only the pointer.
	infos, err := f.s.Store().List(context.Background(), "lfs/objects/alice/", "", 10)
	if err != nil || len(infos) != 1 || infos[0].Size != int64(len(data)) {
		t.Fatalf("stored objects %+v, %v", infos, err)
	}
	if ptr := gittest.Git(t, env, src, "cat-file", "-p", "HEAD:big.bin"); !strings.HasPrefix(ptr, "version https://git-lfs.github.com/spec/v1") {
		t.Fatalf("the commit holds %q, not a pointer", ptr)
	}

	dst := filepath.Join(t.TempDir(), "dst")
	gittest.Git(t, env, "", "clone", "-q", remote, dst)
	got, err := os.ReadFile(filepath.Join(dst, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("cloned %d bytes differ from the %d pushed", len(got), len(data))
	}

	// git lfs lock, locks and unlock against the same remote.
	gittest.Git(t, env, dst, "lfs", "lock", "big.bin")
	if out := gittest.Git(t, env, dst, "lfs", "locks"); !strings.Contains(out, "big.bin") || !strings.Contains(out, "alice") {
		t.Fatalf("git lfs locks: %q", out)
	}
	gittest.Git(t, env, dst, "lfs", "unlock", "big.bin")
	if out := gittest.Git(t, env, dst, "lfs", "locks"); strings.Contains(out, "big.bin") {
		t.Fatalf("still locked: %q", out)
	}
}

// TestLFSPushWithMissingObjectRefused: a push whose LFS pointer names an
// object never uploaded (the client's pre-push upload skipped, as with
// --no-verify) is refused with the oid and what to do, and changes
// nothing; once the object is uploaded the same push lands.
func TestLFSPushWithMissingObjectRefused(t *testing.T) {
	if _, err := exec.LookPath("git-lfs"); err != nil {
		t.Skip("git-lfs is not installed (apt-get install git-lfs; .ci/run installs it): the LFS end-to-end test needs the real client")
	}
	f := newOrgFixture(t)
	home := t.TempDir()
	env := gittest.Env(home)
	gittest.Git(t, env, home, "lfs", "install", "--skip-repo")
	remote := strings.Replace(f.url, "http://", "http://alice:"+f.alice+"@", 1) + "/alice/mine.git"

	src := filepath.Join(t.TempDir(), "src")
	gittest.Git(t, env, "", "init", "-q", "-b", "main", src)
	gittest.Git(t, env, src, "lfs", "track", "*.bin")
	if err := os.WriteFile(filepath.Join(src, "model.bin"), bytes.Repeat([]byte("weights "), 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, env, src, "add", ".gitattributes", "model.bin")
	gittest.Git(t, env, src, "commit", "-q", "-m", "model")
	ptr := gittest.Git(t, env, src, "cat-file", "-p", "HEAD:model.bin")
	oid, ok := pointer.Parse([]byte(ptr))
	if !ok {
		t.Fatalf("the commit holds %q, not a pointer", ptr)
	}

	out, err := gittest.Run(env, src, nil, "push", "--no-verify", remote, "main")
	if err == nil {
		t.Fatalf("a push naming an LFS object never uploaded landed:\n%s", out)
	}
	if !strings.Contains(err.Error(), oid) || !strings.Contains(err.Error(), "git lfs push") {
		t.Errorf("the refusal does not name the object and the remedy: %v", err)
	}
	if _, err := gittest.Run(env, "", nil, "ls-remote", "--exit-code", remote, "refs/heads/main"); err == nil {
		t.Error("the refused push created refs/heads/main")
	}

	gittest.Git(t, env, src, "lfs", "push", "--all", remote, "main")
	gittest.Git(t, env, src, "push", "-q", "--no-verify", remote, "main")
}

// TestLFSPushProtection: a secret in a file tracked by Git LFS is in the
// object store, not in git, and push protection scans it there: the stock
// client's push (its pre-push upload, then the git push) is refused,
// naming the file; a bypass lets it land and records the alert with its
// secret; a binary LFS object is not a text file and passes.
func TestLFSPushProtection(t *testing.T) {
	if _, err := exec.LookPath("git-lfs"); err != nil {
		t.Skip("git-lfs is not installed (apt-get install git-lfs; .ci/run installs it): the LFS end-to-end test needs the real client")
	}
	ctx := context.Background()
	f := newOrgFixture(t)
	if err := f.s.Meta().SetPushProtection(ctx, "alice", "mine", true); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := gittest.Env(home)
	gittest.Git(t, env, home, "lfs", "install", "--skip-repo")
	remote := strings.Replace(f.url, "http://", "http://alice:"+f.alice+"@", 1) + "/alice/mine.git"
	src := filepath.Join(t.TempDir(), "src")
	gittest.Git(t, env, "", "init", "-q", "-b", "main", src)
	gittest.Git(t, env, src, "lfs", "track", "*.env", "*.bin")
	data := make([]byte, 64<<10)
	rand.NewChaCha8([32]byte{5}).Read(data)
	if err := os.WriteFile(filepath.Join(src, "model.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, env, src, "add", ".gitattributes", "model.bin")
	gittest.Git(t, env, src, "commit", "-q", "-m", "a binary model")
	gittest.Git(t, env, src, "push", "-q", remote, "main")

	token := fakeToken("lfs")
	if err := os.WriteFile(filepath.Join(src, "prod.env"), []byte("# production\nGITHUB_TOKEN="+token+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, env, src, "add", "prod.env")
	gittest.Git(t, env, src, "commit", "-q", "-m", "config")
	if ptr := gittest.Git(t, env, src, "cat-file", "-p", "HEAD:prod.env"); strings.Contains(ptr, token) {
		t.Fatal("the secret is in git, not in LFS")
	}
	out, err := gittest.Combined(env, src, nil, "push", remote, "main")
	if err == nil || !strings.Contains(out, "secret detected by push protection") || !strings.Contains(out, "prod.env") {
		t.Fatalf("a push with a secret in an LFS object: %v\n%s", err, out)
	}
	out, err = gittest.Combined(env, src, nil, "push", "-o", "secret-scanning.bypass=used_in_tests", remote, "main")
	if err != nil {
		t.Fatalf("the bypassed push: %v\n%s", err, out)
	}
	page, err := f.s.Alerts().List(ctx, alerts.Filter{Tenant: "alice", RepoID: f.mine.ID}, "", 10)
	if err != nil || len(page.Alerts) != 1 || page.Alerts[0].Locations[0].Path != "prod.env" {
		t.Fatalf("alerts after the bypass: %+v, %v", page.Alerts, err)
	}
	if secret, err := f.s.Alerts().Reveal(ctx, "alice", f.mine.ID, page.Alerts[0].Fingerprint); err != nil || secret != token {
		t.Fatalf("the bypassed alert's secret: %q, %v", secret, err)
	}
}

// TestLFSObjectsAPI: the API lists a repository's LFS objects a page at
// a time with their sizes and its owner's stored bytes, for its readers;
// a stranger gets 404 for a private repository.
func TestLFSObjectsAPI(t *testing.T) {
	f := newOrgFixture(t)
	var oids []string
	for i := range 3 {
		content := bytes.Repeat([]byte{byte('a' + i)}, 100*(i+1))
		oids = append(oids, lfsPut(t, f, "alice/mine", content))
	}
	get := func(token, path string) (int, string, http.Header) {
		t.Helper()
		req, _ := http.NewRequest("GET", f.url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Header
	}
	code, body, h := get(f.alice, "/api/repos/alice/mine/lfs/objects?per_page=2")
	if code != 200 || strings.Count(body, `"oid"`) != 2 || !strings.Contains(body, `"owner_stored_bytes":600`) || !strings.Contains(h.Get("Link"), "after=") {
		t.Fatalf("first page: %d %s %q", code, body, h.Get("Link"))
	}
	next := h.Get("Link")
	next = next[strings.Index(next, "<")+1 : strings.Index(next, ">")]
	code, body2, h2 := get(f.alice, next)
	if code != 200 || strings.Count(body2, `"oid"`) != 1 || h2.Get("Link") != "" {
		t.Fatalf("second page: %d %s", code, body2)
	}
	for _, oid := range oids {
		if !strings.Contains(body+body2, oid) {
			t.Errorf("object %s not listed", oid)
		}
	}
	if code, _, _ := get(f.bob, "/api/repos/alice/mine/lfs/objects"); code != 404 {
		t.Fatalf("a stranger: %d", code)
	}
	if code, _, _ := get(f.alice, "/api/repos/alice/mine/lfs/objects?after=nope"); code != 400 {
		t.Fatalf("a bad cursor: %d", code)
	}
}

// lfsPut uploads content to repo through the Batch API's basic transfer
// with alice's token, and returns its oid.
func lfsPut(t *testing.T, f *orgFixture, repo string, content []byte) string {
	t.Helper()
	sum := sha256.Sum256(content)
	oid := hex.EncodeToString(sum[:])
	body := fmt.Sprintf(`{"operation":"upload","transfers":["basic"],"objects":[{"oid":%q,"size":%d}]}`, oid, len(content))
	req, _ := http.NewRequest("POST", f.url+"/"+repo+".git/info/lfs/objects/batch", strings.NewReader(body))
	req.SetBasicAuth("alice", f.alice)
	req.Header.Set("Accept", "application/vnd.git-lfs+json")
	req.Header.Set("Content-Type", "application/vnd.git-lfs+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var batch struct {
		Objects []struct {
			Actions map[string]struct {
				Href   string            `json:"href"`
				Header map[string]string `json:"header"`
			} `json:"actions"`
		} `json:"objects"`
	}
	err = json.NewDecoder(res.Body).Decode(&batch)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 || len(batch.Objects) != 1 {
		t.Fatalf("batch: %d %v", res.StatusCode, err)
	}
	for _, step := range []string{"upload", "verify"} {
		a, ok := batch.Objects[0].Actions[step]
		if !ok {
			continue
		}
		method, rd := "PUT", io.Reader(bytes.NewReader(content))
		if step == "verify" {
			method, rd = "POST", strings.NewReader(fmt.Sprintf(`{"oid":%q,"size":%d}`, oid, len(content)))
		}
		req, _ := http.NewRequest(method, a.Href, rd)
		for k, v := range a.Header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			t.Fatalf("%s: %d", step, res.StatusCode)
		}
	}
	return oid
}

// TestLFSMirrorSetting: a push naming a Git LFS object the repository
// does not hold is refused, until its writer sets allow_missing_lfs (a
// mirror, whose objects live elsewhere); a reader cannot set it.
func TestLFSMirrorSetting(t *testing.T) {
	f := newOrgFixture(t)
	env := gittest.Env(t.TempDir())
	remote := strings.Replace(f.url, "http://", "http://alice:"+f.alice+"@", 1) + "/alice/mine.git"
	src := filepath.Join(t.TempDir(), "src")
	gittest.Git(t, env, "", "init", "-q", "-b", "main", src)
	ptr := "version https://git-lfs.github.com/spec/v1\noid sha256:" + strings.Repeat("cd", 32) + "\nsize 99\n"
	if err := os.WriteFile(filepath.Join(src, "asset.bin"), []byte(ptr), 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, env, src, "add", "asset.bin")
	gittest.Git(t, env, src, "commit", "-q", "-m", "a mirrored pointer")
	if out, err := gittest.Combined(env, src, nil, "push", remote, "main"); err == nil || !strings.Contains(out, "missing Git LFS objects") {
		t.Fatalf("a push naming a missing object: %v\n%s", err, out)
	}
	patch := func(token, body string) int {
		t.Helper()
		req, _ := http.NewRequest("PATCH", f.url+"/api/repos/alice/mine", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == 200 && !strings.Contains(string(b), `"allow_missing_lfs":true`) {
			t.Fatalf("the answer does not show the setting: %s", b)
		}
		return res.StatusCode
	}
	if code := patch(f.bob, `{"allow_missing_lfs": true}`); code != 404 {
		t.Fatalf("a stranger sets it: %d", code)
	}
	if code := patch(f.alice, `{"allow_missing_lfs": true}`); code != 200 {
		t.Fatalf("the owner sets it: %d", code)
	}
	if out, err := gittest.Combined(env, src, nil, "push", remote, "main"); err != nil {
		t.Fatalf("the mirror's push: %v\n%s", err, out)
	}
}
