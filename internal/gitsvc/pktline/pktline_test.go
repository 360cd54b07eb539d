package pktline

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	var b bytes.Buffer
	WriteString(&b, "hello\n")
	WriteFlush(&b)
	Write(&b, bytes.Repeat([]byte{'x'}, MaxData))
	if !strings.HasPrefix(b.String(), "000ahello\n0000fff0") {
		t.Fatalf("%q", b.String()[:20])
	}
	r := NewReader(&b)
	k, p, err := r.Next()
	if k != Data || string(p) != "hello\n" || err != nil {
		t.Fatal(k, p, err)
	}
	if k, _, err := r.Next(); k != Flush || err != nil || r.Consumed() != 14 {
		t.Fatal(k, err, r.Consumed())
	}
	if _, p, err := r.Next(); len(p) != MaxData || err != nil {
		t.Fatal(len(p), err)
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatal(err)
	}
	if err := Write(&b, make([]byte, MaxData+1)); err == nil {
		t.Fatal("oversized packet written")
	}
}

func TestMalformed(t *testing.T) {
	for _, in := range []string{"00", "zzzz", "0003", "fff1", "0010abc", "000ahello"} {
		r := NewReader(strings.NewReader(in))
		if _, _, err := r.Next(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: err = %v", in, err)
		}
	}
}

func TestSideband(t *testing.T) {
	var b bytes.Buffer
	payload := bytes.Repeat([]byte{'y'}, MaxSidebandData+10)
	if err := WriteSideband(&b, BandData, payload); err != nil {
		t.Fatal(err)
	}
	r := NewReader(&b)
	var got []byte
	for {
		k, p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil || k != Data || p[0] != BandData {
			t.Fatal(k, err)
		}
		got = append(got, p[1:]...)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("sideband payload differs")
	}
}
