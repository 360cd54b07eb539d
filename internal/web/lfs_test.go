package web_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// lfsUpload uploads content to repo's LFS store through the Batch API
// and its basic transfer, as git-lfs would, with alice's token.
func (f *pullFixture) lfsUpload(repo string, content []byte) string {
	f.t.Helper()
	sum := sha256.Sum256(content)
	oid := hex.EncodeToString(sum[:])
	body := fmt.Sprintf(`{"operation":"upload","transfers":["basic"],"objects":[{"oid":%q,"size":%d}]}`, oid, len(content))
	req, _ := http.NewRequest("POST", f.srv.URL+"/alice/"+repo+".git/info/lfs/objects/batch", strings.NewReader(body))
	req.SetBasicAuth("alice", f.alice)
	req.Header.Set("Accept", "application/vnd.git-lfs+json")
	req.Header.Set("Content-Type", "application/vnd.git-lfs+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	var batch struct {
		Objects []struct {
			Actions map[string]struct {
				Href   string            `json:"href"`
				Header map[string]string `json:"header"`
			} `json:"actions"`
		} `json:"objects"`
	}
	if err := json.NewDecoder(res.Body).Decode(&batch); err != nil || res.StatusCode != 200 || len(batch.Objects) != 1 {
		f.t.Fatalf("batch: %d %v %+v", res.StatusCode, err, batch)
	}
	for _, step := range []string{"upload", "verify"} {
		a, ok := batch.Objects[0].Actions[step]
		if !ok {
			continue
		}
		var rd io.Reader = bytes.NewReader(content)
		method := "PUT"
		if step == "verify" {
			method, rd = "POST", strings.NewReader(fmt.Sprintf(`{"oid":%q,"size":%d}`, oid, len(content)))
		}
		req, _ := http.NewRequest(method, a.Href, rd)
		for k, v := range a.Header {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			f.t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode/100 != 2 {
			f.t.Fatalf("%s: %d", step, res.StatusCode)
		}
	}
	return oid
}

func pointerOf(oid string, size int) string {
	return fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", oid, size)
}

// TestLFSFilePage: a file tracked by Git LFS shows as its object (size,
// a download link), and raw serves the object's bytes; a pointer whose
// object never came says so and raw serves the pointer; a private
// repository's object is not found for a stranger.
func TestLFSFilePage(t *testing.T) {
	f := newPullFixture(t)
	content := []byte(strings.Repeat("large file contents\n", 500))
	oid := f.lfsUpload("app", content)
	f.write("big.bin", pointerOf(oid, len(content)))
	f.git("add", "big.bin")
	f.git("commit", "-q", "-m", "lfs file")
	f.git("push", "-q", f.remote("app"), "main")
	w := f.signedIn(f.alice)
	_, body := w.get("/alice/app/-/blob/main/big.bin")
	if !strings.Contains(body, `id="lfs-file"`) || !strings.Contains(body, `id="lfs-download"`) || !strings.Contains(body, oid) || strings.Contains(body, "version https://git-lfs") {
		t.Fatalf("the LFS file's page:\n%s", body)
	}
	res, raw := w.get("/alice/app/-/raw/main/big.bin")
	if res.StatusCode != 200 || raw != string(content) || !strings.Contains(res.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("raw of the LFS file: %d %q (%d bytes)", res.StatusCode, res.Header.Get("Content-Disposition"), len(raw))
	}
	if res, _ := f.client().get("/alice/app/-/raw/main/big.bin"); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a stranger's raw of a private LFS file: %d", res.StatusCode)
	}
	// The repository's reference to the object gone (no path of ghost's
	// removes one; a store restored without it): the page says the
	// object is not there, and raw serves the pointer.
	if err := f.store.Delete(context.Background(), "lfs/refs/"+f.priv.ID+"/"+oid); err != nil {
		t.Fatal(err)
	}
	_, body = w.get("/alice/app/-/blob/main/big.bin")
	if !strings.Contains(body, "never uploaded") || strings.Contains(body, `id="lfs-download"`) {
		t.Fatalf("the missing object's page:\n%s", body)
	}
	if _, raw := w.get("/alice/app/-/raw/main/big.bin"); !strings.HasPrefix(raw, "version https://git-lfs") {
		t.Fatalf("raw of a pointer without its object: %q", raw)
	}
}
