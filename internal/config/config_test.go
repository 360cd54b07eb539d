package config

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/spf13/pflag"
)

// flags returns a flag set with every shared setting registered on c.
func flags(c *Config) *pflag.FlagSet {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	c.RegisterStore(fs)
	c.RegisterCache(fs)
	c.RegisterEtcd(fs)
	return fs
}

func TestFlagsOverrideEnvOverrideDefaults(t *testing.T) {
	t.Setenv("GHOST_DATA_DIR", "/from/env")
	t.Setenv("GHOST_ETCD_ENDPOINTS", "http://127.0.0.1:1, http://127.0.0.1:2")
	t.Setenv("GHOST_S3_PATH_STYLE", "true")
	var c Config
	if err := flags(&c).Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/env" || len(c.EtcdEndpoints) != 2 || c.Cache() != "/from/env/cache" || !c.S3.PathStyle {
		t.Fatalf("env defaults not applied: %+v", c)
	}
	var c2 Config
	if err := flags(&c2).Parse([]string{"--data-dir", "/flag", "--cache-dir", "/c", "--etcd-endpoints", "", "--s3-path-style=false"}); err != nil {
		t.Fatal(err)
	}
	if c2.DataDir != "/flag" || c2.Cache() != "/c" || len(c2.EtcdEndpoints) != 0 || c2.S3.PathStyle {
		t.Fatalf("flags did not win: %+v", c2)
	}
}

func TestEmptyEnvMeansDefault(t *testing.T) {
	t.Setenv("GHOST_DATA_DIR", "")
	var c Config
	if err := flags(&c).Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "ghost-data" {
		t.Fatalf("DataDir = %q, want the default", c.DataDir)
	}
}

// TestRegisterGroups checks each group registers only its own flags, so a
// command lists only the flags it uses.
func TestRegisterGroups(t *testing.T) {
	for _, tc := range []struct {
		register func(*Config, *pflag.FlagSet)
		want     string
	}{
		{(*Config).RegisterDataDir, "data-dir"},
		{(*Config).RegisterStore, "data-dir s3-bucket s3-endpoint s3-path-style s3-prefix s3-region"},
		{(*Config).RegisterCache, "cache-dir"},
		{(*Config).RegisterEtcd, "etcd-endpoints"},
	} {
		var c Config
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		tc.register(&c, fs)
		var names []string
		fs.VisitAll(func(f *pflag.Flag) {
			names = append(names, f.Name)
			if env := EnvOf(f); !strings.HasPrefix(env, "GHOST_") || !strings.Contains(f.Usage, "(env "+env+")") {
				t.Errorf("--%s: env %q, usage %q", f.Name, env, f.Usage)
			}
		})
		if got := strings.Join(names, " "); got != tc.want {
			t.Errorf("registered %q, want %q", got, tc.want)
		}
	}
}

func TestEnvBinding(t *testing.T) {
	t.Setenv("GHOST_TEST_DURATION", "90s")
	t.Setenv("GHOST_TEST_INT", "many")
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var d time.Duration
	var n int64
	DurationVar(fs, &d, "d", "GHOST_TEST_DURATION", time.Hour, "a duration")
	Int64Var(fs, &n, "n", "GHOST_TEST_INT", 7, "a number")
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if d != 90*time.Second {
		t.Errorf("d = %v, want the environment's 90s", d)
	}
	if !strings.Contains(fs.FlagUsages(), `(default 1m30s)`) {
		t.Errorf("help does not show the environment's default:\n%s", fs.FlagUsages())
	}
	err := CheckEnv(fs)
	if err == nil || !strings.Contains(err.Error(), `GHOST_TEST_INT="many"`) {
		t.Fatalf("CheckEnv = %v, want an error naming GHOST_TEST_INT", err)
	}
	// A flag on the command line makes the bad variable irrelevant.
	if err := fs.Parse([]string{"--n", "3"}); err != nil {
		t.Fatal(err)
	}
	if err := CheckEnv(fs); err != nil || n != 3 {
		t.Fatalf("after --n 3: n = %d, CheckEnv = %v", n, err)
	}
}

