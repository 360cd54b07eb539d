package config

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

func TestOpenStore(t *testing.T) {
	ctx := context.Background()
	c := Config{DataDir: t.TempDir()}
	s, err := c.OpenStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "k", strings.NewReader("v"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Config{}).OpenStore(ctx); err == nil {
		t.Fatal("empty data dir accepted")
	}
	bad := Config{DataDir: filepath.Join(t.TempDir(), "x"), S3: S3{Bucket: "b", Prefix: "/abs"}}
	if _, err := bad.OpenStore(ctx); err == nil {
		t.Fatal("invalid S3 prefix accepted")
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
