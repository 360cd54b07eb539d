// Package s3store is the objstore.Store on Amazon S3 and S3-compatible
// servers (MinIO, Ceph RGW, R2, ...), built on aws-sdk-go-v2.
//
// The write-ahead log's commit point is a conditional PutObject on the
// repository index (If-Match: <etag>, or If-None-Match: * for the first
// write), so this package's most important job is to turn S3's three ways of
// saying "you lost the compare-and-swap" into objstore.ErrPreconditionFailed,
// and its ways of saying "no such key" into objstore.ErrNotFound, without
// confusing either with a missing bucket or a transport failure. A
// conditional put is sent exactly once (the SDK's retries are off for it),
// and one that fails without a 4xx answer is objstore.ErrOutcomeUnknown:
// see docs/adr/0006-write-outcomes.md.
//
// Bodies are streamed: an unconditional put below the multipart threshold
// and every conditional put is one PutObject whose body is the caller's
// reader, sent with an UNSIGNED-PAYLOAD signature so the SDK never reads it
// ahead to hash it. Above the threshold a put becomes a sequential multipart
// upload through one reusable part buffer, so a put holds at most one part in
// memory whatever the object's size. Payload integrity rests on TLS and on
// the log's own checksums (each layer's sha256 is recorded in the index),
// not on the SigV4 payload hash.
package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// Multipart limits imposed by S3 itself.
const (
	// DefaultMultipartThreshold is the size above which Put switches to a
	// multipart upload. Below it one PutObject is cheaper (one request) and
	// still streams; above it multipart bounds the cost of a retry to one
	// part and lifts S3's 5 GiB single-PUT ceiling.
	DefaultMultipartThreshold int64 = 64 << 20
	// DefaultPartSize is the multipart part size, and so the memory one
	// large Put holds: parts are buffered so the SDK can retry a failed part
	// by rewinding it.
	DefaultPartSize int64 = 16 << 20
	// MinPartSize is S3's smallest allowed part (all but the last).
	MinPartSize int64 = 5 << 20
	// maxParts is S3's limit on parts per upload.
	maxParts = 10000
)

// Config selects the bucket and how to reach it.
type Config struct {
	// Endpoint is the base URL of an S3-compatible server, e.g.
	// "https://minio.internal:9000". Empty means AWS S3 itself.
	Endpoint string
	// Region signs requests. Empty keeps the region of the AWS
	// configuration chain, or "us-east-1" if that has none, which most
	// S3-compatible servers accept.
	Region string
	// Bucket holds the objects. It must already exist.
	Bucket string
	// Prefix, if set, is prepended to every key so several deployments can
	// share a bucket. A trailing "/" is added if missing, and List strips it
	// again, so callers never see it.
	Prefix string
	// UsePathStyle addresses the bucket as a path (endpoint/bucket/key)
	// rather than a virtual host (bucket.endpoint/key); most self-hosted
	// S3-compatible servers need it.
	UsePathStyle bool
	// MultipartThreshold is the size above which unconditional puts use a
	// multipart upload; 0 means DefaultMultipartThreshold. Conditional puts
	// are never multipart.
	MultipartThreshold int64
	// PartSize is the multipart part size; 0 means DefaultPartSize. It may
	// not be below MinPartSize. It grows automatically when an object would
	// need more than 10,000 parts.
	PartSize int64
	// AWSConfig, if set, is used instead of config.LoadDefaultConfig, so
	// tests and embedders can supply static credentials without touching
	// the process environment. It is copied, never modified.
	AWSConfig *aws.Config
	// HTTPClient, if set, replaces the SDK's HTTP client (for tests, or
	// custom TLS and timeouts).
	HTTPClient aws.HTTPClient
	// PresignEndpoint is the base URL that presigned URLs name
	// (PresignPut, PresignGet): the endpoint the clients can reach, which
	// may differ from the one this node uses (a private address, a
	// proxy). Empty means Endpoint.
	PresignEndpoint string
}

// Store is an objstore.Store on one S3 bucket (and optional key prefix). It
// is safe for concurrent use; its conditional puts are as linearizable as the
// server's conditional writes, which AWS S3 guarantees.
type Store struct {
	client    *s3.Client
	presign   *s3.PresignClient
	bucket    string
	prefix    string
	threshold int64
	partSize  int64
}

