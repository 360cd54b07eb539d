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
	"slices"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// The errors of Repo's operations, which both transports (the HTTP API
// and the pure SSH protocol, docs/adr/0125-lfs-transfer-over-ssh.md)
// turn into their own status codes. Their messages are meant for the
// client; errors that match none of them (storage failures) are not.
var (
	// ErrNoObject: the repository holds no such object.
	ErrNoObject = errors.New("object does not exist")
	// ErrTooLarge: the object is over the per-object size limit.
	ErrTooLarge = errors.New("object larger than the limit")
	// ErrCut: the upload ended before its declared size.
	ErrCut = errors.New("upload cut short: nothing was stored")
	// ErrOverrun: the upload went on past its declared size.
	ErrOverrun = errors.New("upload longer than its declared size: nothing was stored")
	// ErrHashMismatch: the uploaded bytes do not hash to the oid.
	ErrHashMismatch = errors.New("the uploaded bytes do not hash to the oid: nothing was stored")
	// ErrBadOID: not a sha256 in lowercase hex.
	ErrBadOID = errors.New("oid must be a sha256 in lowercase hex")
	// ErrNoLock: the repository holds no lock of that id.
	ErrNoLock = errors.New("lock not found")
	// ErrNotLockOwner: the lock is another tenant's and force was not asked.
	ErrNotLockOwner = errors.New("the lock belongs to someone else")
	// ErrTooManyLocks: the repository holds MaxLocks locks already.
	ErrTooManyLocks = fmt.Errorf("a repository holds at most %d locks", MaxLocks)
	// ErrBadLockPath: empty, too long, or holding a NUL.
	ErrBadLockPath = fmt.Errorf("path must be 1 to %d bytes without NUL", maxLockPath)
	// ErrReadOnly: the grant does not allow writing (a caller bug: the
	// transports decide write access before they get this far).
	ErrReadOnly = errors.New("write access required")
)

// LockExistsError reports that the path is locked already, by Lock.
type LockExistsError struct{ Lock Lock }

func (e *LockExistsError) Error() string {
	return fmt.Sprintf("%s is locked already by %s", e.Lock.Path, e.Lock.Owner.Name)
}

// Repo is one repository's LFS objects and locks, as seen by a caller
// holding g: the operations both transports share, so that an object or
// a lock looks the same whichever one wrote it (docs/design.md §7.10).
// Authorization is the transport's: Repo only refuses writing to a grant
// below access.Write, as a second line.
type Repo struct {
	h *Handler
	g access.Grant
}

// Repo returns the view of g's repository.
func (h *Handler) Repo(g access.Grant) Repo { return Repo{h: h, g: g} }

// MaxBatchItems is the most objects one batch may name, on either
// transport.
func (h *Handler) MaxBatchItems() int { return h.opts.MaxBatchItems }

// MaxObjectSize is the largest object Put accepts.
func (r Repo) MaxObjectSize() int64 { return r.h.opts.MaxObjectSize }

// Owner is the name locks taken by this caller carry.
func (r Repo) Owner() string { return ownerName(r.g) }

// ValidOID reports whether oid is a sha256 in lowercase hex.
func ValidOID(oid string) bool { return validOID(oid) }

// Size returns the size of oid in the repository, or ErrNoObject.
func (r Repo) Size(ctx context.Context, oid string) (int64, error) {
	if !validOID(oid) {
		return 0, ErrBadOID
	}
	ref, err := r.h.ref(ctx, r.g.RepoID, oid)
	if errors.Is(err, objstore.ErrNotFound) {
		return 0, ErrNoObject
	}
	if err != nil {
		return 0, err
	}
	return ref.Size, nil
}

// Open opens oid's bytes for reading and returns their size, or
// ErrNoObject. The caller closes the reader.
func (r Repo) Open(ctx context.Context, oid string) (io.ReadCloser, int64, error) {
	size, err := r.Size(ctx, oid)
	if err != nil {
		return nil, 0, err
	}
	rc, info, err := r.h.opts.Store.Get(ctx, objectKey(r.g.Tenant, oid))
	if err != nil {
		return nil, 0, err // a reference always follows its object
	}
	if info.Size != size {
		rc.Close()
		return nil, 0, fmt.Errorf("lfs: object %s is %d bytes, its reference says %d", oid, info.Size, size)
	}
	return rc, size, nil
}

