// Package certfile serves a TLS certificate from a pair of PEM files and
// picks up new ones when the files change, so that "ghost serve
// --tls-cert --tls-key" serves HTTPS without a proxy in front and a
// renewed certificate (certbot, an ACME client, a secret mount) takes
// effect without a restart (docs/adr/0102-tls.md).
package certfile

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// DefaultCheckEvery is how often at most the files are looked at: one
// stat of each, on a handshake.
const DefaultCheckEvery = time.Second

// Reloader holds the current certificate of a pair of files.
type Reloader struct {
	certFile, keyFile string
	logger            *slog.Logger
	every             time.Duration
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp // of the files the certificate was read from
	checked time.Time
}

// fileStamp is what tells a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{st.ModTime(), st.Size()}, nil
}

// New reads the pair once; an error here is the operator's to fix before
// the server starts (a missing file, a key that does not match).
func New(certFile, keyFile string, logger *slog.Logger) (*Reloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{certFile: certFile, keyFile: keyFile, logger: logger, every: DefaultCheckEvery, now: time.Now}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the files; the caller holds mu or is New.
func (r *Reloader) load() error {
	cs, err := stampOf(r.certFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	ks, err := stampOf(r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS key: %w", err)
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	if c.Leaf == nil && len(c.Certificate) > 0 {
		if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil {
			c.Leaf = leaf
		}
	}
	r.cert, r.stamp = &c, [2]fileStamp{cs, ks}
	return nil
}

// Certificate returns the current certificate, reading the files again
// when either changed since it was read (looked at most once per
// DefaultCheckEvery). A pair that does not load, as while a renewal has
// written one file and not yet the other, keeps the certificate served
// so far; the next look tries again.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.checked) < r.every {
		return r.cert
	}
	r.checked = now
	cs, err1 := stampOf(r.certFile)
	ks, err2 := stampOf(r.keyFile)
	if err1 != nil || err2 != nil || [2]fileStamp{cs, ks} == r.stamp {
		return r.cert
	}
	old := r.cert
	if err := r.load(); err != nil {
		r.logger.Warn("TLS certificate files changed but do not load; serving the previous certificate", "err", err)
		return old
	}
	attrs := []any{"cert", r.certFile}
	if r.cert.Leaf != nil {
		attrs = append(attrs, "not_after", r.cert.Leaf.NotAfter)
	}
	r.logger.Info("TLS certificate reloaded", attrs...)
	return r.cert
}

// GetCertificate is tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}

// Config is a server TLS configuration serving r's certificate: TLS 1.2
// at least, HTTP/1.1 (what git and browsers need of ghost).
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
}
