package s3store

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// FuzzCopySource: x-amz-copy-source names exactly the source object
// whether the server decodes it as a path or as a query string (where "+"
// would be a space), for every key the store accepts.
func FuzzCopySource(f *testing.F) {
	for _, s := range []string{"repos/a/index", "a+b/c d", "x%2Fy", "caf\xc3\xa9/\xff", "a?b#c&d=e", "a;b,c"} {
		f.Add("bucket", s)
	}
	f.Fuzz(func(t *testing.T, bucket, key string) {
		if objstore.ValidateKey(key) != nil || bucket == "" || strings.Contains(bucket, "/") {
			return
		}
		src := copySource(bucket, key)
		want := bucket + "/" + key
		if got, err := url.PathUnescape(src); err != nil || got != want {
			t.Fatalf("copySource(%q, %q) = %q path-decodes to %q (%v)", bucket, key, src, got, err)
		}
		if got, err := url.QueryUnescape(src); err != nil || got != want {
			t.Fatalf("copySource(%q, %q) = %q query-decodes to %q (%v)", bucket, key, src, got, err)
		}
	})
}

// TestCopySourceEscapesPlusInBucket is the regression test for what
// FuzzCopySource found (testdata/fuzz/FuzzCopySource): "+" was escaped in
// the key but not in the bucket, so a server decoding the header as a
// query string read bucket "a+b" as "a b".
func TestCopySourceEscapesPlusInBucket(t *testing.T) {
	if got, want := copySource("a+b", "k+1/x"), "a%2Bb/k%2B1/x"; got != want {
		t.Errorf("copySource = %q, want %q", got, want)
	}
}
