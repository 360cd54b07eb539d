package gitsvc

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc/pktline"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestParsePushOptions: the options section is read only when the client
// asked for push-options, ends at its flush, and is bounded.
func TestParsePushOptions(t *testing.T) {
	head := func(caps string, opts ...string) *bytes.Buffer {
		var b bytes.Buffer
		pktline.WriteString(&b, fuzzOID(0)+" "+fuzzOID(1)+" refs/heads/main\x00"+caps+"\n")
		pktline.WriteFlush(&b)
		for _, o := range opts {
			pktline.WriteString(&b, o+"\n")
		}
		return &b
	}
	// With the capability: options up to the flush, the pack after.
	b := head("report-status push-options", "secret-scanning.bypass=used_in_tests", "ci.skip")
	pktline.WriteFlush(b)
	n := b.Len()
	b.WriteString("PACK")
	req, err := parseCommands(bytes.NewReader(b.Bytes()))
	if err != nil || !slices.Equal(req.options, []string{"secret-scanning.bypass=used_in_tests", "ci.skip"}) || req.packOffset != int64(n) {
		t.Fatalf("parse = %+v, %v", req, err)
	}
	// Without it, what follows the commands is the pack.
	b = head("report-status")
	n = b.Len()
	b.WriteString("PACK")
	if req, err := parseCommands(bytes.NewReader(b.Bytes())); err != nil || req.options != nil || req.packOffset != int64(n) {
		t.Fatalf("parse without push-options = %+v, %v", req, err)
	}
	// No flush after the options; too many options.
	delim := head("push-options", "a")
	delim.WriteString("0001")
	for name, b := range map[string]*bytes.Buffer{
		"unterminated": head("push-options", "a"),
		"too many":     head("push-options", slices.Repeat([]string{"x"}, maxPushOptions+1)...),
		"delimiter":    delim,
	} {
		if name != "unterminated" {
			pktline.WriteFlush(b)
		}
		_, err := parseCommands(bytes.NewReader(b.Bytes()))
		if !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v, want errMalformed", name, err)
		}
	}
	b = head("push-options", slices.Repeat([]string{"x"}, maxPushOptions)...)
	pktline.WriteFlush(b)
	if req, err := parseCommands(bytes.NewReader(b.Bytes())); err != nil || len(req.options) != maxPushOptions {
		t.Fatalf("%d options: %v", maxPushOptions, err)
	}
	if !strings.Contains(receiveCaps, " push-options ") {
		t.Errorf("push-options not advertised: %s", receiveCaps)
	}
}

// TestStreamSpoolsOptionsWithinLimit: over a stream the options are read
// after the commands, and count against MaxPushBytes like the rest.
func TestStreamSpoolsOptionsWithinLimit(t *testing.T) {
	var cmds bytes.Buffer
	pktline.WriteString(&cmds, fuzzOID(1)+" "+wal.ZeroID+" refs/heads/gone\x00report-status push-options\n")
	pktline.WriteFlush(&cmds)
	var opts bytes.Buffer
	pktline.WriteString(&opts, strings.Repeat("o", 100)+"\n")
	pktline.WriteFlush(&opts)
	body := append(cmds.Bytes(), opts.Bytes()...)
	for _, tt := range []struct {
		limit int64
		err   error
	}{
		{int64(len(body)), nil},
		{int64(len(body)) - 1, errPushTooLarge},
		{int64(cmds.Len()), errPushTooLarge}, // nothing left for the options
		{-1, nil},
	} {
		s := &Service{opts: Options{TempDir: func() (string, error) { return t.TempDir(), nil }, Limits: Limits{MaxPushBytes: tt.limit}}}
		f, n, err := s.spool(bytes.NewReader(body), true)
		if f != nil {
			f.Close()
		}
		if !errors.Is(err, tt.err) && err != tt.err {
			t.Errorf("limit %d: err %v, want %v", tt.limit, err, tt.err)
		}
		if tt.err == nil && n != int64(len(body)) {
			t.Errorf("limit %d: spooled %d of %d bytes", tt.limit, n, len(body))
		}
	}
}

// TestLimitsZeroIsDefault: in Limits, zero means the default and a
// negative value switches a limit off; nothing else reads zero as "off".
func TestLimitsZeroIsDefault(t *testing.T) {
	d := DefaultLimits()
	if d.MaxPushBytes != DefaultMaxPushBytes || d.MaxFetchRequestBytes != DefaultMaxFetchRequestBytes ||
		d.MaxGitProcesses != DefaultMaxGitProcesses() || d.GitQueue != 4*DefaultMaxGitProcesses() ||
		d.GitQueueTimeout != DefaultGitQueueTimeout || d.PushTimeout != DefaultPushTimeout ||
		d.FetchRequestTimeout != DefaultFetchRequestTimeout || d.IOTimeout != DefaultIOTimeout {
		t.Fatalf("DefaultLimits() = %+v", d)
	}
	off := Limits{MaxPushBytes: -1, MaxFetchRequestBytes: -1, MaxGitProcesses: -1, GitQueue: -1,
		GitQueueTimeout: -1, PushTimeout: -1, FetchRequestTimeout: -1, IOTimeout: -1}
	if got := off.WithDefaults(); got != off {
		t.Fatalf("negative limits changed to %+v", got)
	}
	if got := (Limits{MaxGitProcesses: 3}).WithDefaults(); got.GitQueue != 12 {
		t.Errorf("the queue follows the slots: %d, want 12", got.GitQueue)
	}
}
