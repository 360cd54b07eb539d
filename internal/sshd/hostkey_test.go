package sshd

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/faultstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// nodes returns two handles on one store, as two nodes see it: the same
// memstore twice, or two fsstores opened on one directory.
func nodes(t *testing.T) map[string][2]objstore.Store {
	dir := t.TempDir()
	a, err := fsstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fsstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := memstore.New()
	return map[string][2]objstore.Store{"memstore": {m, m}, "fsstore": {a, b}}
}

// TestHostKeyConcurrentStart: nodes starting at once all present one
// key, and keep presenting it.
func TestHostKeyConcurrentStart(t *testing.T) {
	for name, stores := range nodes(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			const n = 8
			keys := make([]ssh.Signer, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					keys[i], errs[i] = HostKey(ctx, stores[i%2])
				}()
			}
			wg.Wait()
			for i := range n {
				if errs[i] != nil {
					t.Fatalf("node %d: %v", i, errs[i])
				}
				if keys[i].PublicKey().Type() != ssh.KeyAlgoED25519 {
					t.Fatalf("node %d: key type %s, want ed25519", i, keys[i].PublicKey().Type())
				}
				if !bytes.Equal(keys[i].PublicKey().Marshal(), keys[0].PublicKey().Marshal()) {
					t.Fatalf("node %d presents %s, node 0 %s", i, ssh.FingerprintSHA256(keys[i].PublicKey()), ssh.FingerprintSHA256(keys[0].PublicKey()))
				}
			}
			again, err := HostKey(ctx, stores[1])
			if err != nil || !bytes.Equal(again.PublicKey().Marshal(), keys[0].PublicKey().Marshal()) {
				t.Fatalf("a restart got another key (%v)", err)
			}
		})
	}
}

// TestHostKeyAmbiguousCreate runs the create against faultstore's
// outcomes (docs/adr/0006-write-outcomes.md): whatever happened, the key
// returned is the key stored.
func TestHostKeyAmbiguousCreate(t *testing.T) {
	for _, out := range faultstore.Faults() {
		t.Run(out.String(), func(t *testing.T) {
			ctx := context.Background()
			inner := memstore.New()
			fs := faultstore.New(inner)
			fs.SetPlan(func(c faultstore.Call) faultstore.Fault {
				if c.Op == faultstore.OpPutIfAbsent && c.N == 1 {
					return faultstore.Fault{Outcome: out}
				}
				return faultstore.Fault{}
			})
			k, err := HostKey(ctx, fs)
			if err != nil {
				t.Fatalf("HostKey after a %s create: %v", out, err)
			}
			stored, err := HostKey(ctx, inner)
			if err != nil || !bytes.Equal(stored.PublicKey().Marshal(), k.PublicKey().Marshal()) {
				t.Fatalf("returned key is not the stored one (%v)", err)
			}
		})
	}
}

// TestHostKeyCorruptNotReplaced: a stored key that does not parse is an
// error, and stays: replacing it would break every known_hosts.
func TestHostKeyCorruptNotReplaced(t *testing.T) {
	ctx := context.Background()
	s := memstore.New()
	junk := []byte("not a key")
	if _, err := s.Put(ctx, HostKeyObject, bytes.NewReader(junk), int64(len(junk))); err != nil {
		t.Fatal(err)
	}
	if _, err := HostKey(ctx, s); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("HostKey on a corrupt key = %v, want a corrupt-key error", err)
	}
	b, _, err := objstore.ReadAll(ctx, s, HostKeyObject, 1<<10)
	if err != nil || !bytes.Equal(b, junk) {
		t.Fatalf("the stored key was changed: %q, %v", b, err)
	}
}
