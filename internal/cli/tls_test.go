package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns the certificate.
func selfSigned(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "ghost test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Written next to the files and renamed over them, as a renewal
	// would: a reader never sees half a file.
	for path, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(path+".new", pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestServeTLS: --tls-cert and --tls-key serve HTTPS (git included), and
// a new certificate written over the files is served from then on,
// without a restart (issue 21 §6).
func TestServeTLS(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := selfSigned(t, certFile, keyFile, 1)

	// The flags go together, and a pair that does not load stops serve.
	var errb bytes.Buffer
	if code := Main(context.Background(), []string{"serve", "--data-dir", dir, "--tls-cert", certFile}, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), "go together") {
		t.Errorf("--tls-cert alone: %d %s", code, errb.String())
	}
	errb.Reset()
	if code := Main(context.Background(), []string{"serve", "--data-dir", dir, "--ssh-listen", "", "--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", filepath.Join(dir, "nope.pem")}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "TLS key") {
		t.Errorf("a missing key: %d %s", code, errb.String())
	}

	base, stop := startServe(t, dir, "--data-dir", dir, "--tls-cert", certFile, "--tls-key", keyFile, "--log-level", "warn")
	defer stop()
	if !strings.HasPrefix(base, "https://127.0.0.1:") {
		t.Fatalf("serve printed %s", base)
	}
	served := func(trust *x509.Certificate) (*x509.Certificate, error) {
		pool := x509.NewCertPool()
		pool.AddCert(trust)
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
		res, err := hc.Get(base + "/healthz")
		if err != nil {
			return nil, err
		}
		res.Body.Close()
		return res.TLS.PeerCertificates[0], nil
	}
	if got, err := served(first); err != nil || got.SerialNumber.Int64() != 1 {
		t.Fatalf("first certificate: %v %v", got, err)
	}
	if res, err := http.Get(strings.Replace(base, "https", "http", 1) + "/healthz"); err == nil {
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			t.Error("plain HTTP served on the TLS port")
		}
	}

	// git over HTTPS, trusting the certificate.
	ms := metaStore(t, dir)
	ctx := context.Background()
	if _, err := ms.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	tok, _, err := ms.CreateToken(ctx, "alice", meta.ScopeWrite, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.CreateRepo(ctx, "alice", "app", true); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err == nil {
		ca := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: first.Raw}), 0o644); err != nil {
			t.Fatal(err)
		}
		env := append(gittest.Env(t.TempDir()), "GIT_SSL_CAINFO="+ca)
		src := filepath.Join(t.TempDir(), "src")
		gittest.Generate(t, env, src, gittest.Shape{Commits: 1, Files: 1, BlobBytes: 10})
		u, _ := url.Parse(base + "/alice/app.git")
		u.User = url.UserPassword("x", tok)
		gittest.Git(t, env, src, "push", "-q", u.String(), "main")
		gittest.Git(t, env, "", "clone", "-q", base+"/alice/app", filepath.Join(t.TempDir(), "copy"))
	}

	// A renewal: new files, served from the next handshake on.
	second := selfSigned(t, certFile, keyFile, 2)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err := served(second)
		if err == nil && got.SerialNumber.Int64() == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate is not served: %v %v", got, err)
		}
	}
	// A broken pair (a key alone, mid-renewal) keeps the last good one.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if got, err := served(second); err != nil || got.SerialNumber.Int64() != 2 {
		t.Fatalf("after a broken write: %v %v", got, err)
	}
}
