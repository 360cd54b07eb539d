package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/s3store"
	"github.com/ghost-scm/ghost/internal/server"
)

// TestLFSDirectEndToEnd pushes and clones a few-MiB LFS file with the
// stock git-lfs client through a node on gofakes3 with presigned URLs
// (docs/adr/0126-lfs-direct-to-s3.md): the bytes go between git-lfs and
// the S3 server, never through the node, and the object counts after
// verify.
func TestLFSDirectEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("git-lfs"); err != nil {
		t.Skip("git-lfs is not installed (apt-get install git-lfs; .ci/run installs it): the LFS end-to-end test needs the real client")
	}
	ctx := context.Background()
	var presignedPuts, presignedGets atomic.Int64
	fake := gofakes3.New(s3mem.New()).Server()
	s3srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("X-Amz-Signature") != "" {
			switch r.Method {
			case "PUT":
				presignedPuts.Add(1)
			case "GET":
				presignedGets.Add(1)
			}
		}
		fake.ServeHTTP(w, r)
	})) // 127.0.0.1
	t.Cleanup(s3srv.Close)
	awsCfg := &aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	c := s3.NewFromConfig(*awsCfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(s3srv.URL); o.UsePathStyle = true })
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("ghost")}); err != nil {
		t.Fatal(err)
	}
	store, err := s3store.New(ctx, s3store.Config{Endpoint: s3srv.URL, Bucket: "ghost", UsePathStyle: true, AWSConfig: awsCfg})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(ctx, server.Options{Store: store, CacheDir: filepath.Join(t.TempDir(), "cache"),
		Logger: slog.New(slog.DiscardHandler), LFSPresigner: store, LFSPresignExpiry: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m := s.Meta()
	if _, err := m.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "alice", meta.ScopeWrite, "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateRepo(ctx, "alice", "big", false); err != nil {
		t.Fatal(err)
	}
	var nodeObjectBytes atomic.Int64 // object transfers the node served itself
	node := s.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/info/lfs/objects/") && !strings.HasSuffix(r.URL.Path, "/batch") && !strings.HasSuffix(r.URL.Path, "/verify") {
			nodeObjectBytes.Add(1)
		}
		node.ServeHTTP(w, r)
	})) // 127.0.0.1
	t.Cleanup(ts.Close)

	home := t.TempDir()
	env := gittest.Env(home)
	gittest.Git(t, env, home, "lfs", "install", "--skip-repo")
	remote := strings.Replace(ts.URL, "http://", "http://alice:"+tok+"@", 1) + "/alice/big.git"
	src := filepath.Join(t.TempDir(), "src")
	gittest.Git(t, env, "", "init", "-q", "-b", "main", src)
	gittest.Git(t, env, src, "lfs", "track", "*.bin")
	data := make([]byte, 3<<20)
	rand.NewChaCha8([32]byte{26}).Read(data)
	if err := os.WriteFile(filepath.Join(src, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, env, src, "add", ".gitattributes", "big.bin")
	gittest.Git(t, env, src, "commit", "-q", "-m", "large file")
	gittest.Git(t, env, src, "push", "-q", remote, "main")
	if presignedPuts.Load() != 1 {
		t.Fatalf("%d presigned PUTs, want 1", presignedPuts.Load())
	}
	infos, err := store.List(ctx, "lfs/objects/alice/", "", 10)
	if err != nil || len(infos) != 1 || infos[0].Size != int64(len(data)) {
		t.Fatalf("stored objects %+v, %v", infos, err)
	}
	if tmp, err := store.List(ctx, "lfs/tmp/", "", 10); err != nil || len(tmp) != 0 {
		t.Fatalf("temporaries left: %+v %v", tmp, err)
	}

	dst := filepath.Join(t.TempDir(), "dst")
	gittest.Git(t, env, "", "clone", "-q", remote, dst)
	got, err := os.ReadFile(filepath.Join(dst, "big.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("cloned %d bytes differ from the %d pushed (%v)", len(got), len(data), err)
	}
	if presignedGets.Load() != 1 || nodeObjectBytes.Load() != 0 {
		t.Fatalf("%d presigned GETs (want 1), %d object transfers through the node (want 0)", presignedGets.Load(), nodeObjectBytes.Load())
	}
}
