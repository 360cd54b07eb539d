package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's promises about where serve listens, which readmeRunIt
// holds the binary to.
const (
	readmeHTTP = "127.0.0.1:8080"
	readmeSSH  = "127.0.0.1:2222"
)

// readmeRunIt returns the shell blocks of the README's "Run it" section:
// the command that starts the server, and the commands of a first push
// and clone, as the README gives them.
func readmeRunIt(readme string) (serve string, first []string, err error) {
	_, sec, ok := strings.Cut(readme, "\n## Run it\n")
	if !ok {
		return "", nil, fmt.Errorf(`no "## Run it" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	var blocks []string
	for rest := sec; ; {
		_, after, ok := strings.Cut(rest, "\n```sh\n")
		if !ok {
			break
		}
		body, tail, ok := strings.Cut(after, "\n```\n")
		if !ok {
			return "", nil, fmt.Errorf("an unclosed ```sh block")
		}
		blocks, rest = append(blocks, body), tail
	}
	if len(blocks) < 2 {
		return "", nil, fmt.Errorf(`"Run it" has %d sh blocks, want the server's and the first push's first`, len(blocks))
	}
	for _, want := range []string{"It listens on `" + readmeHTTP + "` (and `" + readmeSSH + "`"} {
		if !strings.Contains(sec, want) {
			return "", nil, fmt.Errorf("the README no longer says %q", want)
		}
	}
	return blocks[0], strings.Split(blocks[1], "\n"), nil
}

// TestReadmeRunIt runs the README's "Run it" commands from the README's
// own text, so that the README cannot drift from the binary: the server
// command in a fresh directory that holds a git repository (the reader's
// checkout), then the commands that make a user, a token and a public
// repository, push and clone. The only rewrites are the ones a test
// must make: "go run ./cmd/ghost" is the ghost binary already built, and
// the server listens on free loopback ports instead of 8080 and 2222
// (the defaults the README names are checked against serve -h instead),
// so that tests running at once do not collide.
func TestReadmeRunIt(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the git binary is not on PATH (exec.LookPath(\"git\") failed)")
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	serveCmd, first, err := readmeRunIt(string(b))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	const goRun = "go run ./cmd/ghost"
	if serveCmd != goRun+" serve" {
		t.Fatalf("README.md starts the server with %q; this test runs %q", serveCmd, goRun+" serve")
	}
	ghost, err := exec.LookPath("ghost") // this test binary, as TestMain installed it
	if err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	home := t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LC_ALL=C", "TMPDIR=" + t.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Reader", "GIT_AUTHOR_EMAIL=reader@ghost.invalid",
		"GIT_COMMITTER_NAME=Reader", "GIT_COMMITTER_EMAIL=reader@ghost.invalid"}
	run := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// The defaults the README names are serve's.
	help := run(work, ghost, "serve", "-h")
	for _, want := range []string{`(default "` + readmeHTTP + `")`, `(default "` + readmeSSH + `")`} {
		if !strings.Contains(help, want) {
			t.Errorf("ghost serve -h lacks %s, which the README promises", want)
		}
	}
	// The reader runs the commands in a checkout: a git repository.
	run(work, "git", "init", "-q")
	run(work, "git", "commit", "-q", "--allow-empty", "-m", "the reader's commit")
	head := strings.TrimSpace(run(work, "git", "rev-parse", "HEAD"))

	// In one terminal, the server.
	srv := exec.Command(ghost, strings.Fields(strings.TrimPrefix(serveCmd, goRun+" "))...)
	srv.Dir = work
	srv.Env = append(env, "GHOST_LISTEN=127.0.0.1:0", "GHOST_SSH_LISTEN=127.0.0.1:0")
	var logs strings.Builder
	srv.Stderr = &logs
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "listening on http://"); ok {
				addr <- strings.Fields(rest)[0]
				break
			}
		}
		io.Copy(io.Discard, stdout)
		exited <- srv.Wait()
	}()
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("ghost serve exited: %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			srv.Process.Kill()
			t.Errorf("ghost serve did not stop after SIGTERM")
		}
	})
	var listen string
	select {
	case listen = <-addr:
	case <-time.After(60 * time.Second):
		t.Fatalf("ghost serve did not say where it listens:\n%s", logs.String())
	}

	// In another terminal, from the same directory, the first push and
	// clone, line by line as the README has them.
	script := []string{"set -euo pipefail"}
	for _, line := range first {
		line = strings.ReplaceAll(line, goRun, "ghost")
		line = strings.ReplaceAll(line, readmeHTTP, listen)
		script = append(script, line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sh := exec.CommandContext(ctx, "bash", "-c", strings.Join(script, "\n"))
	sh.Dir = work
	sh.Env = append(env, "PATH="+filepath.Dir(ghost)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the README's commands failed: %v\n%s\n%s\nserver log:\n%s", err, strings.Join(script, "\n"), out, logs.String())
	}
	// The clone the README's last line made holds what was pushed.
	clone := filepath.Join(work, regexp.MustCompile(`[^/]+$`).FindString(strings.TrimSpace(first[len(first)-1])))
	if got := strings.TrimSpace(run(clone, "git", "rev-parse", "HEAD")); got != head {
		t.Errorf("the clone's HEAD is %s, want the pushed %s", got, head)
	}
	if got := strings.TrimSpace(run(clone, "git", "branch", "--show-current")); got != "main" {
		t.Errorf("the clone checked out %q, want main", got)
	}
}
