package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// TestServeLFSDirectNeedsS3: --lfs-direct (or its endpoint) on the
// filesystem store, a bad endpoint URL or an expiry out of SigV4's range
// is a usage error before anything is served.
func TestServeLFSDirectNeedsS3(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-lfs-direct"}, "needs the S3 store"},
		{[]string{"-lfs-direct-endpoint", "http://s3.example:9000"}, "needs the S3 store"},
		{[]string{"-lfs-direct-endpoint", "s3.example:9000"}, "want an http:// or https:// URL"},
		{[]string{"-s3-bucket", "b", "-lfs-direct", "-lfs-direct-expiry", "0s"}, "must be 1s to"},
		{[]string{"-s3-bucket", "b", "-lfs-direct", "-lfs-direct-expiry", "200h"}, "must be 1s to"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"serve", "-data-dir", t.TempDir(), "-listen", "127.0.0.1:0", "-ssh-listen", ""}, c.args...)
		if code := Main(context.Background(), args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("serve %v: exit %d, %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}
