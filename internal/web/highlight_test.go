package web

import (
	"strings"
	"testing"
)

// TestHighlightNeverShowsErrors replays issue 21 §8: chroma takes go.mod
// for AMPL (it claims *.mod), which marks pseudo-versions as errors, drawn
// white on red. A file whose lexer cannot place all of it is shown plain;
// one it can is highlighted as before.
func TestHighlightNeverShowsErrors(t *testing.T) {
	r := newRenderer(markdownOptions{maxBytes: 1 << 20, budget: 1e9, renders: 1, cacheBytes: 1 << 20})
	mod := "module example.com/x\n\ngo 1.26\n\nrequire (\n\tgithub.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect\n)\n"
	if h := string(r.highlight("go.mod", []byte(mod))); strings.Contains(h, `class="err"`) || !strings.Contains(h, "colorstring") {
		t.Errorf("go.mod:\n%s", h)
	}
	// A file its lexer cannot place all of (here JSON with stray text,
	// which chroma marks as errors): plain, its text in one piece.
	if h := string(r.highlight("broken.json", []byte("{\"a\": 1,, }\n@@@\n"))); strings.Contains(h, `class="err"`) || !strings.Contains(h, `&#34;a&#34;: 1,, }`) || !strings.Contains(h, "@@@") {
		t.Errorf("broken.json:\n%s", h)
	}
	if h := string(r.highlight("main.go", []byte("package main\n\nfunc main() {}\n"))); !strings.Contains(h, `class="kd"`) {
		t.Errorf("a Go file is not highlighted:\n%s", h)
	}
	if h := string(r.highlight("NOTES", []byte("hello <b>\n"))); !strings.Contains(h, "hello &lt;b&gt;") {
		t.Errorf("a file no lexer claims:\n%s", h)
	}
}
