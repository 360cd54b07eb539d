package sshd

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// HostKeyObject is the object-store key of the installation's SSH host
// key, an OpenSSH-format Ed25519 private key in PEM. It sits in the same
// store as everything else, so every node behind a load balancer presents
// the same key and clients never see "REMOTE HOST IDENTIFICATION HAS
// CHANGED" (docs/adr/0061-ssh-keys-and-host-key.md). Whoever can read the
// bucket can impersonate the server; they can already read every
// repository.
const HostKeyObject = "meta/ssh/host_ed25519"

// maxHostKey bounds the stored key read: an Ed25519 key is ~400 bytes.
const maxHostKey = 16 << 10

// HostKey returns the installation's SSH host key, creating it on the
// first start of the first node. Creation is a PutIfAbsent of a fresh
// Ed25519 key, so of nodes starting at once exactly one key is stored and
// every node uses it: a node whose create failed, by a lost race or with
// an unknown outcome (docs/adr/0006-write-outcomes.md), reads the key
// back and uses whatever is stored, its own or the winner's. Unlike a
// metadata record it needs no nonce: it does not matter whose key won,
// only that every node uses the stored one.
//
// A stored key that does not parse is an error, never replaced: a new
// key would break every client's known_hosts.
func HostKey(ctx context.Context, store objstore.Store) (ssh.Signer, error) {
	raw := record.Raw(maxHostKey)
	b, _, err := record.Get(ctx, store, raw, HostKeyObject)
	if errors.Is(err, objstore.ErrNotFound) {
		var ours []byte
		if ours, err = newHostKey(); err != nil {
			return nil, err
		}
		b, err = record.CreateOnce(ctx, store, raw, HostKeyObject, &ours)
	}
	if err != nil {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	return parseHostKey(*b)
}

// newHostKey makes a fresh Ed25519 host key, PEM-encoded.
func newHostKey() ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ssh host key: generate: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "ghost host key")
	if err != nil {
		return nil, fmt.Errorf("ssh host key: encode: %w", err)
	}
	return pem.EncodeToMemory(block), nil
}

func parseHostKey(b []byte) (ssh.Signer, error) {
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("ssh host key %s is corrupt (it is not replaced, since clients know it; restore it or delete it to make a new one): %w", HostKeyObject, err)
	}
	return s, nil
}
