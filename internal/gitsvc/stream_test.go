package gitsvc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gitsvc/cacheadapter"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/repocache"
	"github.com/ghost-scm/ghost/internal/wal"
)

// helperEnv names the Unix socket the test binary, run as git's ssh
// command, connects the client's stdin and stdout to.
const helperEnv = "GHOST_GITSVC_TEST_SOCKET"

// TestMain doubles as a minimal ssh: git runs this binary as
// GIT_SSH_COMMAND with "host 'git-upload-pack '/repo”" (after options);
// it sends the command and GIT_PROTOCOL on one line, then relays the
// streams, half-closing the socket when git closes its side.
func TestMain(m *testing.M) {
	sock := os.Getenv(helperEnv)
	if sock == "" {
		os.Exit(m.Run())
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	fmt.Fprintf(conn, "%s\t%s\n", os.Args[len(os.Args)-1], os.Getenv("GIT_PROTOCOL"))
	go func() {
		io.Copy(conn, os.Stdin)
		conn.(*net.UnixConn).CloseWrite()
	}()
	io.Copy(os.Stdout, conn)
	os.Exit(0)
}

type streamEnv struct {
	t    *testing.T
	log  *wal.Log
	git  []string // environment of the client's git
	home string
	url  string // ssh://ghost prefix
}

// newStreamEnv serves the git service full-duplex (Request.Stream), as
// an SSH transport does, to git clients started with env.git.
func newStreamEnv(t *testing.T) *streamEnv { return newStreamEnvWith(t, nil) }

// newStreamEnvWith is newStreamEnv with the service's options changed by
// opt.
func newStreamEnvWith(t *testing.T, opt func(*gitsvc.Options)) *streamEnv {
	t.Helper()
	log := wal.New(memstore.New(), wal.Options{})
	cache, err := repocache.New(t.TempDir(), log, repocache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	opts := cacheadapter.Options(cache, log)
	if opt != nil {
		opt(&opts)
	}
	svc, err := gitsvc.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "gitsvc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				if err := serveStream(svc, conn); err != nil {
					t.Errorf("serve: %v", err)
				}
			}()
		}
	}()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	env := append(gittest.Env(home), helperEnv+"="+sock, "GIT_SSH_COMMAND="+self, "GIT_SSH_VARIANT=ssh")
	return &streamEnv{t: t, log: log, git: env, home: home, url: "ssh://ghost"}
}

// protocols records the GIT_PROTOCOL values the service was given.
var protocols sync.Map

// serveStream is what an SSH transport does with a session: parse the
// command and hand the streams to the service.
func serveStream(svc *gitsvc.Service, conn net.Conn) error {
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	command, proto, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "\t")
	verb, path, ok := strings.Cut(command, " ")
	if !ok {
		return fmt.Errorf("bad command %q", command)
	}
	repo := strings.TrimPrefix(strings.Trim(path, "'"), "/")
	protocols.Store(proto, true)
	req := gitsvc.Request{Repo: repo, Principal: "alice", Body: br, Out: conn, GitProtocol: proto, Stream: true}
	switch verb {
	case gitsvc.UploadPackService:
		err = svc.UploadPack(context.Background(), req)
	case gitsvc.ReceivePackService:
		err = svc.ReceivePack(context.Background(), req)
	default:
		return fmt.Errorf("unknown command %q", verb)
	}
	var e *gitsvc.Error
	if errors.As(err, &e) && e.Kind == gitsvc.Canceled {
		return nil
	}
	return err
}

func (e *streamEnv) gitIn(dir string, args ...string) string {
	e.t.Helper()
	return strings.TrimSpace(gittest.Git(e.t, e.git, dir, args...))
}

func (e *streamEnv) refs(repo string) map[string]string {
	e.t.Helper()
	x, err := e.log.Head(context.Background(), repo)
	if err != nil {
		e.t.Fatal(err)
	}
	m := map[string]string{}
	for _, r := range x.Refs {
		m[r.Name] = r.ID
	}
	return m
}