var _ objstore.Store = (*Store)(nil)

// New builds a Store. Credentials come from the usual AWS chain
// (environment, shared config, SSO, instance role) unless cfg.AWSConfig is
// given. New makes no request, so a wrong bucket shows up on first use.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3store: Config.Bucket is required")
	}
	prefix := cfg.Prefix
	if prefix != "" {
		if err := objstore.ValidateKey(strings.TrimSuffix(prefix, "/")); err != nil {
			return nil, fmt.Errorf("s3store: Config.Prefix %q: %w", cfg.Prefix, err)
		}
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
	}
	threshold := cfg.MultipartThreshold
	if threshold == 0 {
		threshold = DefaultMultipartThreshold
	}
	partSize := cfg.PartSize
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	if threshold < 0 {
		return nil, fmt.Errorf("s3store: MultipartThreshold %d is negative", threshold)
	}
	if partSize < MinPartSize {
		return nil, fmt.Errorf("s3store: PartSize %d is below S3's minimum of %d", partSize, MinPartSize)
	}

	var awsCfg aws.Config
	if cfg.AWSConfig != nil {
		awsCfg = cfg.AWSConfig.Copy()
	} else {
		var opts []func(*config.LoadOptions) error
		if cfg.Region != "" {
			opts = append(opts, config.WithRegion(cfg.Region))
		}
		loaded, err := config.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("s3store: load AWS configuration: %w", err)
		}
		awsCfg = loaded
	}
	if cfg.Region != "" {
		awsCfg.Region = cfg.Region
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	if cfg.HTTPClient != nil {
		awsCfg.HTTPClient = cfg.HTTPClient
	}
	// Since SDK v1.73 the client adds CRC32 trailing checksums (aws-chunked
	// encoding) to every upload by default, which many S3-compatible
	// servers reject or store verbatim. Checksum only where S3 requires it.
	awsCfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	awsCfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired

	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.UsePathStyle
	})
	presignEndpoint := cfg.PresignEndpoint
	if presignEndpoint == "" {
		presignEndpoint = cfg.Endpoint
	}
	presign := s3.NewPresignClient(s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if presignEndpoint != "" {
			o.BaseEndpoint = aws.String(presignEndpoint)
		}
		o.UsePathStyle = cfg.UsePathStyle
	}))
	return &Store{client: client, presign: presign, bucket: cfg.Bucket, prefix: prefix, threshold: threshold, partSize: partSize}, nil
}

// fullKey validates key and returns the bucket key it maps to. Its errors,
// like those of the other helpers, are causes: the exported methods wrap
// them in an *objstore.Error.
func (s *Store) fullKey(key string) (string, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return "", err
	}
	return s.prefix + key, nil
}

// sendOnce turns off the SDK's retries for one operation. Conditional puts
// use it: their bodies are seekable, so the SDK would otherwise resend one
// whose answer was lost, and if the first try had landed the resend fails
// its own precondition, which would be reported as a lost compare-and-swap
// for a write that applied (docs/adr/0006-write-outcomes.md). The log's
// commit loop is the retry, and it re-reads before it tries again.
func sendOnce(o *s3.Options) {
	o.Retryer = aws.NopRetryer{}
}

// unsignedPayload keeps the SDK from reading a request body ahead to hash
// it, which would need a seekable body or a full copy in memory.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, objstore.Info, error) {
	full, err := s.fullKey(key)
	if err != nil {
		return nil, objstore.Info{}, opError("Get", key, err)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &full})
	if err != nil {
		return nil, objstore.Info{}, opError("Get", key, mapError(err, opRead))
	}
	return out.Body, objstore.Info{Key: key, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag)}, nil
}

// GetRange implements objstore.Store.
func (s *Store) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	rc, err := s.getRange(ctx, key, offset, length)
	return rc, opError("GetRange", key, err)
}

