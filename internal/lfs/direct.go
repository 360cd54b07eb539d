package lfs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/objstore"
)

// Presigner signs URLs through which a client moves an object's bytes
// straight to and from the object store, so the node never carries them
// (docs/adr/0126-lfs-direct-to-s3.md). s3store.Store implements it.
type Presigner interface {
	// PresignPut returns a URL for a PUT of exactly size bytes hashing to
	// sha256 at key, and the headers the client must send with them.
	PresignPut(ctx context.Context, key string, size int64, sha256 []byte, expires time.Duration) (string, http.Header, error)
	// PresignGet returns a URL for a GET of key.
	PresignGet(ctx context.Context, key string, expires time.Duration) (string, error)
}

// UploadHeader is the header of the verify action naming the upload it
// verifies: the random part of the temporary key its presigned PUT
// wrote.
const UploadHeader = "Ghost-Lfs-Upload"

// The errors of Repo.Verify, besides ErrNoObject, ErrBadOID,
// ErrTooLarge and ErrHashMismatch.
var (
	// ErrSizeMismatch: the uploaded object is not its declared size.
	ErrSizeMismatch = errors.New("the uploaded object is not its declared size: nothing was stored")
	// ErrBadUpload: the verify request names no upload ghost handed out.
	ErrBadUpload = errors.New(UploadHeader + " must be the upload's 32 hex digits from the batch answer")
)

// directKey is where a presigned PUT writes: under lfs/tmp/ like every
// temporary, so what is never verified is collected with them.
func directKey(upload string) string { return tempKey("direct-" + upload) }

// validUpload reports whether s is an upload name as uploadActions
// makes them: 32 lowercase hex digits.
func validUpload(s string) bool { return len(s) == 32 && validOID(s+s) }

func (h *Handler) expiresIn() int { return int(h.opts.PresignExpiry / time.Second) }

// downloadActions is a batch download's action: a presigned GET of the
// tenant's content-addressed object when direct, else the node's own URL.
// The caller has checked the repository's reference.
func (h *Handler) downloadActions(ctx context.Context, g access.Grant, oid, base string, header map[string]string) (map[string]*action, error) {
	if h.opts.Presigner == nil {
		return map[string]*action{"download": {Href: base + oid, Header: header}}, nil
	}
	u, err := h.opts.Presigner.PresignGet(ctx, objectKey(g.Tenant, oid), h.opts.PresignExpiry)
	if err != nil {
		return nil, err
	}
	return map[string]*action{"download": {Href: u, ExpiresIn: h.expiresIn()}}, nil
}

// uploadActions is a batch upload's actions: when direct, a presigned
// PUT to a fresh temporary key and a verify action at the node that
// names it; else a PUT to the node.
func (h *Handler) uploadActions(ctx context.Context, g access.Grant, o batchObject, base string, header map[string]string) (map[string]*action, error) {
	if h.opts.Presigner == nil {
		return map[string]*action{"upload": {Href: base + o.OID, Header: header}}, nil
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	upload := hex.EncodeToString(nonce[:])
	sum, _ := hex.DecodeString(o.OID) // validOID holds
	u, signed, err := h.opts.Presigner.PresignPut(ctx, directKey(upload), o.Size, sum, h.opts.PresignExpiry)
	if err != nil {
		return nil, err
	}
	put := make(map[string]string, len(signed))
	for k := range signed {
		put[k] = signed.Get(k)
	}
	verify := map[string]string{UploadHeader: upload}
	for k, v := range header {
		verify[k] = v
	}
	return map[string]*action{
		"upload": {Href: u, Header: put, ExpiresIn: h.expiresIn()},
		"verify": {Href: base + "verify", Header: verify},
	}, nil
}

// verify serves POST .../objects/verify ({"oid", "size"}): the object a
// presigned PUT wrote counts only once it passes Repo.Verify.
func (h *Handler) verify(w http.ResponseWriter, r *http.Request, rt route) {
	if mt, _, err := mimeType(r); err != nil || mt != MediaType {
		jsonError(w, http.StatusUnsupportedMediaType, "Content-Type must be "+MediaType)
		return
	}
	var o batchObject
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&o); err != nil {
		jsonError(w, http.StatusBadRequest, "malformed verify request: "+err.Error())
		return
	}
	g, ok := h.authorize(w, r, rt, true)
	if !ok {
		return
	}
	err := h.Repo(g).Verify(r.Context(), o.OID, o.Size, r.Header.Get(UploadHeader))
	switch {
	case err == nil:
		w.Header().Set("Content-Type", MediaType)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "{}\n")
	case errors.Is(err, ErrNoObject):
		jsonError(w, http.StatusNotFound, "object not uploaded: nothing was stored")
	case errors.Is(err, ErrHashMismatch), errors.Is(err, ErrSizeMismatch), errors.Is(err, ErrBadOID),
		errors.Is(err, ErrBadUpload), errors.Is(err, ErrTooLarge):
		jsonError(w, http.StatusUnprocessableEntity, err.Error())
	case errors.Is(err, ErrCollecting):
		jsonError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, ErrQuota):
		jsonError(w, http.StatusInsufficientStorage, err.Error())
	default:
		h.storeError(w, r, "verify upload", err)
	}
}

