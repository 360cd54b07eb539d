package gitexec

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyGitexecStartsProcesses: every server-side git process runs
// through a Runner, with its environment (no replace refs, no system or
// global config) and the configured binary. So no package outside this
// one may start a process itself: no non-test file imports os/exec or
// calls os.StartProcess, syscall.Exec or syscall.ForkExec. The one
// exception is internal/gittest, the test helper that plays git's
// client, and no non-test file may import it.
func TestOnlyGitexecStartsProcesses(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"internal/gitexec": true, "internal/gittest": true}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		names := map[string]string{} // local name -> import path
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			switch {
			case p == "os/exec" && !allowed[pkg]:
				t.Errorf("%s imports os/exec: run git through gitexec.Runner", rel)
			case strings.HasSuffix(p, "/internal/gittest") && pkg != "internal/gittest":
				t.Errorf("%s imports the test helper gittest outside a test", rel)
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if im.Name != nil {
				name = im.Name.Name
			}
			names[name] = p
		}
		if allowed[pkg] {
			return nil
		}
		full, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(full, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			switch p := names[x.Name]; {
			case p == "os" && sel.Sel.Name == "StartProcess",
				p == "syscall" && (sel.Sel.Name == "Exec" || sel.Sel.Name == "ForkExec" || sel.Sel.Name == "StartProcess"):
				t.Errorf("%s: %s.%s starts a process: run git through gitexec.Runner", fset.Position(sel.Pos()), x.Name, sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("checked %d files under %s: the walk missed the module", files, root)
	}
}
