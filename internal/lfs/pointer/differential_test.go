package pointer

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The differential test: ghost's parser and the stock git-lfs binary
// must agree on every candidate pointer file. git-lfs decides what a
// clone checks out, so a pointer it reads and ghost does not is a file
// whose object push protection never opens (issue 44). Candidates are
// mutations of valid pointers (white space, line ends, order, extra
// keys, sizes, oids, lengths around PrefixSize); the fuzz target below
// explores further, and what it ever found is kept in
// testdata/fuzz/FuzzAgainstGitLFS, which plain "go test" runs.

// differentialCases is how many generated candidates CI checks.
const differentialCases = 400

// gitLFS returns a checker that asks git lfs pointer --check whether a
// file is a pointer, or skips the test when git-lfs is not installed
// (.ci/run installs it).
func gitLFS(t testing.TB) func(b []byte) bool {
	if _, err := exec.LookPath("git-lfs"); err != nil {
		t.Skip("git-lfs is not installed (apt-get install git-lfs; .ci/run installs it): the differential test needs the real client")
	}
	dir := t.TempDir()
	var mu sync.Mutex
	n := 0
	return func(b []byte) bool {
		mu.Lock()
		n++
		path := filepath.Join(dir, fmt.Sprintf("candidate-%d", n))
		mu.Unlock()
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		cmd := exec.Command("git", "lfs", "pointer", "--check", "--file", path)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return true
		case errors.As(err, &exit) && exit.ExitCode() == 1:
			return false
		}
		t.Fatalf("git lfs pointer --check: %v\n%s", err, out)
		return false
	}
}

func TestAgainstGitLFS(t *testing.T) {
	isPointer := gitLFS(t)
	var cands []string
	for _, s := range accepted {
		cands = append(cands, s)
	}
	for _, s := range refused {
		cands = append(cands, s)
	}
	rng := rand.New(rand.NewPCG(44, 1024))
	for range differentialCases {
		cands = append(cands, mutate(rng))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		bad  []string
		yes  int
		work = make(chan string)
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				_, err := Decode([]byte(s))
				want := isPointer([]byte(s))
				mu.Lock()
				if want != (err == nil) {
					bad = append(bad, fmt.Sprintf("git-lfs says pointer=%v, ghost says %v, for %q", want, err, s))
				}
				if want {
					yes++
				}
				mu.Unlock()
			}
		}()
	}
	for _, s := range cands {
		work <- s
	}
	close(work)
	wg.Wait()
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("%d candidates, %d pointers to git-lfs, %d disagreements", len(cands), yes, len(bad))
	if yes == 0 || yes == len(cands) {
		t.Fatalf("the corpus is one-sided: %d of %d are pointers", yes, len(cands))
	}
}

// FuzzAgainstGitLFS runs each input through git-lfs and Decode
// (go test -fuzz FuzzAgainstGitLFS ./internal/lfs/pointer; slow, one
// process an input). Inputs are capped at a few times PrefixSize: git-lfs
// reads no further than PrefixSize.
func FuzzAgainstGitLFS(f *testing.F) {
	isPointer := gitLFS(f)
	for _, s := range accepted {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4*PrefixSize {
			return
		}
		_, err := Decode([]byte(s))
		if want := isPointer([]byte(s)); want != (err == nil) {
			t.Fatalf("git-lfs says pointer=%v, ghost says %v, for %q", want, err, s)
		}
	})
}

// mutate returns a valid pointer with up to two mutations applied.
func mutate(rng *rand.Rand) string {
	oid := testOID
	if rng.IntN(3) == 0 {
		b := []byte(oid)
		for i := range b {
			b[i] = "0123456789abcdef"[rng.IntN(16)]
		}
		oid = string(b)
	}
	lines := []string{"version " + pick(rng, versionsSeen), "oid sha256:" + oid, "size " + pick(rng, sizesSeen)}
	if rng.IntN(4) == 0 {
		ext := fmt.Sprintf("ext-%d-%s sha256:%s", rng.IntN(10), pick(rng, []string{"foo", "a", "_", "x-y", "!"}), oid)
		at := rng.IntN(len(lines) + 1)
		lines = append(lines[:at], append([]string{ext}, lines[at:]...)...)
	}
	s := strings.Join(lines, "\n") + "\n"
	for range rng.IntN(3) {
		s = mutation(rng, s)
	}
	return s
}

