package lfs

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/record"
)

// The File Locking API (git-lfs docs/api/locking.md). A repository's
// locks are one record, lfs/locks/<repoID> (docs/design.md §2.3), written
// by compare-and-swap through internal/record; its size is bounded by
// MaxLocks.

// MaxLocks bounds the locks of one repository, and with it the record.
const MaxLocks = 10000

const (
	maxLockPath  = 4096
	maxLockBody  = 16 << 10
	defaultLimit = 100
	maxLimit     = 1000
)

func locksKey(repoID string) string { return "lfs/locks/" + repoID }

// Lock is one lock as the API shows it.
type Lock struct {
	ID       string    `json:"id"`
	Path     string    `json:"path"`
	LockedAt time.Time `json:"locked_at"`
	Owner    lockOwner `json:"owner"`
}

type lockOwner struct {
	Name string `json:"name"`
}

// lockSet is the record: the locks sorted by path, each path once.
type lockSet struct {
	Locks []Lock `json:"locks"`
}

var lockCodec = func() record.Codec[lockSet] {
	c := record.JSON[lockSet]()
	c.Max = 8 << 20
	return c
}()

// ownerName is the caller's tenant (Grant.Actor): a lock belongs to the
// tenant, whichever of its tokens took it.
func ownerName(g access.Grant) string { return g.Actor }

// locks serves /locks, /locks/verify and /locks/<id>/unlock (rest is
// what follows "locks").
func (h *Handler) locks(w http.ResponseWriter, r *http.Request, rt route, rest string) {
	switch {
	case rest == "" && r.Method == http.MethodGet:
		if g, ok := h.authorize(w, r, rt, false); ok {
			h.listLocks(w, r, g)
		}
	case rest == "" && r.Method == http.MethodPost:
		if g, ok := h.lockRequest(w, r, rt); ok {
			h.createLock(w, r, g)
		}
	case rest == "/verify" && r.Method == http.MethodPost:
		if g, ok := h.lockRequest(w, r, rt); ok {
			h.verifyLocks(w, r, g)
		}
	case strings.HasPrefix(rest, "/") && strings.HasSuffix(rest, "/unlock") && r.Method == http.MethodPost:
		id := strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/unlock")
		if !validLockID(id) {
			jsonError(w, http.StatusNotFound, "lock not found")
			return
		}
		if g, ok := h.lockRequest(w, r, rt); ok {
			h.unlock(w, r, g, id)
		}
	case rest == "" || rest == "/verify" || strings.HasSuffix(rest, "/unlock"):
		jsonError(w, http.StatusMethodNotAllowed, "method not allowed")
	default:
		jsonError(w, http.StatusNotFound, "not found")
	}
}

// lockRequest checks a POST's type and the caller's write access: taking,
// verifying and releasing locks is for those who may push.
func (h *Handler) lockRequest(w http.ResponseWriter, r *http.Request, rt route) (access.Grant, bool) {
	if mt, _, err := mimeType(r); err != nil || mt != MediaType {
		jsonError(w, http.StatusUnsupportedMediaType, "Content-Type must be "+MediaType)
		return access.Grant{}, false
	}
	return h.authorize(w, r, rt, true)
}

func validLockID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

func (h *Handler) decodeLockBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxLockBody)).Decode(v); err != nil {
		jsonError(w, http.StatusBadRequest, "malformed request: "+err.Error())
		return false
	}
	return true
}

func (h *Handler) readLocks(w http.ResponseWriter, r *http.Request, g access.Grant) ([]Lock, bool) {
	locks, err := h.Repo(g).Locks(r.Context())
	if err != nil {
		h.storeError(w, r, "read locks", err)
		return nil, false
	}
	return locks, true
}

