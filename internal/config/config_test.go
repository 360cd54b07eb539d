package config

import (
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFlagsOverrideEnvOverrideDefaults(t *testing.T) {
	t.Setenv("GHOST_DATA_DIR", "/from/env")
	t.Setenv("GHOST_ETCD_ENDPOINTS", "http://127.0.0.1:1, http://127.0.0.1:2")
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/env" || len(c.EtcdEndpoints) != 2 || c.Cache() != "/from/env/cache" {
		t.Fatalf("env defaults not applied: %+v", c)
	}
	var c2 Config
	fs2 := flag.NewFlagSet("x", flag.ContinueOnError)
	c2.Register(fs2)
	if err := fs2.Parse([]string{"--data-dir", "/flag", "--cache-dir", "/c", "--etcd-endpoints", ""}); err != nil {
		t.Fatal(err)
	}
	if c2.DataDir != "/flag" || c2.Cache() != "/c" || len(c2.EtcdEndpoints) != 0 {
		t.Fatalf("flags did not win: %+v", c2)
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

func TestEmptyEnvMeansDefault(t *testing.T) {
	t.Setenv("GHOST_DATA_DIR", "")
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "ghost-data" {
		t.Fatalf("DataDir = %q, want the default", c.DataDir)
	}
}

func TestLimits(t *testing.T) {
	t.Setenv("GHOST_MAX_PUSH_BYTES", "1GiB")
	t.Setenv("GHOST_IO_TIMEOUT", "5s")
	var l Limits
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	l.Register(fs)
	if err := fs.Parse([]string{"--max-git-processes", "3", "--max-fetch-request-bytes", "16M"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
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
	d.Register(flag.NewFlagSet("x", flag.ContinueOnError))
	if d.MaxPushBytes != 2<<30 {
		t.Fatalf("default push limit %d", d.MaxPushBytes)
	}

	t.Setenv("GHOST_IO_TIMEOUT", "soon")
	var bad Limits
	bad.Register(flag.NewFlagSet("x", flag.ContinueOnError))
	if bad.Err() == nil {
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
