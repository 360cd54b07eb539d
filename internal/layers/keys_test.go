package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// keyRoots are the first segments of every object-store key ghost
// writes (docs/design.md §2.3).
var keyRoots = []string{"repos/", "meta/", "scans/", "gc/", "lfs/", "hooks/"}

// designKeys returns the key patterns of docs/design.md §2.3, the one
// list of the object store's key layout.
func designKeys(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "### 2.3 Key layout")
	if start < 0 {
		t.Fatal("docs/design.md has no §2.3 Key layout")
	}
	s = s[start:]
	if end := strings.Index(s[1:], "\n#"); end > 0 {
		s = s[:end+1]
	}
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "    ") {
			continue
		}
		if f := strings.Fields(line); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/design.md §2.3 lists no keys")
	}
	return out
}

// codeKeys returns the string literals of the module's non-test code
// that start with a key root, by file, leaving out the object stores'
// own packages, whose conformance suites use made-up keys.
func codeKeys(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == filepath.Join("..", "objstore") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, root := range keyRoots {
				if strings.HasPrefix(v, root) {
					out[v] = append(out[v], fset.Position(lit.Pos()).String())
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// prefixOf reports whether lit can begin a key of pattern, where each
// <placeholder> stands for any run of bytes without a slash.
func prefixOf(lit, pattern string) bool {
	switch {
	case lit == "":
		return true
	case pattern == "":
		return false
	case pattern[0] == '<':
		end := strings.IndexByte(pattern, '>')
		if end < 0 {
			return false
		}
		rest := pattern[end+1:]
		for k := 0; ; k++ {
			if prefixOf(lit[k:], rest) {
				return true
			}
			if k == len(lit) || lit[k] == '/' {
				return false
			}
		}
	case pattern[0] == lit[0]:
		return prefixOf(lit[1:], pattern[1:])
	}
	return false
}

var fmtVerb = regexp.MustCompile(`%[0-9]*[dsxqv]`)

// TestKeyLayout checks the code's object-store keys against the one list
// of docs/design.md §2.3: every key literal in the code begins a key the
// list names, and every key the list names is begun by some literal.
func TestKeyLayout(t *testing.T) {
	patterns := designKeys(t)
	lits := codeKeys(t)
	for lit, where := range lits {
		l := lit
		if i := fmtVerb.FindStringIndex(l); i != nil {
			l = l[:i[0]] // a format string: its literal head
		}
		ok := false
		for _, p := range patterns {
			ok = ok || prefixOf(l, p)
		}
		if !ok {
			t.Errorf("%s: key %q is not in docs/design.md §2.3", where[0], lit)
		}
	}
	for _, p := range patterns {
		head := p
		if i := strings.IndexByte(p, '<'); i >= 0 {
			head = p[:i]
		}
		found := false
		for lit := range lits {
			found = found || strings.HasPrefix(head, lit) || strings.HasPrefix(lit, head)
		}
		if !found {
			t.Errorf("docs/design.md §2.3 names %s, but no code writes a key that begins %q", p, head)
		}
	}
}

func TestPrefixOf(t *testing.T) {
	for _, tc := range []struct {
		lit, pattern string
		want         bool
	}{
		{"repos/", "repos/<repoID>/index", true},
		{"repos/x/index", "repos/<repoID>/index", true},
		{"repos/x/y/index", "repos/<repoID>/index", false},
		{"meta/web/session_key", "meta/web/session_key", true},
		{"meta/web/other", "meta/web/session_key", false},
		{"scans/r/layers/1-AB.idx", "scans/<repoID>/layers/<seq>-<ULID>.idx", true},
		{"gc/unreferenced/", "gc/tombstones/<repoID>", false},
	} {
		if got := prefixOf(tc.lit, tc.pattern); got != tc.want {
			t.Errorf("prefixOf(%q, %q) = %v, want %v", tc.lit, tc.pattern, got, tc.want)
		}
	}
}
