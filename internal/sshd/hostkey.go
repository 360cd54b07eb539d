package sshd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/objstore"
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

// hostKeyAttempts bounds the creates sent when their outcome stays
// unknown and the key is still absent.
const hostKeyAttempts = 5

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
	b, _, err := objstore.ReadAll(ctx, store, HostKeyObject, maxHostKey)
	if err == nil {
		return parseHostKey(b)
	}
	if !errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("ssh host key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ssh host key: generate: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "ghost host key")
	if err != nil {
		return nil, fmt.Errorf("ssh host key: encode: %w", err)
	}
	ours := pem.EncodeToMemory(block)
	var lastErr error
	for attempt := 0; attempt < hostKeyAttempts; attempt++ {
		_, err := store.PutIfAbsent(ctx, HostKeyObject, bytes.NewReader(ours), int64(len(ours)))
		if err == nil {
			return parseHostKey(ours)
		}
		lastErr = err
		b, _, rerr := objstore.ReadAll(ctx, store, HostKeyObject, maxHostKey)
		if rerr == nil {
			return parseHostKey(b)
		}
		if !errors.Is(rerr, objstore.ErrNotFound) {
			return nil, fmt.Errorf("ssh host key: create: %w (and reading it back: %v)", err, rerr)
		}
		// Absent: ours has not applied. Send the same bytes again; being
		// conditional on absence, at most one copy can apply.
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("ssh host key: create %s: %w", HostKeyObject, lastErr)
}

func parseHostKey(b []byte) (ssh.Signer, error) {
	s, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("ssh host key %s is corrupt (it is not replaced, since clients know it; restore it or delete it to make a new one): %w", HostKeyObject, err)
	}
	return s, nil
}
