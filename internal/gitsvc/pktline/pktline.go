// Package pktline reads and writes git's pkt-line framing and the
// side-band multiplexing that rides on it.
//
// ghost speaks the receive-pack side of the protocol itself (parsing the
// commands before the pack, writing the advertisement and report-status),
// so it needs a strict reader that refuses malformed input with an error
// instead of guessing.
package pktline

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MaxLen is the largest pkt-line, length prefix included.
const MaxLen = 65520

// MaxData is the most payload one pkt-line carries.
const MaxData = MaxLen - 4

// ErrMalformed is matched by every framing error the reader reports.
var ErrMalformed = errors.New("malformed pkt-line")

// Kind tells a data packet from the special zero-length packets.
type Kind int

const (
	Data        Kind = iota
	Flush            // "0000"
	Delim            // "0001" (protocol v2)
	ResponseEnd      // "0002" (protocol v2)
)

// Reader reads pkt-lines from an underlying reader.
type Reader struct {
	r   *bufio.Reader
	n   int64 // bytes consumed
	buf [MaxLen]byte
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, MaxLen)} }

// Consumed returns how many bytes the reader has consumed so far: after
// the commands' flush, it is the offset where the pack begins.
func (p *Reader) Consumed() int64 { return p.n }

// Next returns the next packet. The payload is valid until the next call.
// A clean end of input before a packet yields io.EOF; an end inside one,
// a bad length or an oversized packet yields an error matching
// ErrMalformed.
func (p *Reader) Next() (Kind, []byte, error) {
	var hdr [4]byte
	n, err := io.ReadFull(p.r, hdr[:])
	p.n += int64(n)
	if err == io.EOF {
		return 0, nil, io.EOF
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: truncated length prefix", ErrMalformed)
	}
	l, err := strconv.ParseUint(string(hdr[:]), 16, 16)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: bad length prefix %q", ErrMalformed, hdr[:])
	}
	switch {
	case l == 0:
		return Flush, nil, nil
	case l == 1:
		return Delim, nil, nil
	case l == 2:
		return ResponseEnd, nil, nil
	case l < 4 || l > MaxLen:
		return 0, nil, fmt.Errorf("%w: length %d out of range", ErrMalformed, l)
	}
	b := p.buf[:l-4]
	n, err = io.ReadFull(p.r, b)
	p.n += int64(n)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: packet of %d bytes truncated after %d", ErrMalformed, l, 4+n)
	}
	return Data, b, nil
}

// Write writes one data packet.
func Write(w io.Writer, payload []byte) error {
	if len(payload) > MaxData {
		return fmt.Errorf("pkt-line payload of %d bytes exceeds %d", len(payload), MaxData)
	}
	var hdr [4]byte
	copy(hdr[:], fmt.Sprintf("%04x", len(payload)+4))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// WriteString writes one data packet holding s.
func WriteString(w io.Writer, s string) error { return Write(w, []byte(s)) }

// WriteFlush writes a flush packet.
func WriteFlush(w io.Writer) error {
	_, err := io.WriteString(w, "0000")
	return err
}

// WriteDelim writes a delim packet, the section separator of protocol v2
// and of Git LFS's SSH transfer.
func WriteDelim(w io.Writer) error {
	_, err := io.WriteString(w, "0001")
	return err
}

// Side-band channels.
const (
	BandData     = 1
	BandProgress = 2
	BandError    = 3
)

// MaxSidebandData is the payload of one side-band-64k packet.
const MaxSidebandData = MaxData - 1

// WriteSideband writes b on band, split into as many side-band-64k
// packets as needed.
func WriteSideband(w io.Writer, band byte, b []byte) error {
	pkt := make([]byte, 0, min(len(b), MaxSidebandData)+1)
	for len(b) > 0 {
		n := min(len(b), MaxSidebandData)
		pkt = append(append(pkt[:0], band), b[:n]...)
		if err := Write(w, pkt); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
