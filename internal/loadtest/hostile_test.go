package loadtest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// gitDescendants counts the git processes below pid (upload-pack and the
// pack-objects it starts), from /proc.
func gitDescendants(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	parent := map[int]int{}
	name := map[int]string{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[p], name[p] = pp, s[open+1:end]
	}
	n := 0
	for p := range parent {
		if !strings.HasPrefix(name[p], "git") {
			continue
		}
		for a := parent[p]; a > 1; a = parent[a] {
			if a == pid {
				n++
				break
			}
		}
	}
	return n
}

func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// TestHostileClients replays the reproductions of issue 8 §4 against the
// built binary with small limits: a gzip bomb is cut off at the push
// limit and refused in report-status; clients trickling fetch requests
// hold no git process and are cut off; a client that sends a huge
// negotiation and disconnects leaves no git process behind.
func TestHostileClients(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc, which only Linux has")
	}
	bin := buildGhost(t)
	data := t.TempDir()
	ghostCmd(t, bin, data, "init")
	ghostCmd(t, bin, data, "tenant", "create", "eve")
	token := strings.TrimSpace(strings.SplitN(ghostCmd(t, bin, data, "token", "create", "eve", "--scope", "write"), "\n", 2)[0])
	ghostCmd(t, bin, data, "repo", "create", "eve/r", "--public")
	srv := startGhost(t, bin, append(os.Environ(), "GHOST_DATA_DIR="+data),
		"--max-push-bytes", "16M", "--fetch-request-timeout", "2s", "--io-timeout", "5s")
	base := "http://" + srv.Addr + "/eve/r"

	env := gittest.Env(t.TempDir())
	src := filepath.Join(t.TempDir(), "src")
	gittest.Generate(t, env, src, gittest.Shape{Commits: 20, BlobBytes: 64 << 10, Files: 20})
	gittest.Git(t, env, src, "push", "-q", "http://eve:"+token+"@"+srv.Addr+"/eve/r.git", "main")

	t.Run("gzip bomb", func(t *testing.T) {
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		io.WriteString(zw, pkt(strings.Repeat("0", 40)+" "+strings.Repeat("1", 40)+" refs/heads/bomb\x00report-status\n")+"0000PACK")
		zero := make([]byte, 1<<20)
		for range 512 { // 512 MiB decoded
			zw.Write(zero)
		}
		zw.Close()
		req, _ := http.NewRequest("POST", base+"/git-receive-pack", &z)
		req.Header.Set("Content-Type", "application/x-git-receive-pack-request")
		req.Header.Set("Content-Encoding", "gzip")
		req.SetBasicAuth("eve", token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("push exceeds the maximum allowed size of 16.0 MiB")) {
			t.Fatalf("bomb: %d %q", resp.StatusCode, body)
		}
		tmp, _ := os.ReadDir(filepath.Join(data, "cache", "tmp"))
		if len(tmp) != 0 {
			t.Fatalf("spool left behind: %v", tmp)
		}
	})

	t.Run("trickling fetch requests", func(t *testing.T) {
		var conns []net.Conn
		for range 40 {
			c, err := net.Dial("tcp", srv.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /eve/r/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: 100000\r\n\r\n0")
			conns = append(conns, c)
		}
		// One byte each, twice, well within the idle timeout.
		for range 2 {
			time.Sleep(500 * time.Millisecond)
			for _, c := range conns {
				c.Write([]byte("0"))
			}
		}
		if n := gitDescendants(t, srv.Pid); n != 0 {
			t.Fatalf("%d git processes run for clients that have not sent their request", n)
		}
		// The whole-request deadline cuts them all off.
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(60 * time.Second))
			b, err := io.ReadAll(c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("a trickling client was not cut off (read %q)", b)
			}
		}
	})

	t.Run("disconnect after a big negotiation", func(t *testing.T) {
		// A fetch with a few thousand haves, protocol v0, abandoned at once.
		head := gittest.Git(t, env, src, "rev-parse", "main")
		var b strings.Builder
		b.WriteString(pkt("want " + head + " multi_ack_detailed side-band-64k ofs-delta\n"))
		b.WriteString("0000")
		for i := range 50000 {
			b.WriteString(pkt(fmt.Sprintf("have %040x\n", i+1)))
		}
		b.WriteString(pkt("done\n"))
		c, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /eve/r/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: %d\r\n\r\n%s", b.Len(), b.String())
		c.Close()
		deadline := time.Now().Add(60 * time.Second)
		for gitDescendants(t, srv.Pid) != 0 {
			if time.Now().After(deadline) {
				t.Fatal("git processes outlived their client")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
