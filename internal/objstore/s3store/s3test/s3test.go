// Package s3test is an S3 server for tests: gofakes3, in memory, behind
// a declared fake that behaves as S3 does where gofakes3 does not, so
// that what tests show against it holds against S3
// (docs/adr/0126-lfs-direct-to-s3.md). Production code never uses it.
//
//   - Presigned requests (a query signature): the SigV4 signature over
//     the method, path, query and signed headers (Content-Length and
//     x-amz-checksum-sha256 among them), and X-Amz-Date + X-Amz-Expires
//     against the server's clock, which tests move (Advance; no test
//     sleeps). Requests without a query signature (a node's own,
//     header-signed) pass these checks unchecked.
//   - SHA-256 checksums as S3 keeps them: a PUT carrying
//     x-amz-checksum-sha256 is hashed as it streams to gofakes3 and
//     refused (400 BadDigest) if its body does not match, and then
//     nothing is stored; the checksum of what was stored is remembered
//     per key (a PUT without one, a DELETE or a completed multipart
//     upload forgets it) and returned by HEAD and by a whole GET that ask
//     for it (x-amz-checksum-mode: ENABLED) as x-amz-checksum-sha256 with
//     x-amz-checksum-type FULL_OBJECT; CopyObject carries it to the
//     destination. gofakes3 never sees the header. The memory is per
//     key, not transactional with gofakes3's storage, which is enough for
//     requests on one key that do not overlap.
//   - With Options.Unchecked, checksums are gofakes3's as it is: bodies
//     are not checked, and every x-amz-* header of a PUT is stored and
//     echoed on HEAD and GET as sent, so it reports as an object's
//     checksum whatever its writer claimed: a server that keeps checksums
//     it never checked.
//
// It logs every request ("METHOD /bucket/key", " <- source" for a copy),
// for tests that count what a node reads and copies.
package s3test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Options configure a Server.
type Options struct {
	// AccessKey and Secret are the credentials presigned requests are
	// signed with; Region their region (default us-east-1).
	AccessKey, Secret, Region string
	// Unchecked keeps checksums as gofakes3 does: unchecked.
	Unchecked bool
}

// Server is the S3 test server, an http.Handler: serve it with
// httptest.NewServer, at as many addresses as a test needs (a node's
// and its clients').
type Server struct {
	next http.Handler
	opts Options
	mu   sync.Mutex
	now  time.Time
	sums map[string]string // path → base64 sha256 of what is stored
	log  []string
}

// New returns a Server on an empty in-memory backend, its clock at the
// present.
func New(opts Options) *Server {
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	return &Server{next: gofakes3.New(s3mem.New()).Server(), opts: opts, now: time.Now(), sums: map[string]string{}}
}

// Advance moves the clock presigned requests are checked against.
func (s *Server) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(d)
}

// Requests returns the requests so far, presigned ones or the others,
// whose method is method and whose path (not a copy's source) holds
// part.
func (s *Server) Requests(presigned bool, method, part string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.log {
		l, isPresigned := strings.CutPrefix(l, "presigned ")
		if path, _, _ := strings.Cut(l, " <- "); isPresigned == presigned && strings.HasPrefix(path, method+" ") && strings.Contains(path, part) {
			out = append(out, l)
		}
	}
	return out
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	l := r.Method + " " + r.URL.Path
	if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
		l += " <- " + src
	}
	if q.Get("X-Amz-Signature") != "" {
		l = "presigned " + l
	}
	s.mu.Lock()
	s.log = append(s.log, l)
	now := s.now
	s.mu.Unlock()
	if q.Get("X-Amz-Signature") == "" {
		s.serve(w, r)
		return
	}
	signedAt, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	secs, err2 := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || err2 != nil {
		http.Error(w, "AuthorizationQueryParametersError", http.StatusBadRequest)
		return
	}
	if now.After(signedAt.Add(time.Duration(secs) * time.Second)) {
		http.Error(w, "AccessDenied: Request has expired", http.StatusForbidden)
		return
	}
	// Sign the same request again at the same time; the signatures
	// match only if nothing signed was changed.
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	uq := u.Query()
	for _, k := range []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"} {
		uq.Del(k)
	}
	u.RawQuery = uq.Encode()
	again, _ := http.NewRequest(r.Method, u.String(), nil)
	for _, hname := range strings.Split(q.Get("X-Amz-SignedHeaders"), ";") {
		switch hname {
		case "host":
		case "content-length":
			again.ContentLength = r.ContentLength
		default:
			if v := r.Header.Get(hname); v != "" {
				again.Header.Set(hname, v)
			}
		}
	}
	signed, _, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).PresignHTTP(
		r.Context(), aws.Credentials{AccessKeyID: s.opts.AccessKey, SecretAccessKey: s.opts.Secret}, again, "UNSIGNED-PAYLOAD", "s3", s.opts.Region, signedAt)
	su, _ := url.Parse(signed)
	if err != nil || su.Query().Get("X-Amz-Signature") != q.Get("X-Amz-Signature") || su.Query().Get("X-Amz-SignedHeaders") != q.Get("X-Amz-SignedHeaders") {
		http.Error(w, "SignatureDoesNotMatch", http.StatusForbidden)
		return
	}
	s.serve(w, r)
}