func TestLocation(t *testing.T) {
	dir := t.TempDir()
	if got := (&Config{DataDir: dir}).Location(); got != dir {
		t.Errorf("filesystem location %q, want %q", got, dir)
	}
	rel := Config{DataDir: "ghost-data"}
	if got := rel.Location(); !filepath.IsAbs(got) || filepath.Base(got) != "ghost-data" {
		t.Errorf("relative data dir: location %q, want an absolute path", got)
	}
	s3 := Config{S3: S3{Bucket: "b", Prefix: "p/", Endpoint: "http://minio:9000"}}
	if got := s3.Location(); got != "s3://b/p at http://minio:9000" {
		t.Errorf("S3 location %q", got)
	}
}

// TestOpenStoreCreatesNothing: only CreateStore makes a store; OpenStore
// on a place that holds none says where it looked and leaves it as it was
// (issue 21 §2: a command run in the wrong directory made ./ghost-data).
func TestOpenStoreCreatesNothing(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	c := Config{DataDir: dir}
	_, err := c.OpenStore(ctx)
	var ns *NoStoreError
	if !errors.As(err, &ns) || !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("OpenStore on nothing: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenStore created %s: %v", dir, err)
	}
	s, created, err := c.CreateStore(ctx)
	if err != nil || !created {
		t.Fatalf("CreateStore: %v, created %v", err, created)
	}
	if _, err := s.Put(ctx, "k", strings.NewReader("v"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenStore(ctx); err != nil {
		t.Fatalf("OpenStore after CreateStore: %v", err)
	}
	if _, created, err := c.CreateStore(ctx); err != nil || created {
		t.Fatalf("second CreateStore: %v, created %v", err, created)
	}
	if _, err := (&Config{}).OpenStore(ctx); err == nil {
		t.Fatal("empty data dir accepted")
	}
	bad := Config{DataDir: filepath.Join(t.TempDir(), "x"), S3: S3{Bucket: "b", Prefix: "/abs"}}
	if _, err := bad.OpenStore(ctx); err == nil {
		t.Fatal("invalid S3 prefix accepted")
	}
}

// TestS3StoreExists: a bucket prefix holding no metadata is no store
// (forgotten or mistyped --s3-prefix); init's marker makes it one.
func TestS3StoreExists(t *testing.T) {
	ctx := context.Background()
	fake := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	defer fake.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	client := s3.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")},
		func(o *s3.Options) { o.BaseEndpoint = aws.String(fake.URL); o.UsePathStyle = true })
	if _, err := client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("ghost")}); err != nil {
		t.Fatal(err)
	}
	c := Config{S3: S3{Bucket: "ghost", Prefix: "prod", Endpoint: fake.URL, PathStyle: true, Region: "us-east-1"}}
	if _, err := c.OpenStore(ctx); !errors.Is(err, ErrNoStore) || !strings.Contains(err.Error(), "s3://ghost/prod") {
		t.Fatalf("OpenStore on an empty prefix: %v", err)
	}
	if _, created, err := c.CreateStore(ctx); err != nil || !created {
		t.Fatalf("CreateStore: %v %v", err, created)
	}
	if _, err := c.OpenStore(ctx); err != nil {
		t.Fatalf("OpenStore after init: %v", err)
	}
	other := c
	other.S3.Prefix = "staging"
	if _, err := other.OpenStore(ctx); !errors.Is(err, ErrNoStore) {
		t.Fatalf("another prefix: %v", err)
	}
}

func TestStoreChosen(t *testing.T) {
	t.Setenv("GHOST_DATA_DIR", "")
	t.Setenv("GHOST_S3_BUCKET", "")
	var c Config
	fs := flags(&c)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.StoreChosen() {
		t.Error("the default data dir counts as chosen")
	}
	if _, err := c.OpenStore(context.Background()); err == nil || !strings.Contains(err.Error(), "the default --data-dir") {
		t.Errorf("message for the default: %v", err)
	}
	var c2 Config
	if err := flags(&c2).Parse([]string{"--data-dir", "x"}); err != nil {
		t.Fatal(err)
	}
	if !c2.StoreChosen() {
		t.Error("--data-dir does not count as chosen")
	}
	t.Setenv("GHOST_S3_BUCKET", "b")
	var c3 Config
	if err := flags(&c3).Parse(nil); err != nil {
		t.Fatal(err)
	}
	if !c3.StoreChosen() {
		t.Error("GHOST_S3_BUCKET does not count as chosen")
	}
}

