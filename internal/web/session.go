package web

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// SessionKeyObject is the object-store key of the web UI's session key:
// 32 random bytes, created by the first node to start. Every node reads
// the same key, so a session cookie sealed by one node opens on any other
// and nodes keep no session state (docs/adr/0080-web-ui-sessions-and-reads.md). Whoever
// can read the bucket can forge sessions; they can already read every
// token's hash and every repository. Deleting it signs everyone out.
const SessionKeyObject = "meta/web/session_key"

const (
	sessionKeyBytes = 32
	sessionCookie   = "ghost_session"
	csrfCookie      = "ghost_csrf"
	// sessionLifetime bounds a session; the token it holds is checked on
	// every request, so revoking the token ends the session at once.
	sessionLifetime = 30 * 24 * time.Hour
)

// keys are the secrets derived from the stored session key.
type keys struct {
	aead cipher.AEAD
	csrf []byte
}

// loadSessionKey returns the installation's session key, creating it on
// the first start of the first node with PutIfAbsent, as the SSH host key
// is created (internal/sshd/hostkey.go): a node whose create lost a race
// or has an unknown outcome reads back whatever is stored and uses it.
func loadSessionKey(ctx context.Context, store objstore.Store) (keys, error) {
	raw := record.Raw(1 << 10)
	b, _, err := record.Get(ctx, store, raw, SessionKeyObject)
	if errors.Is(err, objstore.ErrNotFound) {
		ours := make([]byte, sessionKeyBytes)
		if _, err := rand.Read(ours); err != nil {
			return keys{}, fmt.Errorf("web session key: generate: %w", err)
		}
		b, err = record.CreateOnce(ctx, store, raw, SessionKeyObject, &ours)
	}
	if err != nil {
		return keys{}, fmt.Errorf("web session key: %w", err)
	}
	return deriveKeys(*b)
}

func deriveKeys(master []byte) (keys, error) {
	if len(master) != sessionKeyBytes {
		return keys{}, fmt.Errorf("web session key %s is corrupt: %d bytes, want %d (delete it to make a new one; that signs everyone out)", SessionKeyObject, len(master), sessionKeyBytes)
	}
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, master)
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	block, err := aes.NewCipher(derive("ghost web session v1"))
	if err != nil {
		return keys{}, fmt.Errorf("web session key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return keys{}, fmt.Errorf("web session key: %w", err)
	}
	return keys{aead: aead, csrf: derive("ghost web csrf v1")}, nil
}

// seal returns the cookie value holding token until expires.
func (k keys) seal(token string, expires time.Time) string {
	plain := binary.BigEndian.AppendUint64(nil, uint64(expires.Unix()))
	plain = append(plain, token...)
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail
	}
	return base64.RawURLEncoding.EncodeToString(k.aead.Seal(nonce, nonce, plain, []byte(sessionCookie)))
}

// open returns the token a cookie value holds, if it is authentic and
// not expired.
func (k keys) open(v string, now time.Time) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) < k.aead.NonceSize() {
		return "", false
	}
	plain, err := k.aead.Open(nil, b[:k.aead.NonceSize()], b[k.aead.NonceSize():], []byte(sessionCookie))
	if err != nil || len(plain) < 8 {
		return "", false
	}
	if now.Unix() >= int64(binary.BigEndian.Uint64(plain[:8])) {
		return "", false
	}
	return string(plain[8:]), true
}

// csrfToken is the token a form carries: a MAC of the browser's CSRF
// cookie and its session cookie, so it is bound to both. A page from
// another site can neither read the cookies nor compute the MAC.
func (k keys) csrfToken(csrf, session string) string {
	m := hmac.New(sha256.New, k.csrf)
	m.Write([]byte(csrf))
	m.Write([]byte{0})
	m.Write([]byte(session))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether r's form carries the token for its cookies.
func (k keys) checkCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	sess := ""
	if s, err := r.Cookie(sessionCookie); err == nil {
		sess = s.Value
	}
	want := k.csrfToken(c.Value, sess)
	got := r.PostFormValue("csrf")
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}

// secure reports whether the browser reached us over TLS, directly or
// through a proxy that says so.
func secure(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

func randomValue() string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
