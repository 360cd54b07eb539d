package githttp

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/ghost-scm/ghost/internal/gitsvc"
)

// connIO extends the connection's deadlines while bytes flow: before each
// read of the request body and each write of the response, the deadline
// moves to now+idle. A client that stops reading or sending for longer is
// cut off; a large transfer at any steady speed is not, however long it
// takes. Time the server spends thinking (materializing, counting
// objects) does not count, because a deadline is only set just before
// the connection is used.
type connIO struct {
	rc   *http.ResponseController
	idle time.Duration
}

// readDeadline moves the read deadline before a body read; until, when
// not zero, caps it (the deadline of a whole fetch request).
func (c *connIO) readDeadline(until time.Time) {
	var d time.Time
	if c.idle > 0 {
		d = time.Now().Add(c.idle)
	}
	if !until.IsZero() && (d.IsZero() || until.Before(d)) {
		d = until
	}
	if !d.IsZero() {
		_ = c.rc.SetReadDeadline(d)
	}
}

func (c *connIO) writeDeadline() {
	if c.idle > 0 {
		_ = c.rc.SetWriteDeadline(time.Now().Add(c.idle))
	}
}

// deadlineBody is the request body as the handler sees it: each read
// first extends the read deadline. Once the body is read to its end,
// net/http clears the deadline and reads the connection in the background
// to notice a client that goes away; a deadline set after that would
// cancel the request while its response is still streaming, so reads past
// the end touch no deadline.
type deadlineBody struct {
	io.ReadCloser
	conn  *connIO
	until time.Time
	eof   bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	b.conn.readDeadline(b.until)
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// bodyError classifies a failure to read a request body: the client was
// too slow (408), the body too large (413) or malformed (400). ok is
// false when the client is gone and no answer is due. The connection is
// closed after any of these answers: the rest of the body is not read.
func bodyError(r *http.Request, err error) (status int, msg string, ok bool) {
	// A read deadline that expires also cancels the request's context, so
	// it is tested first.
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout, "the request body did not arrive in time", true
	case r.Context().Err() != nil:
		return 0, "", false
	case errors.Is(err, gitsvc.ErrTooLarge):
		return http.StatusRequestEntityTooLarge, err.Error(), true
	default:
		return http.StatusBadRequest, "reading the request: " + err.Error(), true
	}
}
