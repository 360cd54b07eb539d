package pktline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// FuzzReader feeds arbitrary bytes to the reader. Every packet it returns
// must be exactly what the input framed at that offset, a clean end may
// only come at a packet boundary, and every other failure is ErrMalformed.
func FuzzReader(f *testing.F) {
	var b bytes.Buffer
	WriteString(&b, "hello\n")
	b.WriteString("0001")
	WriteString(&b, "")
	b.WriteString("0002")
	WriteFlush(&b)
	f.Add(b.Bytes())
	b.Reset()
	WriteSideband(&b, BandProgress, []byte("progress\n"))
	Write(&b, bytes.Repeat([]byte{'x'}, 300))
	f.Add(b.Bytes())
	for _, s := range []string{"", "0000", "00", "zzzz", "0003", "fff0", "fff1", "FFFF", "000A0123", "0010abc", "0004"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		for {
			off := r.Consumed()
			k, p, err := r.Next()
			if err == io.EOF {
				if off != int64(len(in)) || r.Consumed() != off {
					t.Fatalf("EOF at %d of %d bytes (consumed %d)", off, len(in), r.Consumed())
				}
				return
			}
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("error %v is not ErrMalformed", err)
				}
				if r.Consumed() > int64(len(in)) {
					t.Fatalf("consumed %d of %d bytes", r.Consumed(), len(in))
				}
				return
			}
			var want int
			switch k {
			case Flush:
				want = 0
			case Delim:
				want = 1
			case ResponseEnd:
				want = 2
			case Data:
				if p == nil || len(p) > MaxData {
					t.Fatalf("data packet of %d bytes (nil %v)", len(p), p == nil)
				}
				want = len(p) + 4
			default:
				t.Fatalf("unknown kind %d", k)
			}
			if k != Data && p != nil {
				t.Fatalf("special packet %d with payload %q", k, p)
			}
			end := off + 4 + int64(len(p))
			if r.Consumed() != end || end > int64(len(in)) {
				t.Fatalf("packet at %d: consumed %d, want %d (input %d)", off, r.Consumed(), end, len(in))
			}
			if hdr := string(in[off : off+4]); !strings.EqualFold(hdr, fmt.Sprintf("%04x", want)) {
				t.Fatalf("packet at %d: header %q read as length %d", off, hdr, want)
			}
			if !bytes.Equal(p, in[off+4:end]) {
				t.Fatalf("packet at %d: payload differs from the input", off)
			}
		}
	})
}