func TestDescribe(t *testing.T) {
	c := Config{DataDir: "/srv/ghost"}
	if got := c.Describe(); got != "filesystem store /srv/ghost" {
		t.Errorf("fs: %q", got)
	}
	if got := c.DescribeEtcd(); got != "embedded etcd in /srv/ghost/etcd" {
		t.Errorf("embedded etcd: %q", got)
	}
	s3c := Config{S3: S3{Bucket: "repos", Prefix: "p/", Endpoint: "https://minio:9000"}, EtcdEndpoints: []string{"http://e1:2379", "http://e2:2379"}}
	if got := s3c.Describe(); got != "S3 bucket repos, prefix p, at https://minio:9000" {
		t.Errorf("s3: %q", got)
	}
	if got := s3c.DescribeEtcd(); got != "etcd http://e1:2379,http://e2:2379" {
		t.Errorf("etcd: %q", got)
	}
}

func TestDurationsInGhostsWords(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "30s": 30 * time.Second, "1h30m": 90 * time.Minute, " 5m ": 5 * time.Minute} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", in, got, err)
		}
	}
	for in, want := range map[string]string{"5": `"5" has no unit: write a duration such as 5s, 5m or 5h`, "soon": `"soon" is not a duration`} {
		_, err := ParseDuration(in)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "time:") {
			t.Errorf("ParseDuration(%q): %v", in, err)
		}
	}
	var d time.Duration
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	DurationVar(fs, &d, "wait", "GHOST_TEST_WAIT", time.Minute, "how long")
	if err := fs.Parse([]string{"--wait", "5"}); err == nil || strings.Contains(err.Error(), "time:") || !strings.Contains(err.Error(), "has no unit") {
		t.Errorf("--wait 5: %v", err)
	}
	t.Setenv("GHOST_TEST_WAIT2", "7")
	fs2 := pflag.NewFlagSet("x", pflag.ContinueOnError)
	DurationVar(fs2, &d, "wait", "GHOST_TEST_WAIT2", time.Minute, "how long")
	if err := CheckEnv(fs2); err == nil || !strings.Contains(err.Error(), `GHOST_TEST_WAIT2="7"`) || !strings.Contains(err.Error(), "has no unit") {
		t.Errorf("GHOST_TEST_WAIT2=7: %v", err)
	}
}

func TestSizesPrintAsTheyAreTaken(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 512: "512", 64 << 20: "64MiB", 2 << 30: "2GiB", 1536 << 10: "1536KiB", 1<<40 + 1: "1099511627777"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
		if back, err := ParseBytes(FormatBytes(n)); err != nil || back != n {
			t.Errorf("ParseBytes(FormatBytes(%d)) = %d, %v", n, back, err)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 24017962: "22.9 MiB", 3 << 30: "3.0 GiB"} {
		if got := HumanBytes(n); got != want {
			t.Errorf("HumanBytes(%d) = %q, want %q", n, got, want)
		}
	}
	var l Limits
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	l.Register(fs)
	if got := fs.Lookup("max-fetch-request-bytes").DefValue; got != "64MiB" {
		t.Errorf("help default %q, want 64MiB", got)
	}
}

