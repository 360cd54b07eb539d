package meta

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// FuzzValidateName checks the name rule's promises: an accepted name is
// 1..MaxNameLen bytes of [A-Za-z0-9._-], not starting with '.', not a flag, not
// "*.git", and safe as an object-key segment; lookups accept it with or
// without one ".git".
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{"alice", "Alice-Repo_1.x", ".github", "a..b", "x.git", "..", "-rf", "a/b", "café", strings.Repeat("a", MaxNameLen)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateName(name)
		if err != nil {
			if !errors.Is(err, ErrInvalidName) {
				t.Fatalf("error %v does not wrap ErrInvalidName", err)
			}
			if _, err := canon(name); !errors.Is(err, ErrInvalidName) {
				t.Fatalf("canon accepts %q (err %v)", name, err)
			}
			return
		}
		if name == "" || len(name) > MaxNameLen || name[0] == '.' || name[0] == '-' || hasGitSuffix(name) {
			t.Fatalf("%q accepted", name)
		}
		if strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
			t.Fatalf("%q accepted with a byte outside the alphabet", name)
		}
		key, err := canon(name)
		if err != nil || key != strings.ToLower(name) {
			t.Fatalf("canon(%q) = %q, %v", name, key, err)
		}
		for _, k := range []string{tenantKey(key), repoKey(key, key), memberKey(key, key), tokenIDKey(key, key)} {
			if err := objstore.ValidateKey(k); err != nil {
				t.Fatalf("name %q makes a bad key: %v", name, err)
			}
		}
		for _, n := range []string{name, name + ".git", name + ".GiT"} {
			if k, err := lookupName(n); err != nil || k != key {
				t.Fatalf("lookupName(%q) = %q, %v; want %q", n, k, err, key)
			}
		}
	})
}

// FuzzParseScope: a parsed scope is valid and round-trips through its
// name; anything else is ErrInvalidArgument, from text decoding too.
func FuzzParseScope(f *testing.F) {
	for _, s := range []string{"read", "WRITE", " admin\n", "root", "", "0", "3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := ParseScope(s)
		var tx Scope
		terr := tx.UnmarshalText([]byte(s))
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) || !errors.Is(terr, ErrInvalidArgument) || tx != 0 {
				t.Fatalf("%q: errors %v / %v (scope %v)", s, err, terr, tx)
			}
			return
		}
		if !sc.Valid() || terr != nil || tx != sc {
			t.Fatalf("%q: scope %v, text %v %v", s, sc, tx, terr)
		}
		b, err := sc.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		if back, err := ParseScope(string(b)); err != nil || back != sc {
			t.Fatalf("%v does not round-trip: %v %v", sc, back, err)
		}
	})
}

// FuzzDecodeRecord decodes arbitrary stored bytes as each kind of
// metadata record. Decoding may fail but never panics, and a record that
// decodes (and encodes) is stable: encoding it again changes nothing.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"name":"alice","kind":"user","created_at":"2024-01-02T03:04:05Z"}`,
		`{"v":1,"org":"acme","user":"alice","added_at":"2024-01-02T03:04:05.123456789+02:00"}`,
		`{"v":1,"id":"01J0000000000000000000000A","tenant":"alice","scope":"write","created_at":"2024-01-02T03:04:05Z","description":"ci"}`,
		`{"v":1,"id":"01J0000000000000000000000A","tenant":"alice","scope":"admin","created_at":"2024-01-02T03:04:05Z","sha256":"00"}`,
		`{"v":1,"id":"x","owner":"alice","name":"r","public":true,"created_at":"2024-01-02T03:04:05Z","forked_from":"y","deleted":true}`,
		`{"v":1,"scope":7}`, `{"v":2}`, `{"v":1,"scope":null}`, `{not json`, ``,
	} {
		f.Add([]byte(s))
	}
	kinds := []func() any{
		func() any { return new(tenantRecord) },
		func() any { return new(memberRecord) },
		func() any { return new(tokenRecord) },
		func() any { return new(tokenIDRecord) },
		func() any { return new(repoRecord) },
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, kind := range kinds {
			v := kind()
			if err := decodeRecord(b, v); err != nil {
				continue
			}
			if tr, ok := v.(*tokenRecord); ok && tr.Scope != 0 && !tr.Scope.Valid() {
				t.Fatalf("token record with scope %d decoded", int(tr.Scope))
			}
			enc, err := encodeRecord(v)
			if err != nil {
				continue // e.g. a token record without a scope, or a time past year 9999
			}
			w := kind()
			if err := decodeRecord(enc, w); err != nil {
				t.Fatalf("%T: re-encoded record %s does not decode: %v", v, enc, err)
			}
			enc2, err := encodeRecord(w)
			if err != nil || !bytes.Equal(enc, enc2) {
				t.Fatalf("%T: record changes on re-encoding:\n%s\n%s (%v)", v, enc, enc2, err)
			}
		}
	})
}

// FuzzAuthenticate presents arbitrary strings as tokens to a store that
// knows one: only that token authenticates; everything else, including a
// well-formed token whose record has no valid scope, is ErrUnauthenticated.
func FuzzAuthenticate(f *testing.F) {
	ctx := context.Background()
	s := newStore(memstore.New())
	good := TokenPrefix + tokenEncoding().EncodeToString(bytes.Repeat([]byte{0x42}, tokenBytes))
	noScope := TokenPrefix + tokenEncoding().EncodeToString(bytes.Repeat([]byte{0x17}, tokenBytes))
	if _, err := s.CreateTenant(ctx, "alice", KindUser); err != nil {
		f.Fatal(err)
	}
	if _, err := s.createRecord(ctx, tokenKey(hashToken(good)), &tokenRecord{V: recordVersion, ID: "id1", Tenant: "alice", Scope: ScopeWrite}); err != nil {
		f.Fatal(err)
	}
	body := `{"v":1,"id":"id2","tenant":"alice"}`
	if _, err := s.objects.Put(ctx, tokenKey(hashToken(noScope)), strings.NewReader(body), int64(len(body))); err != nil {
		f.Fatal(err)
	}
	for _, tok := range []string{good, noScope, good[:len(good)-1] + "b", strings.ToUpper(good), TokenPrefix, "", good + "a", "ghost_" + strings.Repeat("1", tokenLen-6)} {
		f.Add(tok)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := s.Authenticate(ctx, tok)
		if tok == good {
			if err != nil || p.Tenant != "alice" || p.TokenID != "id1" || p.Scope != ScopeWrite {
				t.Fatalf("the real token: %+v, %v", p, err)
			}
			return
		}
		if !errors.Is(err, ErrUnauthenticated) || p != (Principal{}) {
			t.Fatalf("%q: %+v, %v; want ErrUnauthenticated", tok, p, err)
		}
	})
}
