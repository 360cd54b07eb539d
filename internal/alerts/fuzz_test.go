package alerts

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeRecord: the decoder never panics, and whatever it accepts
// satisfies the record invariants and survives an encode/decode round
// trip unchanged.
func FuzzDecodeRecord(f *testing.F) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r := merge(nil, ref{"acme", repo, strings.Repeat("ab", 32)}, []Finding{finding(1, 1), finding(1, 2)}, RunRef{ID: "r", Seq: 3}, now)
	r.History = append(r.History, eventRecord{ID: "e", At: now, By: "bob", State: StateOpen})
	r.Bypasses = append(r.Bypasses, bypassRecord{ID: "b", By: "bob", Reason: BypassWillFixLater, At: now})
	good, err := encodeRecord(r)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`{"v":2,"state":"open"}`))
	f.Add([]byte(`{"v":1,"fingerprint":"` + strings.Repeat("0", 64) + `","tenant":"t","repo_id":"r","rule_id":"x","state":"resolved","resolution":"revoked"}`))
	f.Add([]byte(`{"v":1,"locations":[{"path":"a","line":1,"blob":"b"},{"path":"a","line":1,"blob":"b"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(b)
		if err != nil {
			return
		}
		if err := rec.check(); err != nil {
			t.Fatalf("accepted a record that fails its check: %v", err)
		}
		out, err := encodeRecord(rec)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := decodeRecord(out)
		if err != nil {
			t.Fatalf("decode of re-encoded record: %v", err)
		}
		out2, err := encodeRecord(again)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("round trip changed the record:\n%s\n%s", out, out2)
		}
		a := rec.alert()
		if a.HasSecret != (rec.Secret != "") {
			t.Fatalf("HasSecret %v for secret %q", a.HasSecret, rec.Secret)
		}
	})
}