func TestLimits(t *testing.T) {
	t.Setenv("GHOST_MAX_PUSH_BYTES", "1GiB")
	t.Setenv("GHOST_IO_TIMEOUT", "5s")
	var l Limits
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	l.Register(fs)
	if err := fs.Parse([]string{"--max-git-processes", "3", "--max-fetch-request-bytes", "16M"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	if err := CheckEnv(fs); err != nil {
		t.Fatal(err)
	}
	if l.MaxPushBytes != 1<<30 || l.IOTimeout != 5*time.Second || l.MaxGitProcesses != 3 || l.MaxFetchRequestBytes != 16<<20 {
		t.Fatalf("limits %+v", l)
	}
	if l.GitQueueTimeout == 0 || l.StoreTempMaxAge == 0 || l.FetchRequestTimeout == 0 {
		t.Fatalf("defaults missing: %+v", l)
	}

	// The push limit is on by default.
	t.Setenv("GHOST_MAX_PUSH_BYTES", "")
	var d Limits
	d.Register(pflag.NewFlagSet("x", pflag.ContinueOnError))
	if d.MaxPushBytes != 2<<30 {
		t.Fatalf("default push limit %d", d.MaxPushBytes)
	}

	t.Setenv("GHOST_IO_TIMEOUT", "soon")
	var bad Limits
	badFlags := pflag.NewFlagSet("x", pflag.ContinueOnError)
	bad.Register(badFlags)
	if CheckEnv(badFlags) == nil {
		t.Fatal("a bad GHOST_IO_TIMEOUT was accepted")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "512": 512, "64K": 64 << 10, "16MiB": 16 << 20, "2G": 2 << 30, "2GiB": 2 << 30, "1 TB": 1 << 40} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1", "1.5G", "99999999999T"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
}

func TestNegativeLimitsRefused(t *testing.T) {
	var l Limits
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	l.Register(fs)
	if err := fs.Parse([]string{"--io-timeout", "-1s"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err == nil || !strings.Contains(err.Error(), "--io-timeout") {
		t.Fatalf("negative --io-timeout: %v", err)
	}
}

// TestSSHLimits: each SSH limit takes its flag and its GHOST_* variable,
// and defaults to sshd's.
func TestSSHLimits(t *testing.T) {
	var d Limits
	d.Register(pflag.NewFlagSet("x", pflag.ContinueOnError))
	if d.SSHMaxSessions != 10 || d.SSHExecTimeout != 10*time.Second || d.SSHHandshakeTimeout != 30*time.Second ||
		d.SSHMaxUnauthenticated != 100 || d.SSHMaxUnauthenticatedPerSource != 10 || d.SSHMaxConnsPerPrincipal != 10 {
		t.Fatalf("SSH defaults %+v", d)
	}
	for env, v := range map[string]string{
		"GHOST_SSH_MAX_SESSIONS": "4", "GHOST_SSH_EXEC_TIMEOUT": "3s", "GHOST_SSH_HANDSHAKE_TIMEOUT": "20s",
		"GHOST_SSH_MAX_UNAUTHENTICATED": "50", "GHOST_SSH_MAX_UNAUTHENTICATED_PER_SOURCE": "5",
	} {
		t.Setenv(env, v)
	}
	var l Limits
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	l.Register(fs)
	if err := fs.Parse([]string{"--ssh-max-connections-per-principal", "7", "--ssh-max-sessions", "0"}); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(l.Err(), CheckEnv(fs)); err != nil {
		t.Fatal(err)
	}
	if l.SSHMaxSessions != 0 || l.SSHExecTimeout != 3*time.Second || l.SSHHandshakeTimeout != 20*time.Second ||
		l.SSHMaxUnauthenticated != 50 || l.SSHMaxUnauthenticatedPerSource != 5 || l.SSHMaxConnsPerPrincipal != 7 {
		t.Fatalf("SSH limits %+v", l)
	}
	if err := fs.Parse([]string{"--ssh-max-sessions", "-1"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err == nil || !strings.Contains(err.Error(), "--ssh-max-sessions") {
		t.Fatalf("negative --ssh-max-sessions: %v", err)
	}
}

// TestLimitsFlagZeroIsOff: a limit flag's 0 means "no limit", which the
// git path's Limits spell negative (their 0 is the default), and a flag
// left alone gives the git path's default.
func TestLimitsFlagZeroIsOff(t *testing.T) {
	var l Limits
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	l.Register(fs)
	if err := fs.Parse([]string{"--max-push-bytes", "0", "--io-timeout", "0", "--git-queue", "0"}); err != nil {
		t.Fatal(err)
	}
	g := l.Git()
	if g.MaxPushBytes >= 0 || g.IOTimeout >= 0 || g.GitQueue >= 0 {
		t.Errorf("flags of 0: %+v, want those limits negative (off)", g)
	}
	def := gitsvc.DefaultLimits()
	if g.MaxFetchRequestBytes != def.MaxFetchRequestBytes || g.MaxGitProcesses != def.MaxGitProcesses || g.FetchRequestTimeout != def.FetchRequestTimeout {
		t.Errorf("flags left alone: %+v, want gitsvc's defaults %+v", g, def)
	}
	if g.PushTimeout != 0 {
		t.Errorf("PushTimeout %v has no flag and should stay zero (the default)", g.PushTimeout)
	}
}
