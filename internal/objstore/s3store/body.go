package s3store

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// errBodySize is the cause inside a sizeError, so tests can check for it.
var errBodySize = errors.New("body length differs from declared size")

// sizeError reports a body that is shorter or longer than declared. It
// tells the SDK's retryer not to retry: resending the same reader cannot fix
// it.
type sizeError struct{ read, declared int64 }

func (e *sizeError) Error() string {
	return fmt.Sprintf("%v: read %d bytes, declared %d", errBodySize, e.read, e.declared)
}
func (e *sizeError) Unwrap() error        { return errBodySize }
func (e *sizeError) RetryableError() bool { return false }

// sizedBody streams exactly size bytes of r and refuses to deliver the last
// of them if r holds more, or to finish if r holds fewer. Either way the
// HTTP request is cut off before the declared Content-Length is reached, so
// the server never stores a truncated or padded object. (net/http only
// checks the length after the whole declared body has gone out.)
//
// If r is an io.Seeker the body is one too, so the SDK can rewind it to
// retry a request; otherwise a failed request is not retried.
type sizedBody struct {
	r        io.Reader
	declared int64
	read     int64 // delivered since start (or the last rewind)

	mu  sync.Mutex // failure() is read after the SDK call, maybe from another goroutine's writes
	err error
}

// seekableBody is a sizedBody over an io.ReadSeeker.
type seekableBody struct {
	*sizedBody
	seeker io.Seeker
	base   int64 // r's offset when the body started
}

// bodyReader is what the put paths use: a sizedBody, seekable or not.
type bodyReader interface {
	io.Reader
	failure() error
}

func newSizedBody(r io.Reader, size int64) bodyReader {
	b := &sizedBody{r: r, declared: size}
	if sk, ok := r.(io.ReadSeeker); ok {
		if base, err := sk.Seek(0, io.SeekCurrent); err == nil {
			return &seekableBody{sizedBody: b, seeker: sk, base: base}
		}
	}
	return b
}

func (b *sizedBody) fail(err error) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = err
	return err
}

// failure reports a size mismatch seen while reading, if any.
func (b *sizedBody) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

func (b *sizedBody) Read(p []byte) (int, error) {
	remaining := b.declared - b.read
	if remaining <= 0 {
		return 0, b.probeEnd()
	}
	if int64(len(p)) > remaining {
		p = p[:remaining]
	}
	n, err := b.r.Read(p)
	b.read += int64(n)
	switch {
	case err == io.EOF && b.read < b.declared:
		return n, b.fail(&sizeError{read: b.read, declared: b.declared})
	case err == io.EOF:
		return n, io.EOF // exactly declared, and r says it is done
	case err != nil:
		return n, err
	case b.read == b.declared:
		// Withhold the last bytes until r proves it has no more.
		if perr := b.probeEnd(); perr != io.EOF {
			b.read -= int64(n)
			return 0, perr
		}
	}
	return n, nil
}

// probeEnd reads past the declared end: io.EOF if r is exhausted, a
// sizeError if it has more.
func (b *sizedBody) probeEnd() error {
	var one [1]byte
	for range 100 { // tolerate a few (0, nil) reads, as io.Reader allows
		n, err := b.r.Read(one[:])
		if n > 0 {
			return b.fail(&sizeError{read: b.declared + 1, declared: b.declared})
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// Seek rewinds for an SDK retry. Offsets are relative to where the body
// started, as the SDK expects of a request body.
func (b *seekableBody) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		offset += b.base
	case io.SeekCurrent:
		offset += b.base + b.read
		whence = io.SeekStart
	case io.SeekEnd:
		offset += b.base + b.declared
		whence = io.SeekStart
	}
	if offset < b.base || offset > b.base+b.declared {
		return 0, fmt.Errorf("s3store: seek to %d outside body [%d, %d]", offset-b.base, 0, b.declared)
	}
	pos, err := b.seeker.Seek(offset, whence)
	if err != nil {
		return 0, err
	}
	b.read = pos - b.base
	b.mu.Lock()
	b.err = nil
	b.mu.Unlock()
	return b.read, nil
}