// Verify makes visible what a presigned PUT wrote for upload, once it is
// oid's bytes, size long (docs/adr/0126-lfs-direct-to-s3.md). A
// repository that holds the object already verifies without an upload
// (a retried verify); otherwise a missing upload is ErrNoObject.
//
// When the store vouches for the upload (trustStored: it reports a
// SHA-256 it checked on write, equal to the oid, and the signed size),
// Verify publishes straight from the upload's key without reading it:
// every body the presigned URL can write there hashes to the oid, since
// the URL signs that checksum and the store refuses a body that does not
// match it, so whichever of them the publishing copy finds is oid's
// bytes. Otherwise it reads the upload back: the client can still write
// the upload's key until its URL expires, so Verify first copies it,
// server-side, to a key of its own that nobody else can write, and
// checks (reading it back and hashing it, streaming) and publishes that
// copy, so that what was checked is what becomes visible.
func (r Repo) Verify(ctx context.Context, oid string, size int64, upload string) error {
	switch {
	case r.g.Level < access.Write:
		return ErrReadOnly
	case !validOID(oid):
		return ErrBadOID
	case size < 0:
		return fmt.Errorf("%w: size %d", ErrSizeMismatch, size)
	case size > r.h.opts.MaxObjectSize:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, size, r.h.opts.MaxObjectSize)
	case upload != "" && !validUpload(upload):
		return ErrBadUpload
	}
	held := func() error {
		switch got, err := r.Size(ctx, oid); {
		case err != nil:
			return err
		case got != size:
			return fmt.Errorf("%w: the repository holds it with %d bytes, not %d", ErrSizeMismatch, got, size)
		}
		return nil
	}
	if upload == "" {
		return held()
	}
	key := directKey(upload)
	trusted, err := r.trustStored(ctx, key, oid, size)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return held()
	case errors.Is(err, ErrHashMismatch), errors.Is(err, ErrSizeMismatch):
		r.h.removeTemp(key) // wrong for good
		return err
	case err != nil:
		return err
	case trusted:
		// The upload stays until the reference is written, for a
		// retried verify.
		err := r.publish(ctx, key, oid, size)
		if errors.Is(err, objstore.ErrNotFound) {
			return held() // a verify of the same upload published it first
		}
		if err == nil {
			r.h.removeTemp(key)
		}
		return err
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	own := tempKey(hex.EncodeToString(nonce[:]))
	err = r.h.opts.Store.Copy(ctx, key, own)
	if errors.Is(err, objstore.ErrNotFound) {
		return held()
	}
	if err != nil {
		r.h.removeTemp(own) // a copy may land and still report an error
		return fmt.Errorf("lfs: copy upload: %w", err)
	}
	if err := r.check(ctx, own, oid, size); err != nil {
		r.h.removeTemp(own)
		if errors.Is(err, ErrHashMismatch) || errors.Is(err, ErrSizeMismatch) {
			r.h.removeTemp(key) // wrong for good
		}
		return err
	}
	err = r.publish(ctx, own, oid, size)
	r.h.removeTemp(own)
	if err == nil {
		r.h.removeTemp(key) // kept until the reference is written, for a retry
	}
	return err
}

