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
	"time"

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

	// flags is the flag set the store's settings were registered on, so
	// that messages can tell a default from a choice.
	flags *pflag.FlagSet
}

// S3 configures an S3-compatible bucket. Credentials come from the usual
// AWS environment and config chain.
type S3 struct {
	Bucket    string
	Endpoint  string
	Region    string
	Prefix    string
	PathStyle bool
	// PresignEndpoint is the endpoint presigned URLs name, the one
	// clients reach (serve's --lfs-direct-endpoint); empty: Endpoint.
	PresignEndpoint string
}

// RegisterDataDir binds --data-dir alone, for commands that need the data
// directory but not the object store (the embedded etcd lives under it).
func (c *Config) RegisterDataDir(fs *pflag.FlagSet) {
	StringVar(fs, &c.DataDir, "data-dir", "GHOST_DATA_DIR", DefaultDataDir, "data directory")
	c.flags = fs
}

// DefaultDataDir is the data directory when none is given: relative to
// the directory a command runs in.
const DefaultDataDir = "ghost-data"

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

// StoreChosen reports whether the store was chosen on purpose: a
// --data-dir or --s3-* flag, or their GHOST_* variables. Without either,
// commands fall back to ./ghost-data, which may not be what the user
// meant.
func (c *Config) StoreChosen() bool {
	if c.flags == nil {
		return c.DataDir != DefaultDataDir || c.S3.Bucket != ""
	}
	chosen := false
	for _, name := range []string{"data-dir", "s3-bucket", "s3-prefix", "s3-endpoint"} {
		f := c.flags.Lookup(name)
		if f != nil && (f.Changed || Env(EnvOf(f), "") != "") {
			chosen = true
		}
	}
	return chosen
}

// Describe names the store and the etcd a node uses, for the line "ghost
// serve" prints at start: "filesystem store /abs/ghost-data", "S3 bucket
// b, prefix p, at https://...", and "embedded etcd under ..." or the
// endpoints.
func (c *Config) Describe() string {
	var b strings.Builder
	if c.S3.Bucket != "" {
		b.WriteString("S3 bucket " + c.S3.Bucket)
		if p := strings.Trim(c.S3.Prefix, "/"); p != "" {
			b.WriteString(", prefix " + p)
		}
		if c.S3.Endpoint != "" {
			b.WriteString(", at " + c.S3.Endpoint)
		}
	} else {
		b.WriteString("filesystem store " + c.Location())
	}
	return b.String()
}

// DescribeEtcd names the coordination store the settings select.
func (c *Config) DescribeEtcd() string {
	if len(c.EtcdEndpoints) > 0 {
		return "etcd " + strings.Join(c.EtcdEndpoints, ",")
	}
	dir := filepath.Join(c.DataDir, "etcd")
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return "embedded etcd in " + dir
}

// NoStoreError reports that the configured place holds no ghost store.
// Only "ghost serve" and "ghost init" create one; every other command
// says where it looked instead of creating a store as a side effect.
type NoStoreError struct {
	// Location is where the command looked (Config.Location).
	Location string
	// Chosen is whether the user named that place (Config.StoreChosen);
	// if not, it is the default ./ghost-data.
	Chosen bool
}

func (e *NoStoreError) Error() string {
	if e.Chosen {
		return "no ghost store at " + e.Location
	}
	return "no ghost store at " + e.Location + " (the default --data-dir, ./" + DefaultDataDir + " in the current directory)"
}

// ErrNoStore is what every *NoStoreError matches with errors.Is.
var ErrNoStore = errors.New("no ghost store")

// Is makes errors.Is(err, ErrNoStore) true.
func (e *NoStoreError) Is(target error) bool { return target == ErrNoStore }

// storeMarker is the object "ghost init" writes, so that an installation
// that holds nothing else yet still reads as one. A store also counts as
// one when it holds any metadata record (every installation made before
// the marker existed does, and "ghost serve" writes some at its start).
const storeMarker = "meta/store"

// OpenStore opens the configured object store, which must exist: a data
// directory whose objects/ is there, or a bucket (and prefix) that holds
// ghost's metadata. Otherwise it returns a *NoStoreError and creates
// nothing. "ghost serve" and "ghost init" use CreateStore instead.
func (c *Config) OpenStore(ctx context.Context) (objstore.Store, error) {
	if c.S3.Bucket == "" {
		if c.DataDir == "" {
			return nil, errors.New("config: empty data directory")
		}
		st, err := os.Stat(filepath.Join(c.DataDir, "objects"))
		if errors.Is(err, os.ErrNotExist) || err == nil && !st.IsDir() {
			return nil, &NoStoreError{Location: c.Location(), Chosen: c.StoreChosen()}
		}
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		return c.open(ctx)
	}
	s, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	page, err := s.List(ctx, "meta/", "", 1)
	if err != nil {
		return nil, fmt.Errorf("config: read %s: %w", c.Location(), err)
	}
	if len(page) == 0 {
		return nil, &NoStoreError{Location: c.Location(), Chosen: true}
	}
	return s, nil
}

// CreateStore opens the configured object store, creating it when it is
// not there yet: the data directory, or the marker object in the bucket.
// created reports whether it was made now.
func (c *Config) CreateStore(ctx context.Context) (s objstore.Store, created bool, err error) {
	_, err = c.OpenStore(ctx)
	switch {
	case err == nil:
		s, err = c.open(ctx)
		return s, false, err
	case !errors.Is(err, ErrNoStore):
		return nil, false, err
	}
	if s, err = c.open(ctx); err != nil {
		return nil, false, err
	}
	body := fmt.Sprintf("{\"v\":1,\"created_at\":%q}\n", time.Now().UTC().Format(time.RFC3339))
	if _, err := s.PutIfAbsent(ctx, storeMarker, strings.NewReader(body), int64(len(body))); err != nil && !errors.Is(err, objstore.ErrPreconditionFailed) {
		return nil, false, fmt.Errorf("config: create the store at %s: %w", c.Location(), err)
	}
	return s, true, nil
}

// open opens the store as configured, creating a filesystem store's
// directories.
func (c *Config) open(ctx context.Context) (objstore.Store, error) {
	if c.S3.Bucket != "" {
		s, err := s3store.New(ctx, s3store.Config{
			Endpoint:     c.S3.Endpoint,
			Region:       c.S3.Region,
			Bucket:       c.S3.Bucket,
			Prefix:       c.S3.Prefix,
			UsePathStyle: c.S3.PathStyle,

			PresignEndpoint: c.S3.PresignEndpoint,
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
