// Package httpx holds the HTTP plumbing that ghost's handlers share: the
// status-recording ResponseWriter used by the access log (server) and by
// the git transport's metrics (githttp).
package httpx

import "net/http"

// StatusWriter records the status and the number of body bytes of a
// response. Status stays 0 until a header or body is written. BeforeWrite,
// when set, runs before each body write (githttp extends the connection's
// write deadline there).
type StatusWriter struct {
	http.ResponseWriter
	Status      int
	Bytes       int64
	BeforeWrite func()
}

// WriteHeader records the first status written.
func (s *StatusWriter) WriteHeader(code int) {
	if s.Status == 0 {
		s.Status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *StatusWriter) Write(b []byte) (int, error) {
	if s.Status == 0 {
		s.Status = http.StatusOK
	}
	if s.BeforeWrite != nil {
		s.BeforeWrite()
	}
	n, err := s.ResponseWriter.Write(b)
	s.Bytes += int64(n)
	return n, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (s *StatusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Wrote reports whether a header or body was written.
func (s *StatusWriter) Wrote() bool { return s.Status != 0 }
