package gitsvc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
	"github.com/ghost-scm/ghost/internal/wal"
)

// packets splits a pkt-line stream into its packets, framed, and reports
// whether it was well formed to its end.
func packets(b []byte) ([]string, bool) {
	pr := pktline.NewReader(bytes.NewReader(b))
	var out []string
	for {
		kind, line, err := pr.Next()
		if err == io.EOF {
			return out, true
		}
		if err != nil {
			return out, false
		}
		var w bytes.Buffer
		writePacket(&w, kind, line)
		out = append(out, w.String())
	}
}

// FuzzWantFilter feeds arbitrary client streams through the want filter,
// in both protocol versions, with every wanted object a ref's tip (so no
// git runs). It never panics, and it passes every packet of a
// well-formed stream, each section whole before the next starts.
func FuzzWantFilter(f *testing.F) {
	want := func(n int) string { return pktLineString("want " + fuzzOID(n) + " side-band-64k\n") }
	f.Add([]byte(want(1)+want(2)+pktLineString("shallow "+fuzzOID(3)+"\n")+"0000"+pktLineString("done\n")), false)
	f.Add([]byte(pktLineString("command=ls-refs\n")+"0001"+pktLineString("peel\n")+"0000"+
		pktLineString("command=fetch\n")+"0001"+want(1)+pktLineString("have "+fuzzOID(4)+"\n")+pktLineString("done\n")+"0000"), true)
	f.Add([]byte("0000"), true)
	f.Add([]byte("00"), false)
	f.Fuzz(func(t *testing.T, in []byte, v2 bool) {
		pkts, ok := packets(in)
		co := &LocalCopy{}
		for _, p := range pkts {
			if len(p) > 4 {
				if id, isWant := wantOf([]byte(p[4:])); isWant && id != "" {
					co.Refs = append(co.Refs, wal.Ref{Name: "refs/heads/x", ID: id})
				}
			}
		}
		s := &Service{}
		var told bytes.Buffer
		out, err := io.ReadAll(newWantFilter(context.Background(), s, co, v2, bytes.NewReader(in), &told))
		if err != nil && !errors.Is(err, pktline.ErrMalformed) {
			// Only a command ghost does not offer is refused here.
			if _, isRefusal := errors.AsType[*refusal](err); !isRefusal {
				t.Fatalf("filter: %v", err)
			}
			return
		}
		if !ok || err != nil {
			return
		}
		got, _ := packets(out)
		// The filter passes everything of a well-formed stream, moving a
		// section's held packets to its end, never across its flush.
		sections := func(ps []string) [][]string {
			var ss [][]string
			var cur []string
			for _, p := range ps {
				cur = append(cur, p)
				if p == "0000" {
					slices.Sort(cur)
					ss, cur = append(ss, cur), nil
				}
			}
			return ss
		}
		// A stream's unterminated last section is held back whole.
		if a, b := sections(pkts), sections(got); !slices.EqualFunc(a, b, slices.Equal) {
			t.Fatalf("in:  %q\nout: %q", pkts, got)
		}
	})
}

func pktLineString(s string) string {
	var b bytes.Buffer
	pktline.WriteString(&b, s)
	return b.String()
}
