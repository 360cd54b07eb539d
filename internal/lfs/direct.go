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
// oid's bytes, size long (docs/adr/0126-lfs-direct-to-s3.md). The client
// can still write the upload's key until its URL expires, so Verify
// first copies it, server-side, to a key of its own that nobody else can
// write, and checks and publishes that copy: what was checked is what
// becomes visible. The check reads the copy back and hashes it,
// streaming. A repository that holds the object already verifies
// without an upload (a retried verify); otherwise a missing upload is
// ErrNoObject.
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
	var nonce [16]byte
	rand.Read(nonce[:])
	own := tempKey(hex.EncodeToString(nonce[:]))
	err := r.h.opts.Store.Copy(ctx, directKey(upload), own)
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
			r.h.removeTemp(directKey(upload)) // wrong for good
		}
		return err
	}
	if err := r.publish(ctx, own, oid, size); err != nil {
		return err
	}
	r.h.removeTemp(directKey(upload))
	return nil
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
