package cli

import (
	"net/url"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/s3store"
)

// lfsDirectFlags are serve's Git LFS direct-to-S3 settings
// (docs/adr/0126-lfs-direct-to-s3.md).
type lfsDirectFlags struct {
	on       bool
	endpoint string
	expiry   time.Duration
}

func (l *lfsDirectFlags) register(f *pflag.FlagSet) {
	config.BoolVar(f, &l.on, "lfs-direct", "GHOST_LFS_DIRECT", false, "on S3, send Git LFS bytes over HTTP straight between clients and the bucket through presigned URLs, verified before they count")
	config.StringVar(f, &l.endpoint, "lfs-direct-endpoint", "GHOST_LFS_DIRECT_ENDPOINT", "", "S3 endpoint URL the Git LFS clients reach, for presigned URLs (default --s3-endpoint); setting it turns --lfs-direct on")
	config.DurationVar(f, &l.expiry, "lfs-direct-expiry", "GHOST_LFS_DIRECT_EXPIRY", lfs.DefaultPresignExpiry, "how long a presigned Git LFS URL stays valid (1s to 7 days)")
}

// apply checks the settings and puts the clients' endpoint into the
// store's configuration.
func (l *lfsDirectFlags) apply(cfg *config.Config) error {
	if l.endpoint != "" {
		l.on = true
		u, err := url.Parse(l.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErrorf("--lfs-direct-endpoint %q: want an http:// or https:// URL", l.endpoint)
		}
	}
	if !l.on {
		return nil
	}
	if cfg.S3.Bucket == "" {
		return usageErrorf("--lfs-direct needs the S3 store (--s3-bucket): the filesystem store has no presigned URLs")
	}
	if l.expiry < time.Second || l.expiry > s3store.MaxPresignExpiry {
		return usageErrorf("--lfs-direct-expiry %v: must be 1s to %v", l.expiry, s3store.MaxPresignExpiry)
	}
	cfg.S3.PresignEndpoint = l.endpoint
	return nil
}

// presigner is the store as an lfs.Presigner when direct, else nil.
func (l *lfsDirectFlags) presigner(store objstore.Store) (lfs.Presigner, error) {
	if !l.on {
		return nil, nil
	}
	p, ok := store.(lfs.Presigner)
	if !ok {
		return nil, usageErrorf("--lfs-direct: the object store cannot presign URLs")
	}
	return p, nil
}