// ChecksumStore is a Presigner whose store can vouch for what a
// presigned PUT wrote without the node reading it back: the SHA-256 it
// checked the body against on write. s3store.Store implements it. A
// Presigner without it, or one whose store does not check the checksums
// it is sent, has every upload read back at verify
// (docs/adr/0126-lfs-direct-to-s3.md).
type ChecksumStore interface {
	// StoredSHA256 returns key's size and the SHA-256 of its whole body
	// as the store checked it on write; a nil sum when the store holds
	// none of that kind; objstore.ErrNotFound when key is missing.
	StoredSHA256(ctx context.Context, key string) (sum []byte, size int64, err error)
	// ChecksSHA256 reports whether the store refuses a body that does
	// not hash to the checksum sent with it, by trying one at key (which
	// nothing else names; it is deleted if it was taken). An error is no
	// answer.
	ChecksSHA256(ctx context.Context, key string) (bool, error)
}

// checksumTrust is what a Handler learnt of its store's checksums:
// whether it checks them, asked once (ChecksSHA256) and remembered.
type checksumTrust struct {
	answer atomic.Int32 // sumsUnknown, sumsChecked or sumsUnchecked
	probe  sync.Mutex   // held by the one probe under way
}

// The answers of checksumTrust.
const (
	sumsUnknown = iota
	sumsChecked
	sumsUnchecked
)

// storeChecks reports whether cs checks the checksums it stores. The
// first call asks it; verifies that come while that probe is under way
// do not wait for it (they read back), and a probe that gets no answer
// is not remembered: until one does, every upload is read back.
func (h *Handler) storeChecks(ctx context.Context, cs ChecksumStore) bool {
	switch h.sums.answer.Load() {
	case sumsChecked:
		return true
	case sumsUnchecked:
		return false
	}
	if !h.sums.probe.TryLock() {
		return false
	}
	defer h.sums.probe.Unlock()
	if a := h.sums.answer.Load(); a != sumsUnknown {
		return a == sumsChecked
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	checks, err := cs.ChecksSHA256(ctx, tempKey("checksum-probe-"+hex.EncodeToString(nonce[:])))
	switch {
	case err != nil:
		h.logger.Warn("lfs: cannot tell whether the store checks checksums; reading uploads back", "err", err)
		return false
	case checks:
		h.sums.answer.Store(sumsChecked)
	default:
		h.logger.Warn("lfs: the store keeps checksums it does not check; presigned uploads are read back at verify")
		h.sums.answer.Store(sumsUnchecked)
	}
	return checks
}

// trustStored reports whether the store vouches that key is oid's
// bytes, size long, without reading them: the Presigner is a
// ChecksumStore whose store checks checksums, and it reports for key a
// full-object SHA-256 equal to oid and size bytes. A sum it reports
// that is not oid's is ErrHashMismatch, another size ErrSizeMismatch
// (never published); false with no error is "cannot tell": read back.
func (r Repo) trustStored(ctx context.Context, key, oid string, size int64) (bool, error) {
	cs, ok := r.h.opts.Presigner.(ChecksumStore)
	if !ok || !r.h.storeChecks(ctx, cs) {
		return false, nil
	}
	sum, n, err := cs.StoredSHA256(ctx, key)
	switch {
	case err != nil:
		return false, fmt.Errorf("lfs: read the upload's checksum: %w", err)
	case n != size:
		return false, fmt.Errorf("%w: %d bytes, not %d", ErrSizeMismatch, n, size)
	case sum == nil:
		return false, nil
	case hex.EncodeToString(sum) != oid:
		return false, fmt.Errorf("%w: the store's checksum is %x, not %s", ErrHashMismatch, sum, oid)
	}
	return true, nil
}

// check reads key back, streaming, and reports whether it is size bytes
// hashing to oid.
func (r Repo) check(ctx context.Context, key, oid string, size int64) error {
	rc, info, err := r.h.opts.Store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("lfs: read upload back: %w", err)
	}
	defer rc.Close()
	if info.Size != size {
		return fmt.Errorf("%w: %d bytes, not %d", ErrSizeMismatch, info.Size, size)
	}
	hash := sha256.New()
	n, err := io.CopyBuffer(hash, io.LimitReader(rc, size+1), make([]byte, 256<<10))
	if err != nil {
		return fmt.Errorf("lfs: read upload back: %w", err)
	}
	if n != size {
		return fmt.Errorf("%w: read %d bytes, not %d", ErrSizeMismatch, n, size)
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != oid {
		return fmt.Errorf("%w: they hash to %s, not %s", ErrHashMismatch, got, oid)
	}
	return nil
}