// getRange is GetRange without the *objstore.Error around its errors.
func (s *Store) getRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	full, err := s.fullKey(key)
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("negative range %d+%d", offset, length)
	}
	if length == 0 {
		// A Range header cannot express zero bytes; a HEAD still reports a
		// missing key the way every other backend does.
		if _, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &full}); err != nil {
			return nil, mapError(err, opRead)
		}
		return http.NoBody, nil
	}
	rng := "bytes=" + strconv.FormatInt(offset, 10) + "-"
	if end := offset + length - 1; end >= offset { // else overflow: to the end
		rng += strconv.FormatInt(end, 10)
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &full, Range: &rng})
	if err != nil {
		if isInvalidRange(err) {
			// S3 answers 416 when offset is at or past the end (including
			// any range of an empty object); the key exists, since a missing
			// one is NoSuchKey first.
			return http.NoBody, nil
		}
		return nil, mapError(err, opRead)
	}
	if out.ContentRange == nil && offset > 0 && aws.ToInt64(out.ContentLength) > 0 {
		// A 200 with the whole object: the server ignored Range. Returning
		// it would hand the caller bytes from the wrong offset.
		out.Body.Close()
		return nil, fmt.Errorf("server ignored Range %q", rng)
	}
	return readCloser{io.LimitReader(out.Body, length), out.Body}, nil
}

// readCloser pairs a limited reader with the body it must close.
type readCloser struct {
	io.Reader
	io.Closer
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	full, err := s.fullKey(key)
	if err != nil {
		return objstore.Info{}, opError("Put", key, err)
	}
	var info objstore.Info
	if size > s.threshold {
		info, err = s.putMultipart(ctx, key, full, r, size)
	} else {
		info, err = s.putObject(ctx, key, full, r, size, opPut, nil, nil)
	}
	return info, opError("Put", key, err)
}

// PutIfMatch implements objstore.Store.
func (s *Store) PutIfMatch(ctx context.Context, key string, r io.Reader, size int64, etag string) (objstore.Info, error) {
	full, err := s.fullKey(key)
	if err != nil {
		return objstore.Info{}, opError("PutIfMatch", key, err)
	}
	if etag == "" {
		// An empty If-Match header is dropped by the SDK, which would turn
		// a compare-and-swap into an unconditional overwrite.
		return objstore.Info{}, opError("PutIfMatch", key, errors.New("empty ETag"))
	}
	info, err := s.putObject(ctx, key, full, r, size, opPutIfMatch, &etag, nil)
	return info, opError("PutIfMatch", key, err)
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (objstore.Info, error) {
	full, err := s.fullKey(key)
	if err != nil {
		return objstore.Info{}, opError("PutIfAbsent", key, err)
	}
	info, err := s.putObject(ctx, key, full, r, size, opPutIfAbsent, nil, aws.String("*"))
	return info, opError("PutIfAbsent", key, err)
}

// putObject is one (possibly conditional) PutObject streaming r.
func (s *Store) putObject(ctx context.Context, key, full string, r io.Reader, size int64, kind opKind, ifMatch, ifNoneMatch *string) (objstore.Info, error) {
	if size < 0 {
		return objstore.Info{}, fmt.Errorf("negative size %d", size)
	}
	body := newSizedBody(r, size)
	optFns := []func(*s3.Options){unsignedPayload}
	if kind == opPutIfMatch || kind == opPutIfAbsent {
		optFns = append(optFns, sendOnce)
	}
	out, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &full,
		Body:          body,
		ContentLength: aws.Int64(size),
		IfMatch:       ifMatch,
		IfNoneMatch:   ifNoneMatch,
	}, optFns...)
	if berr := body.failure(); berr != nil {
		// The body was short or long: the request was cut off before the
		// declared length went out, so nothing was stored.
		return objstore.Info{}, berr
	}
	if err != nil {
		return objstore.Info{}, mapError(err, kind)
	}
	return objstore.Info{Key: key, Size: size, ETag: aws.ToString(out.ETag)}, nil
}