func (h *Handler) createLock(w http.ResponseWriter, r *http.Request, g access.Grant) {
	var req struct {
		Path string `json:"path"`
	}
	if !h.decodeLockBody(w, r, &req) {
		return
	}
	mine, err := h.Repo(g).CreateLock(r.Context(), req.Path)
	var exists *LockExistsError
	switch {
	case errors.As(err, &exists):
		writeJSON(w, http.StatusConflict, map[string]any{"lock": exists.Lock, "message": "already created lock"})
	case errors.Is(err, ErrBadLockPath), errors.Is(err, ErrTooManyLocks):
		jsonError(w, http.StatusUnprocessableEntity, err.Error())
	case err != nil:
		h.storeError(w, r, "write locks", err)
	default:
		writeJSON(w, http.StatusCreated, map[string]any{"lock": mine})
	}
}

// page returns locks after cursor (a path), up to limit, and the next
// cursor ("" at the end).
func page(locks []Lock, cursor string, limit int) ([]Lock, string) {
	i, found := slices.BinarySearchFunc(locks, cursor, func(l Lock, p string) int { return strings.Compare(l.Path, p) })
	if cursor != "" && found {
		i++
	}
	locks = locks[i:]
	if len(locks) > limit {
		return locks[:limit], locks[limit-1].Path
	}
	return locks, ""
}

func parseLimit(s string) (int, bool) {
	if s == "" {
		return defaultLimit, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, false
	}
	return min(n, maxLimit), true
}

func (h *Handler) listLocks(w http.ResponseWriter, r *http.Request, g access.Grant) {
	q := r.URL.Query()
	limit, ok := parseLimit(q.Get("limit"))
	if !ok {
		jsonError(w, http.StatusBadRequest, "limit must be a positive integer")
		return
	}
	all, ok := h.readLocks(w, r, g)
	if !ok {
		return
	}
	if p, id := q.Get("path"), q.Get("id"); p != "" || id != "" {
		all = slices.DeleteFunc(slices.Clone(all), func(l Lock) bool { return p != "" && l.Path != p || id != "" && l.ID != id })
	}
	out, next := page(all, q.Get("cursor"), limit)
	writeJSON(w, http.StatusOK, map[string]any{"locks": nonNil(out), "next_cursor": next})
}

func (h *Handler) verifyLocks(w http.ResponseWriter, r *http.Request, g access.Grant) {
	var req struct {
		Cursor string `json:"cursor"`
		Limit  int    `json:"limit"`
	}
	if !h.decodeLockBody(w, r, &req) {
		return
	}
	limit := defaultLimit
	if req.Limit > 0 {
		limit = min(req.Limit, maxLimit)
	}
	all, ok := h.readLocks(w, r, g)
	if !ok {
		return
	}
	out, next := page(all, req.Cursor, limit)
	ours, theirs := []Lock{}, []Lock{}
	me := ownerName(g)
	for _, l := range out {
		if l.Owner.Name == me {
			ours = append(ours, l)
		} else {
			theirs = append(theirs, l)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"ours": ours, "theirs": theirs, "next_cursor": next})
}

// unlock releases lock id: its owner may, and any writer with force.
func (h *Handler) unlock(w http.ResponseWriter, r *http.Request, g access.Grant, id string) {
	var req struct {
		Force bool `json:"force"`
	}
	if !h.decodeLockBody(w, r, &req) {
		return
	}
	lock, err := h.Repo(g).Unlock(r.Context(), id, req.Force)
	switch {
	case errors.Is(err, ErrNoLock):
		jsonError(w, http.StatusNotFound, "lock not found")
	case errors.Is(err, ErrNotLockOwner):
		jsonError(w, http.StatusForbidden, fmt.Sprintf("the lock on %s belongs to %s: unlock with --force to break it", lock.Path, lock.Owner.Name))
	case err != nil:
		h.storeError(w, r, "write locks", err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"lock": lock})
	}
}

func nonNil(l []Lock) []Lock {
	if l == nil {
		return []Lock{}
	}
	return l
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", MediaType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
