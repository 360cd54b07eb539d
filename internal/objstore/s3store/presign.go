package s3store

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// MaxPresignExpiry is SigV4's longest presigned URL lifetime (7 days).
const MaxPresignExpiry = 7 * 24 * time.Hour

// PresignPut returns a URL through which a client PUTs exactly size
// bytes hashing to sha256 at key, valid for expires, and the headers it
// must send with them. The signature covers the Content-Length and the
// x-amz-checksum-sha256 header, so S3 refuses a body of another length
// or hash, and a client that drops or alters either header (the
// signature no longer matches). Servers that do not check checksums
// still bind the length; callers verify what landed either way
// (docs/adr/0126-lfs-direct-to-s3.md). It makes no request.
func (s *Store) PresignPut(ctx context.Context, key string, size int64, sha256 []byte, expires time.Duration) (string, http.Header, error) {
	full, err := s.presignKey(key, expires)
	if err != nil {
		return "", nil, opError("PresignPut", key, err)
	}
	if size < 0 || len(sha256) != 32 {
		return "", nil, opError("PresignPut", key, fmt.Errorf("size %d and a 32-byte sha256 are required", size))
	}
	req, err := s.presign.PresignPutObject(ctx, &s3.PutObjectInput{
		Bucket:         &s.bucket,
		Key:            &full,
		ContentLength:  aws.Int64(size),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sha256)),
	}, s3.WithPresignExpires(expires))
	if err != nil {
		return "", nil, opError("PresignPut", key, err)
	}
	return req.URL, clientHeaders(req.SignedHeader), nil
}

// PresignGet returns a URL through which a client GETs key, valid for
// expires. It makes no request.
func (s *Store) PresignGet(ctx context.Context, key string, expires time.Duration) (string, error) {
	full, err := s.presignKey(key, expires)
	if err != nil {
		return "", opError("PresignGet", key, err)
	}
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &full}, s3.WithPresignExpires(expires))
	if err != nil {
		return "", opError("PresignGet", key, err)
	}
	return req.URL, nil
}

func (s *Store) presignKey(key string, expires time.Duration) (string, error) {
	if expires < time.Second || expires > MaxPresignExpiry {
		return "", fmt.Errorf("expiry %v: must be 1s to %v", expires, MaxPresignExpiry)
	}
	return s.fullKey(key)
}

// clientHeaders is the signed headers a client must set itself: Host and
// Content-Length come from the URL and the body.
func clientHeaders(signed http.Header) http.Header {
	out := make(http.Header, len(signed))
	for k, v := range signed {
		switch http.CanonicalHeaderKey(k) {
		case "Host", "Content-Length":
			continue
		}
		out[http.CanonicalHeaderKey(k)] = v
	}
	return out
}