// putMultipart uploads r in sequential parts through one reusable buffer.
// On any failure it aborts the upload so no parts linger (billed) in the
// bucket; a crash before the abort leaves them for a lifecycle rule.
func (s *Store) putMultipart(ctx context.Context, key, full string, r io.Reader, size int64) (objstore.Info, error) {
	partSize := max(s.partSize, (size+maxParts-1)/maxParts)
	created, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &full})
	if err != nil {
		return objstore.Info{}, mapError(err, opPut)
	}
	uploadID := created.UploadId
	abort := func(cause error) (objstore.Info, error) {
		// Abort even when ctx is what failed, but do not hang on it.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &full, UploadId: uploadID}); aerr != nil {
			return objstore.Info{}, fmt.Errorf("%w (and aborting upload %s failed: %v)", cause, aws.ToString(uploadID), aerr)
		}
		return objstore.Info{}, cause
	}

	body := newSizedBody(r, size)
	buf := make([]byte, min(partSize, size))
	var parts []types.CompletedPart
	for n, remaining := int32(1), size; remaining > 0; n++ {
		chunk := buf[:min(partSize, remaining)]
		if _, err := io.ReadFull(body, chunk); err != nil {
			if berr := body.failure(); berr != nil {
				err = berr
			}
			return abort(fmt.Errorf("read part %d: %w", n, err))
		}
		remaining -= int64(len(chunk))
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:        &s.bucket,
			Key:           &full,
			UploadId:      uploadID,
			PartNumber:    aws.Int32(n),
			Body:          bytes.NewReader(chunk),
			ContentLength: aws.Int64(int64(len(chunk))),
		}, unsignedPayload)
		if err != nil {
			return abort(fmt.Errorf("part %d: %w", n, mapError(err, opPut)))
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
	}
	// Every declared byte is read; a source with more is a caller bug and
	// must not become a silently truncated object.
	if _, err := body.Read(buf[:1]); err != io.EOF {
		if berr := body.failure(); berr != nil {
			err = berr
		}
		return abort(err)
	}
	done, err := s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          &s.bucket,
		Key:             &full,
		UploadId:        uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return abort(mapError(err, opPut))
	}
	return objstore.Info{Key: key, Size: size, ETag: aws.ToString(done.ETag)}, nil
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	full, err := s.fullKey(key)
	if err != nil {
		return opError("Delete", key, err)
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &full}); err != nil {
		if err := mapError(err, opRead); !errors.Is(err, objstore.ErrNotFound) {
			return opError("Delete", key, err)
		}
	}
	return nil
}

// List implements objstore.Store. It pages through ListObjectsV2 itself
// when limit exceeds what one response carries, because the objstore
// contract reads a short page as the end of the listing.
func (s *Store) List(ctx context.Context, prefix, startAfter string, limit int) ([]objstore.Info, error) {
	if limit <= 0 {
		return nil, opError("List", prefix, fmt.Errorf("limit %d must be positive", limit))
	}
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.prefix + prefix)}
	if startAfter != "" {
		in.StartAfter = aws.String(s.prefix + startAfter)
	}
	var out []objstore.Info
	for len(out) < limit {
		in.MaxKeys = aws.Int32(int32(min(limit-len(out), 1000)))
		page, err := s.client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, opError("List", prefix, mapError(err, opList))
		}
		for _, o := range page.Contents {
			k, ok := strings.CutPrefix(aws.ToString(o.Key), s.prefix)
			if !ok {
				continue // cannot happen with a conforming server
			}
			out = append(out, objstore.Info{Key: k, Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag)})
		}
		if !aws.ToBool(page.IsTruncated) || len(page.Contents) == 0 {
			break
		}
		if page.NextContinuationToken != nil {
			in.ContinuationToken = page.NextContinuationToken
		} else {
			// Some S3-compatible servers truncate without a token; resume
			// after the last key instead.
			in.ContinuationToken = nil
			in.StartAfter = page.Contents[len(page.Contents)-1].Key
		}
	}
	// S3 lists in UTF-8 binary order, which is byte order; sorting guards
	// against servers that do not.
	slices.SortFunc(out, func(a, b objstore.Info) int { return strings.Compare(a.Key, b.Key) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Copy implements objstore.Store. CopyObject is limited by S3 to sources of
// at most 5 GiB.
func (s *Store) Copy(ctx context.Context, src, dst string) error {
	fullSrc, err := s.fullKey(src)
	if err != nil {
		return opError("Copy", src, err)
	}
	fullDst, err := s.fullKey(dst)
	if err != nil {
		return opError("Copy", dst, err)
	}
	_, err = s.client.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:     &s.bucket,
		Key:        &fullDst,
		CopySource: aws.String(copySource(s.bucket, fullSrc)),
	})
	if err != nil {
		err = mapError(err, opCopy)
		if errors.Is(err, objstore.ErrNotFound) {
			return opError("Copy", src, err) // only the source can be missing
		}
		return opError("Copy", dst, err)
	}
	return nil
}