// TestStreamPushFetch drives the full-duplex flavour with stock git over
// its ssh transport: a push (ghost writes the advertisement, then reads
// the commands and the pack from the same stream), a clone in protocol
// v0 and v2, a push that only deletes (no pack follows the commands, and
// the client waits for the report without closing its side), and a push
// with nothing to do.
func TestStreamPushFetch(t *testing.T) {
	e := newStreamEnv(t)
	src := filepath.Join(t.TempDir(), "src")
	e.gitIn("", "init", "-q", "-b", "main", src)
	os.WriteFile(filepath.Join(src, "a"), []byte("one\n"), 0o644)
	e.gitIn(src, "add", "a")
	e.gitIn(src, "commit", "-qm", "one")
	e.gitIn(src, "branch", "topic")
	head := e.gitIn(src, "rev-parse", "HEAD")

	e.gitIn(src, "push", "-q", e.url+"/r1", "main", "topic")
	if got := e.refs("r1"); got["refs/heads/main"] != head || got["refs/heads/topic"] != head {
		t.Fatalf("refs after push: %v", got)
	}

	for _, v := range []string{"0", "2"} {
		dst := filepath.Join(t.TempDir(), "clone")
		e.gitIn("", "-c", "protocol.version="+v, "clone", "-q", e.url+"/r1", dst)
		if got := e.gitIn(dst, "rev-parse", "HEAD"); got != head {
			t.Fatalf("protocol v%s clone: HEAD %s, want %s", v, got, head)
		}
	}

	if _, ok := protocols.Load("version=2"); !ok {
		t.Error("no request asked for protocol v2")
	}

	e.gitIn(src, "push", "-q", e.url+"/r1", ":topic")
	if got := e.refs("r1"); got["refs/heads/topic"] != "" || got["refs/heads/main"] != head {
		t.Fatalf("refs after deleting topic: %v", got)
	}

	if _, err := gittest.Run(e.git, src, nil, "push", e.url+"/r1", "main"); err != nil {
		t.Fatalf("push with nothing to do: %v", err)
	}

	// A rejected update is reported in git's terms over the stream too.
	os.WriteFile(filepath.Join(src, "a"), []byte("two\n"), 0o644)
	e.gitIn(src, "commit", "-qam", "two")
	e.gitIn(src, "push", "-q", e.url+"/r1", "main")
	e.gitIn(src, "reset", "-q", "--hard", "HEAD~1")
	os.WriteFile(filepath.Join(src, "a"), []byte("three\n"), 0o644)
	e.gitIn(src, "commit", "-qam", "three")
	if _, err := gittest.Run(e.git, src, nil, "push", e.url+"/r1", "main"); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Fatalf("non-fast-forward push: err = %v, want a rejection", err)
	}
}

// TestStreamPushOptions: over the stream, the push options follow the
// commands' flush and precede the pack; a push that only deletes sends
// them and no pack, and must still be read to the options' flush.
func TestStreamPushOptions(t *testing.T) {
	e := newStreamEnv(t)
	src := filepath.Join(t.TempDir(), "src")
	e.gitIn("", "init", "-q", "-b", "main", src)
	os.WriteFile(filepath.Join(src, "a"), []byte("one\n"), 0o644)
	e.gitIn(src, "add", "a")
	e.gitIn(src, "commit", "-qm", "one")
	e.gitIn(src, "branch", "topic")
	head := e.gitIn(src, "rev-parse", "HEAD")
	e.gitIn(src, "push", "-q", "-o", "ci.skip", "-o", "x=y", e.url+"/r1", "main", "topic")
	if got := e.refs("r1"); got["refs/heads/main"] != head || got["refs/heads/topic"] != head {
		t.Fatalf("refs after a push with options: %v", got)
	}
	e.gitIn(src, "push", "-q", "-o", "ci.skip", e.url+"/r1", ":topic")
	if got := e.refs("r1"); got["refs/heads/topic"] != "" {
		t.Fatalf("refs after a delete with options: %v", got)
	}
}
