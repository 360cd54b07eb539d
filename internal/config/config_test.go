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

func TestEnvDuration(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want time.Duration
		ok   bool
	}{{"", time.Hour, true}, {"90s", 90 * time.Second, true}, {"soon", 0, false}, {"-1m", 0, false}} {
		t.Setenv("GHOST_TEST_DURATION", tc.env)
		d, err := EnvDuration("GHOST_TEST_DURATION", time.Hour)
		if (err == nil) != tc.ok || d != tc.want {
			t.Errorf("%q: %v, %v", tc.env, d, err)
		}
		if err != nil && !strings.Contains(err.Error(), "GHOST_TEST_DURATION") {
			t.Errorf("%q: error does not name the variable: %v", tc.env, err)
		}
	}
}