// opError wraps err, if any, in the *objstore.Error that every backend
// returns.
func opError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return &objstore.Error{Op: op, Key: key, Err: err}
}

// copySource URL-escapes bucket/key for x-amz-copy-source. Segments are
// escaped one by one so "/" survives, and "+" is escaped too because S3
// (and gofakes3) decode the header as a query string, where "+" is a space.
// The bucket is escaped the same way: AWS names cannot hold "+", but
// servers with relaxed bucket names may.
func copySource(bucket, key string) string {
	esc := func(s string) string { return strings.ReplaceAll(url.PathEscape(s), "+", "%2B") }
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		segs[i] = esc(seg)
	}
	return esc(bucket) + "/" + strings.Join(segs, "/")
}

// opKind says which request an error answers, because S3's status codes
// mean different things on different requests (a 404 on an If-Match put is
// a lost CAS, not a missing object).
type opKind int

const (
	opRead opKind = iota
	opPut
	opPutIfMatch
	opPutIfAbsent
	opList
	opCopy
)

// mapError translates an SDK error into the objstore contract, keeping the
// SDK error (which names the S3 operation and the answer) in the chain for
// diagnosis. The result is a cause, for the caller to wrap in an
// *objstore.Error.
func mapError(err error, kind opKind) error {
	status := 0
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	code := ""
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	// A missing bucket is a configuration error, never "no such object"
	// (a repository would read as absent) nor a lost CAS (the log would
	// retry eight times, then report contention).
	noBucket := code == "NoSuchBucket"
	var sentinel error
	switch kind {
	case opRead, opCopy:
		if code == "NoSuchKey" || code == "NotFound" || (status == http.StatusNotFound && !noBucket) {
			sentinel = objstore.ErrNotFound
		}
	case opPutIfMatch, opPutIfAbsent:
		switch {
		case status == http.StatusPreconditionFailed || code == "PreconditionFailed":
			sentinel = objstore.ErrPreconditionFailed
		case status == http.StatusConflict || code == "ConditionalRequestConflict":
			// 409: a racing conditional write on the same key won, or is
			// in flight. Either way this attempt lost; re-read and retry.
			sentinel = objstore.ErrPreconditionFailed
		case kind == opPutIfMatch && (code == "NoSuchKey" || (status == http.StatusNotFound && !noBucket)):
			// If-Match against a key that no longer exists.
			sentinel = objstore.ErrPreconditionFailed
		}
	}
	if sentinel == nil && (kind == opPutIfMatch || kind == opPutIfAbsent) && (status == 0 || status >= 500) {
		// No answer (transport error, timeout, cancelled context) or a
		// server error: the write may have applied. A 4xx answer other
		// than the ones above is a refusal, so it certainly did not.
		sentinel = objstore.ErrOutcomeUnknown
	}
	if sentinel == nil && (status == 0 || status >= 500) && !isCanceled(err) {
		// No answer or a server error on a read, list, delete or copy:
		// the store is (for now) unavailable. It says nothing about the
		// object, so it is never "not found".
		sentinel = objstore.ErrUnavailable
	} else if errors.Is(sentinel, objstore.ErrOutcomeUnknown) && !isCanceled(err) {
		return fmt.Errorf("%w: %w: %w", sentinel, objstore.ErrUnavailable, err)
	}
	if sentinel != nil {
		return fmt.Errorf("%w: %w", sentinel, err)
	}
	return err
}

// isCanceled reports an error caused by the caller's own context: the
// store did not fail, the caller stopped waiting.
func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled)
}

// isInvalidRange reports S3's 416 answer to a range starting at or past the
// end of the object.
func isInvalidRange(err error) bool {
	var re *awshttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable {
		return true
	}
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange"
}
