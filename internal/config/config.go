// Package config holds the settings every ghost command shares (where the
// object store and the cache live) and binds them to flags and GHOST_*
// environment variables, so "ghost serve" and the admin commands always
// agree on where the data is.
package config

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/s3store"
)

// Config is the shared configuration. The zero-setup default keeps
// everything under ./ghost-data: a filesystem object store and the cache.
type Config struct {
	// DataDir is the root for the filesystem object store (when no bucket
	// is set), the cache (unless CacheDir is set) and embedded etcd.
	DataDir string
	// CacheDir holds materialized bare repositories; it may be wiped at
	// any time. Default: <DataDir>/cache.
	CacheDir string
	// S3 selects an S3-compatible bucket instead of the filesystem store.
	S3 S3
	// EtcdEndpoints points at an etcd cluster; empty means embedded etcd.
	EtcdEndpoints []string
}

// S3 configures an S3-compatible bucket. Credentials come from the usual
// AWS environment and config chain.
type S3 struct {
	Bucket    string
	Endpoint  string
	Region    string
	Prefix    string
	PathStyle bool
}

// Register binds the shared settings to fs. Each flag's default comes from
// its GHOST_* environment variable when set, so flags win over the
// environment, which wins over built-in defaults.
func (c *Config) Register(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", Env("GHOST_DATA_DIR", "ghost-data"), "data directory (env GHOST_DATA_DIR)")
	fs.StringVar(&c.CacheDir, "cache-dir", Env("GHOST_CACHE_DIR", ""), "repository cache directory, default <data-dir>/cache (env GHOST_CACHE_DIR)")
	fs.StringVar(&c.S3.Bucket, "s3-bucket", Env("GHOST_S3_BUCKET", ""), "S3 bucket; empty uses the filesystem store (env GHOST_S3_BUCKET)")
	fs.StringVar(&c.S3.Endpoint, "s3-endpoint", Env("GHOST_S3_ENDPOINT", ""), "S3 endpoint URL for S3-compatible servers (env GHOST_S3_ENDPOINT)")
	fs.StringVar(&c.S3.Region, "s3-region", Env("GHOST_S3_REGION", "us-east-1"), "S3 region (env GHOST_S3_REGION)")
	fs.StringVar(&c.S3.Prefix, "s3-prefix", Env("GHOST_S3_PREFIX", ""), "key prefix inside the bucket (env GHOST_S3_PREFIX)")
	fs.BoolVar(&c.S3.PathStyle, "s3-path-style", Env("GHOST_S3_PATH_STYLE", "") == "true", "use path-style S3 addressing (env GHOST_S3_PATH_STYLE=true)")
	fs.Func("etcd-endpoints", "comma-separated etcd endpoints; empty runs etcd embedded (env GHOST_ETCD_ENDPOINTS)", func(s string) error {
		c.EtcdEndpoints = splitList(s)
		return nil
	})
	c.EtcdEndpoints = splitList(os.Getenv("GHOST_ETCD_ENDPOINTS"))
}

// Env returns the variable's value, or def when it is unset or empty (an
// empty GHOST_DATA_DIR means "the default", not "no directory"). Every
// GHOST_* setting is read through it, so they all behave alike.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// EnvDuration is Env for a duration in time.ParseDuration syntax: def
// when the variable is unset or empty, an error naming the variable when
// it does not parse or is negative.
func EnvDuration(name string, def time.Duration) (time.Duration, error) {
	v := Env(name, "")
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is not a duration such as 10m or 168h", name, v)
	}
	return d, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Cache returns the cache directory.
func (c *Config) Cache() string {
	if c.CacheDir != "" {
		return c.CacheDir
	}
	return filepath.Join(c.DataDir, "cache")
}

// OpenStore opens the configured object store.
func (c *Config) OpenStore(ctx context.Context) (objstore.Store, error) {
	if c.S3.Bucket != "" {
		s, err := s3store.New(ctx, s3store.Config{
			Endpoint:     c.S3.Endpoint,
			Region:       c.S3.Region,
			Bucket:       c.S3.Bucket,
			Prefix:       c.S3.Prefix,
			UsePathStyle: c.S3.PathStyle,
		})
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		return s, nil
	}
	if c.DataDir == "" {
		return nil, errors.New("config: empty data directory")
	}
	s, err := fsstore.Open(filepath.Join(c.DataDir, "objects"))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return s, nil
}
