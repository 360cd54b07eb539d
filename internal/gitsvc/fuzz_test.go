package gitsvc

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
)

func fuzzOID(n int) string { return fmt.Sprintf("%040x", n) }

// encodeCommands writes a receive-pack request head that parseCommands
// reads back as req (the pack that may follow is not part of it).
func encodeCommands(req *pushRequest) ([]byte, error) {
	var b bytes.Buffer
	if req.shallow {
		if err := pktline.WriteString(&b, "shallow "+fuzzOID(7)+"\n"); err != nil {
			return nil, err
		}
	}
	caps := make([]string, 0, len(req.caps))
	for c := range req.caps {
		caps = append(caps, c)
	}
	sort.Strings(caps)
	for i, c := range req.cmds {
		// The newline goes before the capabilities: parseCommands strips
		// one after cutting them off, so a ref ending in "\n" survives.
		line := c.Old + " " + c.New + " " + c.Ref + "\n"
		if i == 0 && len(caps) > 0 {
			line += "\x00" + strings.Join(caps, " ")
		}
		if err := pktline.WriteString(&b, line); err != nil {
			return nil, err
		}
	}
	if err := pktline.WriteFlush(&b); err != nil {
		return nil, err
	}
	if req.caps["push-options"] {
		for _, o := range req.options {
			if err := pktline.WriteString(&b, o+"\n"); err != nil {
				return nil, err
			}
		}
		if err := pktline.WriteFlush(&b); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// FuzzParseCommands reads arbitrary request bodies as a push's command
// list. Anything refused is errMalformed (a 400, never a panic); anything
// accepted is well formed, ends at a flush packet inside the body, and
// survives re-encoding unchanged.
func FuzzParseCommands(f *testing.F) {
	for _, req := range []*pushRequest{
		{cmds: []command{{fuzzOID(0), fuzzOID(1), "refs/heads/main"}}, caps: map[string]bool{"report-status": true, "side-band-64k": true, "atomic": true}},
		{cmds: []command{{fuzzOID(1), fuzzOID(0), "refs/tags/v1"}, {fuzzOID(2), fuzzOID(3), "refs/heads/a"}}, caps: map[string]bool{"report-status": true}, shallow: true},
		{cmds: []command{{fuzzOID(0), fuzzOID(1), "refs/heads/main"}}, caps: map[string]bool{"report-status": true, "push-options": true}, options: []string{"secret-scanning.bypass=used_in_tests", "ci.skip"}},
	} {
		b, err := encodeCommands(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(append(bytes.Clone(b), "PACK\x00\x00\x00\x02\x00\x00\x00\x00"...))
	}
	for _, s := range []string{"", "0000", "0001", "0004", "00", "zzzz", "0010shallow xx\n0000"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := parseCommands(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, errMalformed) {
				t.Fatalf("error %v is not errMalformed", err)
			}
			if req != nil {
				t.Fatal("request returned with an error")
			}
			return
		}
		if len(req.cmds) == 0 {
			t.Fatal("no commands accepted")
		}
		for _, c := range req.cmds {
			if !isOID(c.Old) || !isOID(c.New) || c.Ref == "" || strings.Contains(c.Ref, " ") {
				t.Fatalf("bad command accepted: %+v", c)
			}
		}
		if req.packOffset < 4 || req.packOffset > int64(len(in)) || string(in[req.packOffset-4:req.packOffset]) != "0000" {
			t.Fatalf("pack offset %d of %d bytes is not after a flush packet", req.packOffset, len(in))
		}
		b, err := encodeCommands(req)
		if err != nil {
			return // rejoined capabilities can outgrow a full-size packet
		}
		again, err := parseCommands(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("re-encoded request refused: %v", err)
		}
		if !slices.Equal(again.cmds, req.cmds) || again.shallow != req.shallow || !slices.Equal(again.options, req.options) || fmt.Sprint(again.caps) != fmt.Sprint(req.caps) || again.packOffset != int64(len(b)) {
			t.Fatalf("re-encoded request reads differently:\n%+v\n%+v", req, again)
		}
	})
}
