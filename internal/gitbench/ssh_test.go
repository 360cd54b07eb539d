package gitbench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/sshd"
)

// BenchmarkSSHVsHTTP pushes the same generated repository (about 103 MiB
// by default, see the package comment) into empty repositories of one
// ghost node, once over SSH with the stock OpenSSH client and once over
// smart HTTP, and clones it back both ways; it reports the times and the
// SSH/HTTP ratios:
//
//	go test -run='^$' -bench=SSHVsHTTP -benchtime=1x -timeout=60m ./internal/gitbench/
func BenchmarkSSHVsHTTP(b *testing.B) {
	if _, err := exec.LookPath("ssh"); err != nil {
		b.Skip("needs the OpenSSH client")
	}
	commits := envInt("GHOST_BENCH_COMMITS", 5000)
	blob := envInt("GHOST_BENCH_BLOB_BYTES", 21*1024)
	ctx := context.Background()
	work := b.TempDir()
	env := gittest.Env(filepath.Join(work, "home"))
	src := filepath.Join(work, "src")
	gittest.Generate(b, env, src, gittest.Shape{Commits: commits, BlobBytes: blob})

	store, err := fsstore.Open(filepath.Join(work, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(ctx, server.Options{Store: store, CacheDir: filepath.Join(work, "cache")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	m := srv.Meta()
	if _, err := m.CreateTenant(ctx, "bench", meta.KindUser); err != nil {
		b.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "bench", meta.ScopeWrite, "bench")
	if err != nil {
		b.Fatal(err)
	}
	httpBase := serve(b, srv.Handler())
	httpHost := strings.TrimPrefix(httpBase, "http://")

	port, _ := serveSSH(b, srv)
	env = append(env, sshClient(b, m, store, work))
	sshURL := func(repo string) string { return "ssh://git@127.0.0.1:" + port + "/bench/" + repo + ".git" }
	httpURL := func(repo string) string { return "http://bench:" + tok + "@" + httpHost + "/bench/" + repo + ".git" }

	// Every run's times, by operation; the medians are reported.
	res := map[string][]time.Duration{}
	for i := 0; i < b.N; i++ {
		viaSSH, viaHTTP := "ssh"+strconv.Itoa(i), "http"+strconv.Itoa(i)
		for _, r := range []string{viaSSH, viaHTTP} {
			if _, err := m.CreateRepo(ctx, "bench", r, false); err != nil {
				b.Fatal(err)
			}
		}
		// Alternate which transport goes first, so neither always meets
		// a warmer machine.
		pushes := []struct{ key, url string }{{"push-ssh", sshURL(viaSSH)}, {"push-http", httpURL(viaHTTP)}}
		if i%2 == 1 {
			pushes[0], pushes[1] = pushes[1], pushes[0]
		}
		for _, p := range pushes {
			res[p.key] = append(res[p.key], timed(func() { gittest.Git(b, env, src, "push", "-q", p.url, "main:refs/heads/main") }))
		}
		// Full clones of one repository, both ways, interleaved; the
		// node's cache is warm for both.
		clones := filepath.Join(work, "clones"+strconv.Itoa(i))
		for n := range 3 {
			for _, c := range []struct{ key, url string }{{"clone-ssh", sshURL(viaSSH)}, {"clone-http", httpURL(viaSSH)}} {
				dir := filepath.Join(clones, c.key+strconv.Itoa(n))
				res[c.key] = append(res[c.key], timed(func() { gittest.Git(b, env, "", "clone", "-q", "--bare", c.url, dir) }))
			}
		}
		os.RemoveAll(clones)
	}
	for _, op := range []string{"push", "clone"} {
		s, h := middle(res[op+"-ssh"]), middle(res[op+"-http"])
		b.ReportMetric(s.Seconds(), op+"-ssh-s")
		b.ReportMetric(h.Seconds(), op+"-http-s")
		b.ReportMetric(s.Seconds()/h.Seconds(), op+"-ssh/http")
	}
}

// middle returns the median of ds.
func middle(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// serveSSH serves srv's git over SSH on a loopback listener until stop
// is called or the benchmark ends, and returns its port.
func serveSSH(b *testing.B, srv *server.Server) (port string, stop func()) {
	ctx := context.Background()
	sshSrv, err := srv.SSHServer(ctx, false)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { sshSrv.Serve(sctx, ln); close(done) }()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	b.Cleanup(stop)
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, stop
}

// sshClient registers a new key to the tenant bench and returns the
// GIT_SSH_COMMAND setting of a stock OpenSSH client that signs in with
// it and trusts the installation's host key (read from store) on every
// port, so that it reaches each node of the installation.
func sshClient(b *testing.B, m *meta.Store, store objstore.Store, work string) string {
	ctx := context.Background()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "bench")
	if err != nil {
		b.Fatal(err)
	}
	keyFile := filepath.Join(work, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		b.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := m.AddSSHKey(ctx, "bench", "bench", ssh.MarshalAuthorizedKey(signer.PublicKey())); err != nil {
		b.Fatal(err)
	}
	hk, err := sshd.HostKey(ctx, store)
	if err != nil {
		b.Fatal(err)
	}
	knownHosts := filepath.Join(work, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte("ghost-bench "+string(ssh.MarshalAuthorizedKey(hk.PublicKey()))), 0o644); err != nil {
		b.Fatal(err)
	}
	return "GIT_SSH_COMMAND=ssh -F /dev/null -i " + keyFile + " -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes -o HostKeyAlias=ghost-bench -o UserKnownHostsFile=" + knownHosts
}