// Put streams body, which must be exactly size bytes, to a temporary key,
// hashing it, and makes it visible (the object's key, then the
// repository's reference) only when its size and sha256 are oid's: a cut,
// overlong or wrong upload leaves nothing visible (ErrCut, ErrOverrun,
// ErrHashMismatch). Memory stays flat whatever the size.
func (r Repo) Put(ctx context.Context, oid string, size int64, body io.Reader) error {
	switch {
	case r.g.Level < access.Write:
		return ErrReadOnly
	case !validOID(oid):
		return ErrBadOID
	case size < 0:
		return fmt.Errorf("%w: size %d", ErrCut, size)
	case size > r.h.opts.MaxObjectSize:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, size, r.h.opts.MaxObjectSize)
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	tmp := tempKey(hex.EncodeToString(nonce[:]))
	hash := sha256.New()
	cr := &countingReader{r: io.LimitReader(body, size), h: hash}
	_, err := r.h.opts.Store.Put(ctx, tmp, cr, size)
	if err == nil && cr.n != size {
		err = fmt.Errorf("read %d of %d bytes: %w", cr.n, size, io.ErrUnexpectedEOF)
	}
	if err != nil {
		r.h.removeTemp(tmp)
		if cr.n < size || ctx.Err() != nil {
			return fmt.Errorf("%w (%d of %d bytes): %w", ErrCut, cr.n, size, err)
		}
		return fmt.Errorf("lfs: store upload: %w", err)
	}
	// The body must end here: more bytes than declared is not the object.
	var one [1]byte
	switch n, err := io.ReadFull(body, one[:]); {
	case n > 0:
		r.h.removeTemp(tmp)
		return ErrOverrun
	case err != io.EOF:
		r.h.removeTemp(tmp)
		return fmt.Errorf("%w: after its %d bytes: %w", ErrCut, size, err)
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != oid {
		r.h.removeTemp(tmp)
		return fmt.Errorf("%w: they hash to %s, not %s", ErrHashMismatch, got, oid)
	}
	err = r.publish(ctx, tmp, oid, size)
	r.h.removeTemp(tmp) // published or not, it is not needed again
	return err
}

// publish makes a verified temporary visible: it admits the object
// (the tenant's quota, and GC's fence, docs/adr/0129-lfs-gc.md), copies
// it to the object's key, then writes the repository's reference, so
// that a reference never names a missing object
// (docs/adr/0104-lfs-storage.md). A refused admission publishes nothing.
// The temporary is the caller's to remove, or to keep until the
// reference is written, for a retry (a presigned upload, direct.go).
func (r Repo) publish(ctx context.Context, tmp, oid string, size int64) error {
	if err := r.h.admit(ctx, r.g.Tenant, oid, size); err != nil {
		return err
	}
	if err := r.h.opts.Store.Copy(ctx, tmp, objectKey(r.g.Tenant, oid)); err != nil {
		return fmt.Errorf("lfs: store object: %w", err)
	}
	b, _ := json.Marshal(refRecord{Size: size})
	if _, err := r.h.opts.Store.Put(ctx, refKey(r.g.RepoID, oid), strings.NewReader(string(b)), int64(len(b))); err != nil {
		return fmt.Errorf("lfs: store reference: %w", err)
	}
	return nil
}

// Locks returns the repository's locks, sorted by path.
func (r Repo) Locks(ctx context.Context) ([]Lock, error) {
	set, _, err := record.Get(ctx, r.h.opts.Store, lockCodec, locksKey(r.g.RepoID))
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return set.Locks, nil
}

// CreateLock locks path for the caller's tenant; a path locked already
// is a *LockExistsError naming the lock that holds it.
func (r Repo) CreateLock(ctx context.Context, path string) (Lock, error) {
	if r.g.Level < access.Write {
		return Lock{}, ErrReadOnly
	}
	if path == "" || len(path) > maxLockPath || strings.ContainsRune(path, 0) {
		return Lock{}, ErrBadLockPath
	}
	var id [16]byte
	rand.Read(id[:])
	mine := Lock{ID: hex.EncodeToString(id[:]), Path: path, LockedAt: time.Now().UTC().Truncate(time.Second), Owner: lockOwner{ownerName(r.g)}}
	var held Lock
	_, err := record.Update(ctx, r.h.opts.Store, lockCodec, locksKey(r.g.RepoID), record.Options{}, func(cur *lockSet) (*lockSet, error) {
		var locks []Lock
		if cur != nil {
			locks = cur.Locks
		}
		i, found := slices.BinarySearchFunc(locks, path, func(l Lock, p string) int { return strings.Compare(l.Path, p) })
		switch {
		case found && locks[i].ID == mine.ID:
			return nil, nil // ours landed
		case found:
			held = locks[i]
			return nil, &LockExistsError{held}
		case len(locks) >= MaxLocks:
			return nil, ErrTooManyLocks
		}
		return &lockSet{Locks: slices.Insert(slices.Clone(locks), i, mine)}, nil
	})
	if err != nil {
		return Lock{}, err
	}
	return mine, nil
}

// Unlock releases lock id: its owner may, and any writer with force
// (ErrNotLockOwner otherwise). It returns the lock released.
func (r Repo) Unlock(ctx context.Context, id string, force bool) (Lock, error) {
	if r.g.Level < access.Write {
		return Lock{}, ErrReadOnly
	}
	if !validLockID(id) {
		return Lock{}, ErrNoLock
	}
	all, err := r.Locks(ctx)
	if err != nil {
		return Lock{}, err
	}
	i := slices.IndexFunc(all, func(l Lock) bool { return l.ID == id })
	if i < 0 {
		return Lock{}, ErrNoLock
	}
	lock := all[i]
	if lock.Owner.Name != ownerName(r.g) && !force {
		return lock, fmt.Errorf("%w: the lock on %s belongs to %s: unlock with --force to break it", ErrNotLockOwner, lock.Path, lock.Owner.Name)
	}
	_, err = record.Update(ctx, r.h.opts.Store, lockCodec, locksKey(r.g.RepoID), record.Options{}, func(cur *lockSet) (*lockSet, error) {
		if cur == nil {
			return nil, nil
		}
		j := slices.IndexFunc(cur.Locks, func(l Lock) bool { return l.ID == id })
		if j < 0 {
			return nil, nil // gone: ours landed, or someone else's unlock
		}
		return &lockSet{Locks: slices.Delete(slices.Clone(cur.Locks), j, j+1)}, nil
	})
	if err != nil {
		return Lock{}, err
	}
	return lock, nil
}

// Page returns the locks after cursor (a path), up to limit, and the
// next cursor ("" at the end): the paging both lock APIs share.
func Page(locks []Lock, cursor string, limit int) ([]Lock, string) { return page(locks, cursor, limit) }

// ParseLimit parses a lock listing's limit: "" is the default, anything
// else a positive integer, capped.
func ParseLimit(s string) (int, bool) { return parseLimit(s) }

// StoreUnavailable reports whether err is a storage outage the client
// should retry, not a fault.
func StoreUnavailable(err error) bool {
	return errors.Is(err, objstore.ErrUnavailable) || errors.Is(err, record.ErrContention)
}
