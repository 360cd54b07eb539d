// Package config holds the settings ghost's commands share (where the
// object store, the cache and etcd are) and binds every command-line flag
// to its GHOST_* environment variable, so "ghost serve" and the admin
// commands always agree on where the data is.
//
// A command registers only the groups it uses: RegisterStore for the
// object store, RegisterCache for the node cache, RegisterDataDir and
// RegisterEtcd for the coordination store. Its own flags go through
// StringVar, BoolVar, IntVar, Int64Var, DurationVar or Var, which give
// each flag its environment variable and name it in the help text.
package config

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

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

// RegisterDataDir binds --data-dir alone, for commands that need the data
// directory but not the object store (the embedded etcd lives under it).
func (c *Config) RegisterDataDir(fs *pflag.FlagSet) {
	StringVar(fs, &c.DataDir, "data-dir", "GHOST_DATA_DIR", "ghost-data", "data directory")
}

// RegisterStore binds the object store's settings: --data-dir and the
// --s3-* flags. Every command that opens the store registers it.
func (c *Config) RegisterStore(fs *pflag.FlagSet) {
	c.RegisterDataDir(fs)
	StringVar(fs, &c.S3.Bucket, "s3-bucket", "GHOST_S3_BUCKET", "", "S3 bucket; empty uses the filesystem store under --data-dir")
	StringVar(fs, &c.S3.Endpoint, "s3-endpoint", "GHOST_S3_ENDPOINT", "", "S3 endpoint URL for S3-compatible servers")
	StringVar(fs, &c.S3.Region, "s3-region", "GHOST_S3_REGION", "us-east-1", "S3 region")
	StringVar(fs, &c.S3.Prefix, "s3-prefix", "GHOST_S3_PREFIX", "", "key prefix inside the bucket")
	BoolVar(fs, &c.S3.PathStyle, "s3-path-style", "GHOST_S3_PATH_STYLE", false, "use path-style S3 addressing")
}

// RegisterCache binds --cache-dir, the node cache of "ghost serve".
func (c *Config) RegisterCache(fs *pflag.FlagSet) {
	StringVar(fs, &c.CacheDir, "cache-dir", "GHOST_CACHE_DIR", "", "repository cache directory, default <data-dir>/cache")
}

// RegisterEtcd binds --etcd-endpoints. With none, commands run etcd
// embedded under the data directory, so they register that too (through
// RegisterDataDir or RegisterStore).
func (c *Config) RegisterEtcd(fs *pflag.FlagSet) {
	Var(fs, (*listValue)(&c.EtcdEndpoints), "etcd-endpoints", "GHOST_ETCD_ENDPOINTS", "comma-separated etcd endpoints; empty runs etcd embedded under --data-dir")
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

// Cache returns the cache directory.
func (c *Config) Cache() string {
	if c.CacheDir != "" {
		return c.CacheDir
	}
	return filepath.Join(c.DataDir, "cache")
}

// Location names the object store the settings select, for messages that
// tell an operator which data a command acted on: s3://bucket/prefix (and
// the endpoint, when set), or the absolute path of the data directory.
func (c *Config) Location() string {
	if c.S3.Bucket != "" {
		s := "s3://" + c.S3.Bucket
		if p := strings.Trim(c.S3.Prefix, "/"); p != "" {
			s += "/" + p
		}
		if c.S3.Endpoint != "" {
			s += " at " + c.S3.Endpoint
		}
		return s
	}
	if abs, err := filepath.Abs(c.DataDir); err == nil {
		return abs
	}
	return c.DataDir
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
