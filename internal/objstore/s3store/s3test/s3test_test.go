package s3test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

func client(t *testing.T, unchecked bool) (*s3.Client, *Server) {
	t.Helper()
	srv := New(Options{AccessKey: "AKID", Secret: "secret", Unchecked: unchecked})
	ts := httptest.NewServer(srv) // 127.0.0.1
	t.Cleanup(ts.Close)
	c := s3.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "secret", ""),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired, ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired},
		func(o *s3.Options) { o.BaseEndpoint = aws.String(ts.URL); o.UsePathStyle = true })
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	return c, srv
}

func sum64(s string) string {
	h := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(h[:])
}

// head returns key's checksum as HeadObject with ChecksumMode reports
// it, or an error.
func head(c *s3.Client, key string) (string, types.ChecksumType, error) {
	out, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return "", "", err
	}
	return aws.ToString(out.ChecksumSHA256), out.ChecksumType, nil
}

// TestChecksums: the server keeps SHA-256 checksums as S3 does: a
// mismatched body is refused with BadDigest and not stored, a matching
// one's checksum is reported only when asked for, a copy carries it, a
// later PUT without one or a delete forgets it.
func TestChecksums(t *testing.T) {
	c, srv := client(t, false)
	ctx := context.Background()
	put := func(key, body, sum string) error {
		in := &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader(body)}
		if sum != "" {
			in.ChecksumSHA256 = aws.String(sum)
		}
		_, err := c.PutObject(ctx, in)
		return err
	}
	var ae smithy.APIError
	if err := put("k", "these bytes", sum64("other bytes")); !errors.As(err, &ae) || ae.ErrorCode() != "BadDigest" {
		t.Fatalf("mismatched body: %v, want BadDigest", err)
	}
	if _, _, err := head(c, "k"); err == nil {
		t.Fatal("a refused body was stored")
	}
	if err := put("k", "these bytes", sum64("these bytes")); err != nil {
		t.Fatal(err)
	}
	if got, kind, err := head(c, "k"); err != nil || got != sum64("these bytes") || kind != types.ChecksumTypeFullObject {
		t.Fatalf("checksum %q %q %v", got, kind, err)
	}
	out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
	if err != nil || out.ChecksumSHA256 != nil {
		t.Fatalf("checksum reported unasked: %v %v", out.ChecksumSHA256, err)
	}
	if _, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copy"), CopySource: aws.String("bkt/k")}); err != nil {
		t.Fatal(err)
	}
	if got, _, err := head(c, "copy"); err != nil || got != sum64("these bytes") {
		t.Fatalf("copy's checksum %q %v", got, err)
	}
	if err := put("k", "new bytes", ""); err != nil {
		t.Fatal(err)
	}
	if got, _, err := head(c, "k"); err != nil || got != "" {
		t.Fatalf("checksum after a PUT without one: %q %v", got, err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copy")}); err != nil {
		t.Fatal(err)
	}
	if err := put("copy", "x", ""); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := head(c, "copy"); got != "" {
		t.Fatalf("checksum outlived its delete: %q", got)
	}
	if n := len(srv.Requests(false, "PUT", "/bkt/k")); n != 3 {
		t.Fatalf("%d PUTs of /b/k logged, want 3", n)
	}

	// Unchecked: gofakes3 as it is, a stored claim.
	c, _ = client(t, true)
	if err := put("k", "these bytes", sum64("other bytes")); err != nil {
		t.Fatal(err)
	}
	if got, _, err := head(c, "k"); err != nil || got != sum64("other bytes") {
		t.Fatalf("unchecked: %q %v, want the claim", got, err)
	}
}