var versionsSeen = []string{
	"https://git-lfs.github.com/spec/v1", "https://git-lfs.github.com/spec/v1",
	"https://hawser.github.com/spec/v1", "http://git-media.io/v/2",
	"https://git-lfs.github.com/spec/v2", "https://git-lfs.github.com/spec/v1 ",
	"HTTPS://git-lfs.github.com/spec/v1", "",
}

var sizesSeen = []string{"12345", "0", "1", "+7", "-0", "-1", "007", "9223372036854775807",
	"9223372036854775808", "1e3", "0x10", " 5", "5 ", "１"}

var spaces = []string{" ", "\t", "\r", "\n", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\u2028", "\u3000", "\x00"}

func pick(rng *rand.Rand, from []string) string { return from[rng.IntN(len(from))] }

func mutation(rng *rand.Rand, s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	switch rng.IntN(14) {
	case 0: // white space at the start or end
		if rng.IntN(2) == 0 {
			return pick(rng, spaces) + s
		}
		return s + pick(rng, spaces)
	case 1: // white space anywhere
		i := rng.IntN(len(s) + 1)
		return s[:i] + pick(rng, spaces) + s[i:]
	case 2: // CRLF
		return strings.ReplaceAll(s, "\n", "\r\n")
	case 3: // no final newline
		return strings.TrimRight(s, "\n")
	case 4: // two lines swapped
		i, j := rng.IntN(len(lines)), rng.IntN(len(lines))
		lines[i], lines[j] = lines[j], lines[i]
	case 5: // a line repeated
		i := rng.IntN(len(lines))
		lines = append(lines[:i+1], lines[i:]...)
	case 6: // a line dropped
		i := rng.IntN(len(lines))
		lines = append(lines[:i], lines[i+1:]...)
	case 7: // an extra key
		i := rng.IntN(len(lines) + 1)
		extra := pick(rng, []string{"foo bar", "ext-0-x sha256:" + testOID, "ext-1-y sha256:nothex", "x", "size 1", "oid sha256:" + testOID, "ext-12-z sha256:" + testOID, "ext-0- sha256:" + testOID})
		lines = append(lines[:i], append([]string{extra}, lines[i:]...)...)
	case 8: // a byte of the oid changed
		if i := strings.Index(s, "sha256:"); i >= 0 && len(s) > i+8 {
			j := i + 7 + rng.IntN(min(64, len(s)-i-7))
			return s[:j] + pick(rng, []string{"A", "g", "0", "", "00", ":"}) + s[j+1:]
		}
	case 9: // padded to around PrefixSize
		n := PrefixSize + rng.IntN(9) - 4 - len(s)
		if n < 0 {
			return s
		}
		pad := strings.Repeat(pick(rng, []string{" ", "\n", "x"}), n)
		if rng.IntN(2) == 0 {
			return pad + s
		}
		return s + pad + pick(rng, []string{"", "tail", "\nversion x"})
	case 10: // the separator changed
		return strings.Replace(s, " ", pick(rng, []string{"  ", "\t", ":", ""}), 1+rng.IntN(2))
	case 11: // a marker word elsewhere
		return strings.Replace(s, pick(rng, []string{"git-lfs", "hawser", "git-media"}), "lfs", 1)
	case 12: // a key's case
		return strings.Replace(s, pick(rng, []string{"oid", "size", "version"}), pick(rng, []string{"OID", "Size", "VERSION"}), 1)
	case 13: // a truncation
		return s[:rng.IntN(len(s)+1)]
	}
	return strings.Join(lines, "\n") + "\n"
}
