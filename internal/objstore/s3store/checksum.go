package s3store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// StoredSHA256 returns key's size and the full-object SHA-256 checksum
// the server holds for it (HeadObject with ChecksumMode ENABLED), without
// reading its bytes. The sum is nil when the server holds none: the
// object was written without x-amz-checksum-sha256, the server keeps no
// checksums, or its checksum is of another kind (another algorithm, or a
// multipart upload's COMPOSITE checksum, a checksum of the parts'
// checksums). A missing key is objstore.ErrNotFound.
//
// The sum is only as good as the server's check at write time: S3
// refuses a PutObject whose body does not hash to the checksum sent with
// it, but some S3-compatible servers and emulators store the header as
// sent and never hash the body. ChecksSHA256 tells them apart
// (docs/adr/0126-lfs-direct-to-s3.md).
func (s *Store) StoredSHA256(ctx context.Context, key string) ([]byte, int64, error) {
	full, err := s.fullKey(key)
	if err != nil {
		return nil, 0, opError("StoredSHA256", key, err)
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &full, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		return nil, 0, opError("StoredSHA256", key, mapError(err, opRead))
	}
	return fullObjectSHA256(aws.ToString(out.ChecksumSHA256), out.ChecksumType), aws.ToInt64(out.ContentLength), nil
}

// fullObjectSHA256 decodes a SHA-256 checksum header that covers the
// whole object; anything else is nil. A server that names no checksum
// type (older than S3's full-object checksums) still marks a composite
// checksum with a "-<parts>" suffix, which is not base64.
func fullObjectSHA256(value string, kind types.ChecksumType) []byte {
	if value == "" || (kind != "" && kind != types.ChecksumTypeFullObject) {
		return nil
	}
	sum, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(sum) != sha256.Size {
		return nil
	}
	return sum
}

// probeBody is what ChecksSHA256 puts, with the checksum of other bytes.
var probeBody = []byte("ghost: does this server check x-amz-checksum-sha256?")

// ChecksSHA256 reports whether the server checks the SHA-256 checksums
// it is sent, so that what StoredSHA256 reports is a fact about the
// bytes and not a writer's claim. It puts a few bytes at key with an
// x-amz-checksum-sha256 of other bytes: S3 refuses them (BadDigest) and
// stores nothing; a server that takes them does not check, and the key
// is deleted again (a failed delete leaves it to whoever collects the
// caller's temporaries). Any other answer is an error: the caller cannot
// tell and must not trust the checksums.
func (s *Store) ChecksSHA256(ctx context.Context, key string) (bool, error) {
	full, err := s.fullKey(key)
	if err != nil {
		return false, opError("ChecksSHA256", key, err)
	}
	other := sha256.Sum256(append([]byte("not "), probeBody...))
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         &s.bucket,
		Key:            &full,
		Body:           bytes.NewReader(probeBody),
		ContentLength:  aws.Int64(int64(len(probeBody))),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(other[:])),
	}, unsignedPayload, sendOnce)
	if err == nil {
		// The answer is known whether or not the delete lands.
		_ = s.Delete(ctx, key)
		return false, nil
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "BadDigest", // S3, R2
			"XAmzContentChecksumMismatch": // MinIO
			return true, nil
		}
	}
	return false, opError("ChecksSHA256", key, fmt.Errorf("a body that does not hash to its checksum got neither 200 nor BadDigest: %w", mapError(err, opPut)))
}