// serve hands r to gofakes3, keeping checksums as S3 does unless
// Unchecked.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.opts.Unchecked {
		s.next.ServeHTTP(w, r)
		return
	}
	q := r.URL.Query()
	path := r.URL.Path
	// remember runs once gofakes3 has answered r, if it succeeded.
	remember := func(sw *statusWriter, change func()) {
		if sw.done(); sw.code >= 200 && sw.code < 300 {
			s.mu.Lock()
			change()
			s.mu.Unlock()
		}
	}
	sw := &statusWriter{ResponseWriter: w}
	switch {
	case r.Method == "PUT" && r.Header.Get("X-Amz-Copy-Source") != "":
		src, _ := url.PathUnescape(strings.SplitN(r.Header.Get("X-Amz-Copy-Source"), "?", 2)[0])
		src = "/" + strings.TrimPrefix(src, "/")
		s.next.ServeHTTP(sw, r)
		remember(sw, func() {
			if sum, ok := s.sums[src]; ok {
				s.sums[path] = sum
			} else {
				delete(s.sums, path)
			}
		})
	case r.Method == "PUT" && !q.Has("uploadId"):
		want := r.Header.Get("X-Amz-Checksum-Sha256")
		r.Header.Del("X-Amz-Checksum-Sha256")
		if want != "" {
			sum, err := base64.StdEncoding.DecodeString(want)
			if err != nil || len(sum) != sha256.Size {
				http.Error(w, "InvalidRequest: Value for x-amz-checksum-sha256 header is invalid.", http.StatusBadRequest)
				return
			}
			r.Body = &sumReader{r: r.Body, h: sha256.New(), want: sum}
		}
		s.next.ServeHTTP(sw, r)
		remember(sw, func() {
			if want != "" {
				s.sums[path] = want
			} else {
				delete(s.sums, path)
			}
		})
	case r.Method == "DELETE" && !q.Has("uploadId"), r.Method == "POST" && q.Has("uploadId"):
		s.next.ServeHTTP(sw, r)
		remember(sw, func() { delete(s.sums, path) })
	case (r.Method == "GET" || r.Method == "HEAD") && r.Header.Get("X-Amz-Checksum-Mode") == "ENABLED" &&
		r.Header.Get("Range") == "" && !q.Has("partNumber"):
		s.mu.Lock()
		sum := s.sums[path]
		s.mu.Unlock()
		sw.onHeader = func(h http.Header, code int) {
			if sum != "" && code >= 200 && code < 300 {
				h.Set("X-Amz-Checksum-Sha256", sum)
				h.Set("X-Amz-Checksum-Type", "FULL_OBJECT")
			}
		}
		s.next.ServeHTTP(sw, r)
		sw.done()
	default:
		s.next.ServeHTTP(w, r)
	}
}

// sumReader hashes a PUT's body as gofakes3 reads it and, at its end,
// fails the read with gofakes3's BadDigest if it is not the checksum the
// request carried: gofakes3 then answers 400 BadDigest and stores
// nothing, as S3 does.
type sumReader struct {
	r    io.ReadCloser
	h    hash.Hash
	want []byte
}

func (s *sumReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.h.Write(p[:n])
	if err == io.EOF && !bytes.Equal(s.h.Sum(nil), s.want) {
		return n, gofakes3.ErrBadDigest
	}
	return n, err
}

func (s *sumReader) Close() error { return s.r.Close() }

// statusWriter records the status of an answer, and lets onHeader add
// headers once it is known: at WriteHeader, or at done, after a handler
// that wrote nothing (net/http then sends 200 and the headers).
type statusWriter struct {
	http.ResponseWriter
	code     int
	onHeader func(http.Header, int)
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
		if s.onHeader != nil {
			s.onHeader(s.Header(), code)
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) done() {
	if s.code == 0 {
		s.code = http.StatusOK
		if s.onHeader != nil {
			s.onHeader(s.Header(), s.code)
		}
	}
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}
