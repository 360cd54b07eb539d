package clustertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/s3store"
	"github.com/ghost-scm/ghost/internal/wal"
)

// The gateway's root credentials and the bucket. They exist only on
// 127.0.0.1 for the length of a test.
const (
	accessKey = "clustertest"
	secretKey = "clustertest-secret"
	bucket    = "ghost"
	tenant    = "load"
)

// cluster is the running system under test and what the test needs to
// reach it.
type cluster struct {
	cfg config
	dir string
	bin string // the built ghost binary

	gateway  *proc
	gwURL    string
	etcd     []*proc
	etcdURLs []string
	nodes    []*proc
	nodeURLs []string // http://127.0.0.1:port

	token string
	repos []repoInfo

	store objstore.Store // the bucket, read directly by the checks
	log   *wal.Log
	http  *http.Client
}

type repoInfo struct {
	Name string // owner/name
	ID   string // the log id
}

// procs lists every process of the cluster.
func (c *cluster) procs() []*proc {
	ps := []*proc{c.gateway}
	ps = append(ps, c.etcd...)
	return append(ps, c.nodes...)
}

// startCluster builds ghost, starts the gateway, the etcd members and the
// nodes, and creates the tenant, its token and the repositories. Every
// process is shut down when the test ends.
func startCluster(t *testing.T, cfg config, dir string) *cluster {
	c := &cluster{cfg: cfg, dir: dir, http: &http.Client{Timeout: 30 * time.Second}}
	t.Cleanup(func() {
		for _, p := range c.procs() {
			if p != nil {
				p.shutdown(20 * time.Second)
			}
		}
	})
	for _, d := range []string{"bin", "logs", "gateway", "etcd", "nodes", "clients", "checks"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gw, err := lookBin("versitygw")
	if err != nil {
		t.Fatalf("the S3 gateway: %v (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)", err)
	}
	c.bin = filepath.Join(dir, "bin", "ghost")
	if out, err := exec.Command("go", "build", "-o", c.bin, "github.com/ghost-scm/ghost/cmd/ghost").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	c.startGateway(t, gw)
	c.startEtcd(t)
	c.openStore(t)
	c.setup(t)
	for i := range 3 {
		c.addNode(t, fmt.Sprintf("node%d", i))
	}
	return c
}

// startGateway runs versitygw's posix backend on a directory of its own:
// objects are files, so they survive a SIGKILL of the gateway.
func (c *cluster) startGateway(t *testing.T, bin string) {
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(c.dir, "gateway")
	c.gwURL = "http://" + addr
	c.gateway = &proc{
		name: "gateway", kind: "gateway",
		argv:    []string{bin, "--port", addr, "--quiet", "posix", root},
		env:     append(cleanEnv("VGW_", "ROOT_"), "ROOT_ACCESS_KEY_ID="+accessKey, "ROOT_SECRET_ACCESS_KEY="+secretKey),
		logPath: filepath.Join(c.dir, "logs", "gateway.log"),
		ready:   dialReady(addr),
	}
	if err := c.gateway.start(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	client := s3.NewFromConfig(awsConfig(), func(o *s3.Options) { o.BaseEndpoint = aws.String(c.gwURL); o.UsePathStyle = true })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
}

func awsConfig() aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")}
}

// startEtcd starts three etcd members, each this test binary re-executed
// as etcd's own server main (see TestMain), and waits for a quorum.
// fsync is off: a SIGKILL loses nothing the kernel already has, and the
// faults here kill processes, not machines.
func (c *cluster) startEtcd(t *testing.T) {
	const n = 3
	clientAddrs, peerAddrs := make([]string, n), make([]string, n)
	var initial []string
	for i := range n {
		var err error
		if clientAddrs[i], err = freeAddr(); err != nil {
			t.Fatal(err)
		}
		if peerAddrs[i], err = freeAddr(); err != nil {
			t.Fatal(err)
		}
		initial = append(initial, fmt.Sprintf("m%d=http://%s", i, peerAddrs[i]))
		c.etcdURLs = append(c.etcdURLs, "http://"+clientAddrs[i])
	}
	for i := range n {
		p := &proc{
			name: fmt.Sprintf("etcd%d", i), kind: "etcd",
			argv: []string{os.Args[0],
				"--name", fmt.Sprintf("m%d", i),
				"--data-dir", filepath.Join(c.dir, "etcd", fmt.Sprintf("m%d", i)),
				"--listen-client-urls", "http://" + clientAddrs[i],
				"--advertise-client-urls", "http://" + clientAddrs[i],
				"--listen-peer-urls", "http://" + peerAddrs[i],
				"--initial-advertise-peer-urls", "http://" + peerAddrs[i],
				"--initial-cluster", strings.Join(initial, ","),
				"--initial-cluster-state", "new",
				"--initial-cluster-token", "ghost-clustertest",
				"--log-level", "warn",
				"--unsafe-no-fsync",
			},
			env:     append(cleanEnv("ETCD_"), memberEnv+"=1"),
			logPath: filepath.Join(c.dir, "logs", fmt.Sprintf("etcd%d.log", i)),
			ready:   dialReady(clientAddrs[i]),
		}
		c.etcd = append(c.etcd, p)
		if err := p.start(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.etcdHealthy(60 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// etcdHealthy waits until the cluster commits a write.
func (c *cluster) etcdHealthy(timeout time.Duration) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcdURLs, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := cli.Put(ctx, "/clustertest/health", time.Now().String())
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd cluster not healthy after %v: %w", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// openStore opens the bucket for the checks, with ghost's own S3 backend.
func (c *cluster) openStore(t *testing.T) {
	cfg := awsConfig()
	s, err := s3store.New(context.Background(), s3store.Config{Bucket: bucket, Endpoint: c.gwURL, UsePathStyle: true, AWSConfig: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	c.store = s
	c.log = wal.New(s, wal.Options{})
}

// ghostEnv is the environment of every ghost process: the gateway's
// credentials through the standard AWS variables, no shared AWS config,
// and none of this machine's GHOST_* settings.
func (c *cluster) ghostEnv() []string {
	return append(cleanEnv("GHOST_", "AWS_"),
		"AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey, "AWS_REGION=us-east-1",
		"AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull, "AWS_EC2_METADATA_DISABLED=true")
}

// storeFlags points a ghost command at the bucket and the etcd cluster.
func (c *cluster) storeFlags() []string {
	return []string{"--s3-bucket", bucket, "--s3-endpoint", c.gwURL, "--s3-path-style"}
}

// ghost runs an admin command of the built binary and returns its stdout.
func (c *cluster) ghost(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = c.ghostEnv()
	cmd.Dir = filepath.Join(c.dir, "checks")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("ghost %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// setup creates the tenant, a write token and the repositories.
func (c *cluster) setup(t *testing.T) {
	ctx := context.Background()
	admin := func(args ...string) string {
		t.Helper()
		out, err := c.ghost(ctx, append(args, append(c.storeFlags(), "--data-dir", filepath.Join(c.dir, "checks", "admin"))...)...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	admin("init")
	admin("tenant", "create", tenant)
	c.token = strings.TrimSpace(strings.SplitN(admin("token", "create", tenant, "--scope", "write"), "\n", 2)[0])
	for i := range c.cfg.Repos {
		name := fmt.Sprintf("%s/r%d", tenant, i)
		admin("repo", "create", name)
		c.repos = append(c.repos, repoInfo{Name: name})
	}
}

// addNode starts a "ghost serve" on the bucket and the etcd cluster with a
// cache directory of its own.
func (c *cluster) addNode(t *testing.T, name string) *proc {
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{c.bin, "serve",
		"--listen", addr, "--ssh-listen", "",
		"--data-dir", filepath.Join(c.dir, "nodes", name),
		"--etcd-endpoints", strings.Join(c.etcdURLs, ","),
		"--compact-layers", fmt.Sprint(c.cfg.CompactLayers),
		"--log-format", "json", "--log-level", "info",
	}, c.storeFlags()...)
	url := "http://" + addr
	p := &proc{
		name: name, kind: "node", argv: argv, env: c.ghostEnv(),
		logPath: filepath.Join(c.dir, "logs", name+".log"),
		ready: func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", url+"/healthz", nil)
			resp, err := c.http.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("healthz: %s", resp.Status)
			}
			return nil
		},
	}
	if err := p.start(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	c.nodes = append(c.nodes, p)
	c.nodeURLs = append(c.nodeURLs, url)
	return p
}

// api GETs an API path from a node with the test's token and decodes the
// JSON answer into out.
func (c *cluster) api(ctx context.Context, node int, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", c.nodeURLs[node]+path, nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth("x", c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s from node%d: %s: %s", path, node, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, out)
}

// resolveRepoIDs reads each repository's log id through the API.
func (c *cluster) resolveRepoIDs(ctx context.Context) error {
	for i := range c.repos {
		var r struct {
			ID string `json:"id"`
		}
		if err := c.api(ctx, 0, "/api/repos/"+c.repos[i].Name, &r); err != nil {
			return err
		}
		if r.ID == "" {
			return errors.New("repository " + c.repos[i].Name + " has no id")
		}
		c.repos[i].ID = r.ID
	}
	return nil
}

// remote is the push and clone URL of a repository through a node.
func (c *cluster) remote(node int, repo string) string {
	return strings.Replace(c.nodeURLs[node], "http://", "http://x:"+c.token+"@", 1) + "/" + repo + ".git"
}

// cleanEnv is this process's environment without the variables whose
// names start with any of prefixes.
func cleanEnv(prefixes ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}
