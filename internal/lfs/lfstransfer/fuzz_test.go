package lfstransfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
)

// pkts frames a session's input as send does.
func pkts(lines ...string) []byte {
	var b bytes.Buffer
	for _, p := range lines {
		switch {
		case p == "":
			pktline.WriteFlush(&b)
		case p == "\x01":
			pktline.WriteDelim(&b)
		case strings.HasPrefix(p, "\x02"):
			pktline.WriteString(&b, p[1:])
		default:
			pktline.WriteString(&b, p+"\n")
		}
	}
	return b.Bytes()
}

// FuzzServe feeds arbitrary input to a session (an upload session when
// the first byte is even, a download one otherwise) and checks that it
// never panics and that whatever it stored is whole: every visible
// object hashes to its oid, every reference has its object at its size,
// and no temporary is left behind.
func FuzzServe(f *testing.F) {
	data := []byte("fuzzed large file")
	oid := oidOf(data)
	f.Add(append([]byte{0}, pkts(append([]string{"version 1", "", "batch", "\x01", fmt.Sprintf("%s %d", oid, len(data)), ""}, append(putPkts(oid, len(data), data), "verify-object "+oid, fmt.Sprintf("size=%d", len(data)), "", "quit", "")...)...)...))
	f.Add(append([]byte{0}, pkts(append([]string{"version 1", ""}, putPkts(oid, len(data)-3, data)...)...)...))
	f.Add(append([]byte{0}, pkts("version 1", "", "lock", "path=a b", "", "list-locks", "limit=1", "", "unlock 00", "force=true", "")...))
	f.Add(append([]byte{1}, pkts("version 1", "", "batch", "\x01", oid+" 1", "", "get-object "+oid, "", "list-lock", "")...))
	f.Add([]byte{0, '0', '0', '0', '9', 'q', 'u', 'i', 't', '\n', '0', '0', '0', '0'})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		op := Upload
		if in[0]%2 == 1 {
			op = Download
		}
		fx := newFixture(t, 64)
		_ = Serve(context.Background(), bytes.NewReader(in[1:]), io.Discard, fx.h.Repo(alice), Options{Operation: op, MaxBatchItems: 4})
		ctx := context.Background()
		if tmp, _ := fx.store.List(ctx, "lfs/tmp/", "", 10); len(tmp) != 0 {
			t.Fatalf("temporaries left: %v", tmp)
		}
		objs, _ := fx.store.List(ctx, "lfs/objects/", "", 100)
		for _, o := range objs {
			rc, _, err := fx.store.Get(ctx, o.Key)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			sum := sha256.Sum256(b)
			if !strings.HasSuffix(o.Key, "/"+hex.EncodeToString(sum[:])) {
				t.Fatalf("object %s holds bytes hashing to %x", o.Key, sum)
			}
		}
		refs, _ := fx.store.List(ctx, "lfs/refs/", "", 100)
		for _, r := range refs {
			rc, _, err := fx.store.Get(ctx, r.Key)
			if err != nil {
				t.Fatal(err)
			}
			var rec struct{ Size int64 }
			json.NewDecoder(rc).Decode(&rec)
			rc.Close()
			oid := r.Key[strings.LastIndexByte(r.Key, '/')+1:]
			_, info, err := fx.store.Get(ctx, "lfs/objects/alice/"+oid)
			if err != nil || info.Size != rec.Size {
				t.Fatalf("reference %s (size %d) without its object: %v %+v", r.Key, rec.Size, err, info)
			}
		}
	})
}
