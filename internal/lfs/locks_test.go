package lfs

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func (f *fixture) lockCall(t *testing.T, method, repo, rest, token, body string) (int, map[string]json.RawMessage) {
	t.Helper()
	code, _, out := f.do(t, method, "/"+repo+".git/info/lfs/locks"+rest, token, MediaType, strings.NewReader(body), int64(len(body)))
	var m map[string]json.RawMessage
	json.Unmarshal(out, &m)
	return code, m
}

func lockOf(t *testing.T, raw json.RawMessage) Lock {
	t.Helper()
	var l Lock
	if err := json.Unmarshal(raw, &l); err != nil {
		t.Fatalf("lock %s: %v", raw, err)
	}
	return l
}

func TestLocks(t *testing.T) {
	f := newFixture(t, 1000)
	code, m := f.lockCall(t, "POST", "alice/pub", "", writer, `{"path":"art/a.psd","ref":{"name":"refs/heads/main"}}`)
	if code != http.StatusCreated {
		t.Fatalf("create: %d %v", code, m)
	}
	mine := lockOf(t, m["lock"])
	if mine.Path != "art/a.psd" || mine.Owner.Name != "w" || mine.ID == "" {
		t.Fatalf("lock %+v", mine)
	}
	// The path is taken, by anyone.
	if code, m := f.lockCall(t, "POST", "alice/pub", "", writer2, `{"path":"art/a.psd"}`); code != http.StatusConflict || lockOf(t, m["lock"]).ID != mine.ID {
		t.Fatalf("second lock: %d %v", code, m)
	}
	f.lockCall(t, "POST", "alice/pub", "", writer2, `{"path":"art/b.psd"}`)
	// Readers list; only writers lock, verify and unlock.
	code, m = f.lockCall(t, "GET", "alice/pub", "?limit=1", reader, "")
	var locks []Lock
	json.Unmarshal(m["locks"], &locks)
	if code != 200 || len(locks) != 1 || locks[0].Path != "art/a.psd" || string(m["next_cursor"]) != `"art/a.psd"` {
		t.Fatalf("list page 1: %d %v", code, m)
	}
	code, m = f.lockCall(t, "GET", "alice/pub", "?cursor=art/a.psd", "", "")
	json.Unmarshal(m["locks"], &locks)
	if code != 200 || len(locks) != 1 || locks[0].Path != "art/b.psd" || string(m["next_cursor"]) != `""` {
		t.Fatalf("list page 2: %d %v", code, m)
	}
	if code, _ := f.lockCall(t, "POST", "alice/pub", "", reader, `{"path":"c"}`); code != 403 {
		t.Fatalf("reader's lock: %d", code)
	}
	if code, _ := f.lockCall(t, "POST", "alice/pub", "", "", `{"path":"c"}`); code != 401 {
		t.Fatalf("anonymous lock: %d", code)
	}
	code, m = f.lockCall(t, "POST", "alice/pub", "/verify", writer, `{}`)
	var ours, theirs []Lock
	json.Unmarshal(m["ours"], &ours)
	json.Unmarshal(m["theirs"], &theirs)
	if code != 200 || len(ours) != 1 || ours[0].ID != mine.ID || len(theirs) != 1 {
		t.Fatalf("verify: %d %v", code, m)
	}
	// Another writer needs force; the owner does not.
	if code, _ := f.lockCall(t, "POST", "alice/pub", "/"+mine.ID+"/unlock", writer2, `{}`); code != 403 {
		t.Fatalf("someone else's unlock: %d", code)
	}
	if code, _ := f.lockCall(t, "POST", "alice/pub", "/"+mine.ID+"/unlock", reader, `{"force":true}`); code != 403 {
		t.Fatalf("reader's forced unlock: %d", code)
	}
	if code, _ := f.lockCall(t, "POST", "alice/pub", "/"+mine.ID+"/unlock", writer, `{}`); code != 200 {
		t.Fatalf("owner's unlock: %d", code)
	}
	if code, _ := f.lockCall(t, "POST", "alice/pub", "/"+mine.ID+"/unlock", writer, `{}`); code != 404 {
		t.Fatalf("second unlock: %d", code)
	}
	code, m = f.lockCall(t, "GET", "alice/pub", "?path=art/b.psd", writer, "")
	json.Unmarshal(m["locks"], &locks)
	if code != 200 || len(locks) != 1 {
		t.Fatalf("list by path: %d %v", code, m)
	}
	if code, _ := f.lockCall(t, "POST", "alice/pub", "/"+locks[0].ID+"/unlock", writer, `{"force":true}`); code != 200 {
		t.Fatalf("forced unlock: %d", code)
	}
	for _, c := range []struct{ method, rest, body string }{
		{"POST", "", `{"path":""}`}, {"POST", "", `{"path":`}, {"GET", "?limit=x", ""},
		{"POST", "/nothex/unlock", `{}`}, {"DELETE", "", ""},
	} {
		if code, _ := f.lockCall(t, c.method, "alice/pub", c.rest, writer, c.body); code < 400 || code >= 500 {
			t.Errorf("%s %s %q: %d", c.method, c.rest, c.body, code)
		}
	}
	// A private repository's locks answer as a missing one's.
	for _, token := range []string{"", reader} {
		a, _ := f.lockCall(t, "GET", "alice/priv", "", token, "")
		b, _ := f.lockCall(t, "GET", "alice/nosuch", "", token, "")
		if a != b || a == 200 {
			t.Errorf("as %q: private %d, missing %d", token, a, b)
		}
	}
}

// TestLockRace: of writers racing for one path, exactly one gets it.
func TestLockRace(t *testing.T) {
	f := newFixture(t, 1000)
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = f.lockCall(t, "POST", "alice/pub", "", writer, `{"path":"x.bin"}`)
		}()
	}
	wg.Wait()
	won := 0
	for _, c := range codes {
		switch c {
		case http.StatusCreated:
			won++
		case http.StatusConflict:
		default:
			t.Errorf("racing lock: %d", c)
		}
	}
	if won != 1 {
		t.Fatalf("%d writers got the lock: %v", won, codes)
	}
}
