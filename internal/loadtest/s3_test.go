package loadtest

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// s3Env is the environment of a ghost process pointed at the bucket: static
// credentials through the standard AWS variables, and no shared config or
// instance metadata lookups.
func s3Env(endpoint, bucket, dataDir string) []string {
	return append(os.Environ(),
		"AWS_ACCESS_KEY_ID=AKIDTEST", "AWS_SECRET_ACCESS_KEY=secret", "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull, "AWS_EC2_METADATA_DISABLED=true",
		"GHOST_S3_BUCKET="+bucket, "GHOST_S3_ENDPOINT="+endpoint, "GHOST_S3_PATH_STYLE=true",
		"GHOST_DATA_DIR="+dataDir,
	)
}

// TestTwoNodesOnS3 runs two ghost processes that share nothing but an S3
// bucket (gofakes3, on loopback) and checks that a stock git client can
// push to one and clone and fetch from the other, in both directions: the
// bucket is the only truth and any node serves any repository.
func TestTwoNodesOnS3(t *testing.T) {
	fake := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(fake.Close)
	client := s3.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
	}, func(o *s3.Options) { o.BaseEndpoint = aws.String(fake.URL); o.UsePathStyle = true })
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("ghost")}); err != nil {
		t.Fatal(err)
	}

	bin := buildGhost(t)
	admin := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = s3Env(fake.URL, "ghost", t.TempDir())
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("ghost %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
		}
		return string(out)
	}
	admin("init")
	admin("tenant", "create", "s3")
	token := strings.TrimSpace(strings.SplitN(admin("token", "create", "s3", "--scope", "write"), "\n", 2)[0])
	admin("repo", "create", "s3/shared")

	start := func() string {
		t.Helper()
		// Each node has its own data dir: its own cache and etcd.
		srv := startGhost(t, bin, s3Env(fake.URL, "ghost", t.TempDir()))
		return "http://s3:" + token + "@" + srv.Addr + "/s3/shared.git"
	}
	urlA, urlB := start(), start()

	env := gittest.Env(t.TempDir())
	src := filepath.Join(t.TempDir(), "src")
	gittest.Generate(t, env, src, gittest.Shape{Commits: 30, BlobBytes: 4096, Files: 10})
	gittest.Git(t, env, src, "push", "-q", urlA, "main")

	clone := filepath.Join(t.TempDir(), "clone")
	gittest.Git(t, env, "", "clone", "-q", urlB, clone)
	if want, got := gittest.Git(t, env, src, "rev-parse", "main"), gittest.Git(t, env, clone, "rev-parse", "HEAD"); want != got {
		t.Fatalf("clone from B has %s, pushed %s to A", got, want)
	}
	gittest.Git(t, env, clone, "fsck", "--full")

	// Back the other way: push to B, fetch from A.
	os.WriteFile(filepath.Join(clone, "from-b.txt"), []byte("written through node B\n"), 0o644)
	gittest.Git(t, env, clone, "add", ".")
	gittest.Git(t, env, clone, "commit", "-q", "-m", "via B")
	gittest.Git(t, env, clone, "push", "-q", urlB, "HEAD:main")
	gittest.Git(t, env, src, "fetch", "-q", urlA, "main")
	if want, got := gittest.Git(t, env, clone, "rev-parse", "HEAD"), gittest.Git(t, env, src, "rev-parse", "FETCH_HEAD"); want != got {
		t.Fatalf("fetch from A has %s, pushed %s to B", got, want)
	}
	// A stale push through A is rejected exactly like git's own.
	gittest.Git(t, env, src, "commit", "-q", "--allow-empty", "-m", "diverged")
	if out, err := gittest.Run(env, src, nil, "push", urlA, "main"); err == nil || !strings.Contains(err.Error(), "[rejected]") {
		t.Fatalf("diverged push through A: err %v, out %s; want a rejection", err, out)
	}
}
