package lfstransfer

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
)

// BenchmarkTransfer puts and gets one 64 MiB object on a filesystem
// store, straight through the Store ("direct", the physical limit) and
// through a git-lfs-transfer session over in-process pipes ("protocol":
// pkt-line framing both ways, hashing, the temporary and its copy; no
// SSH encryption). B/op against the object's size shows whether memory
// stays flat.
//
//	go test -run XXX -bench Transfer -benchmem ./internal/lfs/lfstransfer
func BenchmarkTransfer(b *testing.B) {
	data := make([]byte, 64<<20)
	rand.NewChaCha8([32]byte{2}).Read(data)
	oid := oidOf(data)
	store, err := fsstore.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			if _, err := store.Put(ctx, "bench/direct", bytes.NewReader(data), int64(len(data))); err != nil {
				b.Fatal(err)
			}
			rc, _, err := store.Get(ctx, "bench/direct")
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, rc)
			rc.Close()
		}
	})
	b.Run("protocol", func(b *testing.B) {
		h, err := lfs.New(lfs.Options{Store: store, Auth: tokenAuth{}})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
		for i := 0; i < b.N; i++ {
			for _, op := range []Operation{Upload, Download} {
				cr, sw := io.Pipe()
				sr, cw := io.Pipe()
				done := make(chan error, 1)
				go func() {
					done <- Serve(ctx, sr, sw, h.Repo(alice), Options{Operation: op})
					sw.Close()
				}()
				go func() {
					w := bufio.NewWriterSize(cw, 64<<10)
					pktline.WriteString(w, "version 1\n")
					pktline.WriteFlush(w)
					if op == Upload {
						pktline.WriteString(w, "put-object "+oid+"\n")
						pktline.WriteString(w, fmt.Sprintf("size=%d\n", len(data)))
						pktline.WriteDelim(w)
						for p := data; len(p) > 0; p = p[min(len(p), 32768):] {
							pktline.Write(w, p[:min(len(p), 32768)]) // git-lfs's chunk
						}
					} else {
						pktline.WriteString(w, "get-object "+oid+"\n")
					}
					pktline.WriteFlush(w)
					pktline.WriteString(w, "quit\n")
					pktline.WriteFlush(w)
					w.Flush()
					cw.Close()
				}()
				var got int64
				in := pktline.NewReader(cr)
				for {
					kind, p, err := in.Next()
					if err != nil {
						break
					}
					if kind == pktline.Data && op == Download && len(p) > 64 {
						got += int64(len(p))
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				if op == Download && got != int64(len(data)) {
					b.Fatalf("got %d bytes", got)
				}
			}
		}
	})
}
