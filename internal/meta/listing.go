package meta

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
	"github.com/ghost-scm/ghost/internal/wal"
)

// Listing keys (docs/adr/0027-listing-keys.md). A page of a tenant's
// repositories, or of the tenants, is one LIST: what the page shows is
// in the keys, so no record is read for it.
//
//	meta/repolist/<owner>/<name>,<fields>    one or more per repository name
//	meta/tenantlist/<tenant>,<fields>        one or more per tenant name
//	meta/listing-v1                          every record has its keys
//
// The record stays the truth. Every write of a record first PUTs an
// *intent* key describing the record it is about to write, then writes
// the record, then PUTs the *final* key and deletes the keys it replaced.
// A lister trusts a name only when its one key is a final one; a name
// with an intent or several keys (a write in flight, or one that crashed
// or failed between its steps) costs one GET of the record, which decides,
// and the lister tidies the keys as the writer would have.
//
// The fields are comma-separated ("," sorts below every byte of a name,
// so keys sort by name): the format version, the state ("i" intent, "f"
// final, "d" a tenant's deletion), then for a repository its generation
// (one more at every write of its record), the nonce of the write, the
// flags (1 public, 2 push protection, 4 deleted), its creation and the
// write's time in Unix milliseconds, its log id, its name and owner as
// displayed, and the owner and name it was forked from; for a tenant the
// nonce, its kind ("user" or "org"), the two times and its name as
// displayed. A key is at most about 820 bytes.
const (
	repoListPrefix   = "meta/repolist/"
	tenantListPrefix = "meta/tenantlist/"
	listingMarkerKey = "meta/listing-v1"
	listingVersion   = "1"

	stateIntent  = "i"
	stateFinal   = "f"
	stateDeleted = "d"

	// listNonceLen is how much of a record's nonce a key carries: enough
	// to tell racing writes of one name apart.
	listNonceLen = 12

	// staleIntent is the age past which an intent that no record
	// matches is dropped: its write is long over (a request's context is
	// bounded in minutes, and S3 refuses requests signed more than 15
	// minutes ago), and clocks would have to differ by most of a day.
	staleIntent = 24 * time.Hour

	// maxListCalls bounds the LIST requests one page makes, so that a
	// page of public repositories of a tenant whose repositories are
	// mostly private, or a name with many stray keys, stays bounded; the
	// page then comes back short with a cursor.
	maxListCalls = 4

	// DefaultPageSize and MaxPageSize bound the pages of ListRepoPage and
	// ListTenantPage.
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// listFlags of a repository entry.
const (
	flagPublic = 1 << iota
	flagPushProtection
	flagDeleted
)

// pastLast is appended to a name to start a LIST after every key of that
// name: "," is the separator, and "~" sorts above every byte the first
// field can start with.
const pastLast = ",~"

// newNonce returns 128 random bits in hex. crypto/rand.Read never fails
// (it does not return when the system's generator does not answer).
func newNonce() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	return hex.EncodeToString(raw[:])
}

func listNonce(n string) string { return n[:min(len(n), listNonceLen)] }

// repoEntry is what a repository listing key says.
type repoEntry struct {
	owner, name  string // key forms (lower case)
	state        string
	gen          uint64
	nonce        string
	flags        int
	created      int64 // Unix ms
	written      int64 // Unix ms
	id           string
	display      string // the name as displayed
	ownerDisplay string // the owner as displayed
	forkOwner    string
	forkName     string
}

func repoEntryOf(r *repoRecord, state string, written time.Time) repoEntry {
	e := repoEntry{
		owner: lower(r.Owner), name: lower(r.Name), state: state, gen: r.Gen, nonce: listNonce(r.Nonce),
		created: r.CreatedAt.UnixMilli(), written: written.UnixMilli(), id: r.ID, display: r.Name, ownerDisplay: r.Owner,
	}
	if r.Public {
		e.flags |= flagPublic
	}
	if r.PushProtection {
		e.flags |= flagPushProtection
	}
	if r.Deleted {
		e.flags |= flagDeleted
	}
	e.forkOwner, e.forkName, _ = strings.Cut(r.ForkedFrom, "/")
	return e
}

func (e repoEntry) key() string {
	return repoListPrefix + e.owner + "/" + e.name + "," + strings.Join([]string{
		listingVersion, e.state, strconv.FormatUint(e.gen, 10), e.nonce, strconv.Itoa(e.flags),
		strconv.FormatInt(e.created, 10), strconv.FormatInt(e.written, 10), e.id, e.display, e.ownerDisplay,
		e.forkOwner, e.forkName,
	}, ",")
}

// describes reports whether e was written for the record r: the same
// generation and the same write.
func (e repoEntry) describes(r *repoRecord) bool {
	return e.gen == r.Gen && e.nonce == listNonce(r.Nonce)
}

func (e repoEntry) repo() Repo {
	r := Repo{
		ID: e.id, Owner: e.ownerDisplay, Name: e.display, Public: e.flags&flagPublic != 0,
		CreatedAt: time.UnixMilli(e.created).UTC(), PushProtection: e.flags&flagPushProtection != 0,
	}
	if e.forkOwner != "" {
		r.ForkedFrom = e.forkOwner + "/" + e.forkName
	}
	return r
}

// parseRepoEntry reads a repository listing key, refusing anything ghost
// does not write.
func parseRepoEntry(key string) (repoEntry, bool) {
	rest, ok := strings.CutPrefix(key, repoListPrefix)
	if !ok {
		return repoEntry{}, false
	}
	path, fields, ok := strings.Cut(rest, ",")
	if !ok {
		return repoEntry{}, false
	}
	var e repoEntry
	e.owner, e.name, ok = strings.Cut(path, "/")
	f := strings.Split(fields, ",")
	if !ok || len(f) != 12 || f[0] != listingVersion || !keyForm(e.owner) || !keyForm(e.name) {
		return repoEntry{}, false
	}
	e.state, e.nonce, e.id, e.display, e.ownerDisplay, e.forkOwner, e.forkName = f[1], f[3], f[7], f[8], f[9], f[10], f[11]
	var err1, err2, err3, err4 error
	e.gen, err1 = strconv.ParseUint(f[2], 10, 64)
	e.flags, err2 = strconv.Atoi(f[4])
	e.created, err3 = strconv.ParseInt(f[5], 10, 64)
	e.written, err4 = strconv.ParseInt(f[6], 10, 64)
	switch {
	case errors.Join(err1, err2, err3, err4) != nil, e.flags < 0, e.flags > 7,
		e.state != stateIntent && e.state != stateFinal, !hexNonce(e.nonce),
		wal.CheckRepoID(e.id) != nil, !sameName(e.display, e.name) || ValidateName(e.display) != nil,
		!sameName(e.ownerDisplay, e.owner) || ValidateName(e.ownerDisplay) != nil,
		(e.forkOwner == "") != (e.forkName == ""),
		e.forkOwner != "" && (ValidateName(e.forkOwner) != nil || ValidateName(e.forkName) != nil):
		return repoEntry{}, false
	}
	return e, true
}

// keyForm reports whether s is a name as keys spell it.
func keyForm(s string) bool { return ValidateName(s) == nil && s == lower(s) }

func hexNonce(s string) bool {
	if len(s) > listNonceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// tenantEntry is what a tenant listing key says.
type tenantEntry struct {
	name    string // key form
	state   string
	nonce   string
	kind    string
	created int64
	written int64
	display string
}

func tenantEntryOf(t *tenantRecord, state string, written time.Time) tenantEntry {
	return tenantEntry{name: lower(t.Name), state: state, nonce: listNonce(t.Nonce), kind: t.Kind,
		created: t.CreatedAt.UnixMilli(), written: written.UnixMilli(), display: t.Name}
}

func (e tenantEntry) key() string {
	return tenantListPrefix + e.name + "," + strings.Join([]string{
		listingVersion, e.state, e.nonce, e.kind, strconv.FormatInt(e.created, 10), strconv.FormatInt(e.written, 10), e.display,
	}, ",")
}

func (e tenantEntry) describes(t *tenantRecord) bool { return e.nonce == listNonce(t.Nonce) }

func (e tenantEntry) tenant() Tenant {
	return Tenant{Name: e.display, Kind: e.kind, CreatedAt: time.UnixMilli(e.created).UTC()}
}

func parseTenantEntry(key string) (tenantEntry, bool) {
	rest, ok := strings.CutPrefix(key, tenantListPrefix)
	if !ok {
		return tenantEntry{}, false
	}
	var e tenantEntry
	var fields string
	e.name, fields, ok = strings.Cut(rest, ",")
	f := strings.Split(fields, ",")
	if !ok || len(f) != 7 || f[0] != listingVersion || !keyForm(e.name) {
		return tenantEntry{}, false
	}
	e.state, e.nonce, e.kind, e.display = f[1], f[2], f[3], f[6]
	var err1, err2 error
	e.created, err1 = strconv.ParseInt(f[4], 10, 64)
	e.written, err2 = strconv.ParseInt(f[5], 10, 64)
	switch {
	case errors.Join(err1, err2) != nil, e.state != stateIntent && e.state != stateFinal && e.state != stateDeleted,
		!hexNonce(e.nonce), e.kind != KindUser && e.kind != KindOrg,
		!sameName(e.display, e.name) || ValidateName(e.display) != nil:
		return tenantEntry{}, false
	}
	return e, true
}

// putKey writes an empty listing key.
func (s *Store) putKey(ctx context.Context, key string) error {
	if _, err := s.objects.Put(ctx, key, strings.NewReader(""), 0); err != nil {
		return fmt.Errorf("write listing key: %w", err)
	}
	return nil
}

// deleteKeys deletes listing keys in order, and stops at the first that
// fails: the order (finalsFirst) is what keeps a name that lost some of
// its keys from ever showing a dead final key alone.
func (s *Store) deleteKeys(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := s.objects.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete listing key: %w", err)
		}
	}
	return nil
}

// listName returns every listing key of one name: the keys under
// prefix+name+",".
func (s *Store) listName(ctx context.Context, prefix, name string) ([]string, error) {
	return s.listKeys(ctx, prefix+name+",")
}

// settleTimeout bounds a lister's tidying of the keys of a name after it
// read the record: a final key it writes from what it read lands within
// it, far inside the day a deletion's final key stays
// (settleRepoKeys).
const settleTimeout = time.Minute

func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, settleTimeout)
}

// afterWrite is a detached, bounded context for the steps that follow a
// record write: the write has happened whatever the caller's context
// does now, and its listing should catch up.
func afterWrite() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), releaseTimeout)
}

// --- repositories: the write protocol ---

// announceRepo makes next the record's next version (the generation after
// prev, a fresh nonce) and writes its intent key, which it returns. When
// it fails the record must not be written.
func (s *Store) announceRepo(ctx context.Context, next *repoRecord, prev uint64) (string, error) {
	next.Gen = prev + 1
	next.Nonce = newNonce()
	key := repoEntryOf(next, stateIntent, s.now()).key()
	if err := s.putKey(ctx, key); err != nil {
		return "", fmt.Errorf("repository %s: %w", next.repo().FullName(), err)
	}
	return key, nil
}

// finishRepo follows a write of rec that landed: its final key (unless it
// is a tombstone), and the keys it replaced gone. Best effort: a lister
// that finds the intent still there reads the record and does the same.
func (s *Store) finishRepo(rec *repoRecord) {
	ctx, cancel := afterWrite()
	defer cancel()
	keys, err := s.listName(ctx, repoListPrefix+lower(rec.Owner)+"/", lower(rec.Name))
	if err != nil {
		return
	}
	_ = s.settleRepoKeys(ctx, parseRepoKeys(keys), rec)
}

// abandon deletes the intent key of a write that certainly did not land
// and never will (a lost compare-and-swap, a name already taken). Best
// effort: a stray intent costs listers one read until it is tidied.
func (s *Store) abandon(intent string) {
	ctx, cancel := afterWrite()
	defer cancel()
	_ = s.objects.Delete(ctx, intent)
}

func parseRepoKeys(keys []string) []repoEntry {
	out := make([]repoEntry, 0, len(keys))
	for _, k := range keys {
		if e, ok := parseRepoEntry(k); ok {
			out = append(out, e)
		}
	}
	return out
}

// settleRepoKeys makes the listing keys of one name agree with rec, its
// record as read or as just written (nil: there is none):
//
//   - keys of earlier generations, and keys of rec's generation written
//     by another write (which lost its compare-and-swap), are dead;
//   - rec's own final key stays: written here if missing (an intent whose
//     writer stopped before it), and then its intent goes. A tombstone's
//     final key (flag deleted) stays a day, so that a writer or lister
//     lagging behind the delete, which may still write the final key of
//     the live record it saw, never leaves that key alone; listers hide
//     it, and delete it once it is a day old;
//   - keys of later generations belong to writes in flight, and stay
//     until they are a day old.
//
// rec may lag the record (a writer tidying after its own write, which
// another has since replaced): then it keeps keys that are dead, or
// writes a final key beside the later write's, never leaving a name with
// one wrong key; the next lister reads the record and finishes.
func (s *Store) settleRepoKeys(ctx context.Context, entries []repoEntry, rec *repoRecord) error {
	now := s.now().UnixMilli()
	var dead []string
	final, own := false, false
	for _, e := range entries {
		old := now-e.written > staleIntent.Milliseconds()
		switch {
		case rec != nil && (e.gen < rec.Gen || e.gen == rec.Gen && !e.describes(rec)):
			dead = append(dead, e.key())
		case rec != nil && e.gen == rec.Gen:
			own = true
			if e.state == stateFinal && !(rec.Deleted && old) {
				final = true
			} else {
				dead = append(dead, e.key())
			}
		case old:
			dead = append(dead, e.key())
		}
	}
	// A live record needs its final key; a tombstone only while its own
	// delete is being finished (its intent is here), not once its final
	// key has aged out.
	if rec != nil && !final && (!rec.Deleted || own) && !(rec.Deleted && allOld(entries, rec, now)) {
		if err := s.putKey(ctx, repoEntryOf(rec, stateFinal, s.now()).key()); err != nil {
			return err // keep the intent: the name must not lose its last key
		}
	}
	return s.deleteKeys(ctx, finalsFirst(dead))
}

// allOld reports whether every key of rec's own write is a day old.
func allOld(entries []repoEntry, rec *repoRecord, now int64) bool {
	for _, e := range entries {
		if e.describes(rec) && now-e.written <= staleIntent.Milliseconds() {
			return false
		}
	}
	return true
}

// finalsFirst orders dead keys for deletion: final keys first, so that a
// deletion that stops half way never leaves a dead final key alone, which
// a lister would trust; an intent left behind only costs it a read.
func finalsFirst(keys []string) []string {
	var finals, rest []string
	for _, k := range keys {
		_, fields, _ := strings.Cut(k, ",")
		if strings.HasPrefix(fields, listingVersion+","+stateFinal+",") {
			finals = append(finals, k)
		} else {
			rest = append(rest, k)
		}
	}
	return append(finals, rest...)
}

// --- tenants: the write protocol ---

// announceTenant gives t a fresh nonce and writes its intent key.
func (s *Store) announceTenant(ctx context.Context, t *tenantRecord) (string, error) {
	t.Nonce = newNonce()
	key := tenantEntryOf(t, stateIntent, s.now()).key()
	if err := s.putKey(ctx, key); err != nil {
		return "", fmt.Errorf("tenant %s: %w", t.Name, err)
	}
	return key, nil
}

// finishTenant follows a create (t) or a delete (t nil) of the tenant
// name key that landed.
func (s *Store) finishTenant(key string, t *tenantRecord) {
	ctx, cancel := afterWrite()
	defer cancel()
	keys, err := s.listName(ctx, tenantListPrefix, key)
	if err != nil {
		return
	}
	_ = s.settleTenantKeys(ctx, parseTenantKeys(keys), t)
}

func parseTenantKeys(keys []string) []tenantEntry {
	out := make([]tenantEntry, 0, len(keys))
	for _, k := range keys {
		if e, ok := parseTenantEntry(k); ok {
			out = append(out, e)
		}
	}
	return out
}

// settleTenantKeys makes the listing keys of one tenant name agree with
// t, its record (nil: there is none). A tenant record is only ever
// created and deleted, never changed, and its nonce names its creation:
//
//   - a final key is written once its record exists, so one that t does
//     not describe belongs to a deleted incarnation, and is dead;
//   - t's own final key stays (written here if its creator stopped
//     before), and its intent goes;
//   - a deletion announces itself with a key ("d") naming the record it
//     deletes. While that record exists the deletion is in flight (or
//     failed) and the key stays; once there is no record it is the
//     deletion's final key, which stays a day (as a repository's
//     tombstone key does, against a lagging writer of the old final key),
//     hidden by listers; under a later incarnation it is dead;
//   - any other intent may belong to a create still in flight, and
//     stays until it is a day old.
func (s *Store) settleTenantKeys(ctx context.Context, entries []tenantEntry, t *tenantRecord) error {
	now := s.now().UnixMilli()
	var dead []string
	final := false
	for _, e := range entries {
		old := now-e.written > staleIntent.Milliseconds()
		switch {
		case e.state == stateFinal && t != nil && e.describes(t):
			final = true
		case e.state == stateFinal, e.state == stateIntent && t != nil && e.describes(t),
			e.state == stateDeleted && t != nil && !e.describes(t):
			dead = append(dead, e.key())
		case old:
			dead = append(dead, e.key())
		}
	}
	if t != nil && !final {
		if err := s.putKey(ctx, tenantEntryOf(t, stateFinal, s.now()).key()); err != nil {
			return err
		}
	}
	return s.deleteKeys(ctx, finalsFirst(dead))
}

// --- reading ---

// listingState remembers that the listing is complete (listingMarkerKey
// exists), which is never undone.
type listingState struct{ ready atomic.Bool }

// listingReady reports whether every record has its listing keys, so that
// lists may be read from them. Until an installation that predates them
// has run BuildListings, lists read the records, as they used to. An
// installation without tenants (a new one) has nothing to build: the
// marker is written at once, and every record written from then on comes
// with its keys.
func (s *Store) listingReady(ctx context.Context) (bool, error) {
	if s.listing.ready.Load() {
		return true, nil
	}
	rc, _, err := s.objects.Get(ctx, listingMarkerKey)
	switch {
	case err == nil:
		rc.Close()
		s.listing.ready.Store(true)
		return true, nil
	case !errors.Is(err, objstore.ErrNotFound):
		return false, fmt.Errorf("read %s: %w", listingMarkerKey, err)
	}
	page, err := s.objects.List(ctx, tenantsPrefix, "", 1)
	if err != nil {
		return false, fmt.Errorf("list %s: %w", tenantsPrefix, err)
	}
	if len(page) > 0 {
		return false, nil
	}
	if err := s.putKey(ctx, listingMarkerKey); err != nil {
		return false, err
	}
	s.listing.ready.Store(true)
	return true, nil
}

// walkNames lists the keys under prefix after startAfter and calls fn with
// the keys of each name in key order, a name being what comes before the
// first ",". It stops when fn returns false, after maxListCalls LISTs of
// batch keys, or at the end. It returns the last name fn saw and whether
// keys may follow it. The keys of a name that a LIST cut off are listed
// again by the next call, unless the name alone fills every LIST (then fn
// gets what there is: a name with more than one key is decided by its
// record anyway).
func (s *Store) walkNames(ctx context.Context, prefix, startAfter string, batch int, fn func(name string, keys []string) (bool, error)) (string, bool, error) {
	cursor, last := startAfter, ""
	var pend []string
	pendName := ""
	flush := func() (bool, error) {
		if len(pend) == 0 {
			return true, nil
		}
		last = pendName
		cont, err := fn(pendName, pend)
		pend = nil
		return cont, err
	}
	for range maxListCalls {
		page, err := s.objects.List(ctx, prefix, cursor, batch)
		if err != nil {
			return last, false, fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, o := range page {
			name, _, ok := strings.Cut(strings.TrimPrefix(o.Key, prefix), ",")
			if !ok {
				continue
			}
			if name != pendName {
				if cont, err := flush(); err != nil || !cont {
					return last, true, err
				}
			}
			pendName = name
			pend = append(pend, o.Key)
		}
		if len(page) < batch {
			_, err := flush()
			return last, false, err
		}
		cursor = page[len(page)-1].Key
	}
	if last == "" {
		_, err := flush()
		return last, true, err
	}
	return last, true, nil
}

// checkAfter validates a page cursor: a name in key form, or "" from the
// start.
func checkAfter(after string) error {
	if after != "" && !keyForm(after) {
		return fmt.Errorf("%w: page cursor %q: want a name in lower case", ErrInvalidArgument, after)
	}
	return nil
}

func pageLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultPageSize
	case limit > MaxPageSize:
		return MaxPageSize
	}
	return limit
}

// ListRepoPage returns up to limit live repositories of owner (all of
// them, or with publicOnly only the public ones), in name order after the
// name after ("" from the start; names compare in lower case), and the
// cursor of the next page ("" after the last). It does no authorization:
// callers decide with CanRead whether to ask for private ones.
//
// A page costs one GET (the owner) and one LIST, and a GET for each name
// whose listing a write is changing or left unfinished
// (docs/adr/0027-listing-keys.md). A page of public repositories among
// many private ones may come back short, with a cursor, after at most
// maxListCalls LISTs. ErrNotFound if owner does not exist.
func (s *Store) ListRepoPage(ctx context.Context, owner, after string, limit int, publicOnly bool) ([]Repo, string, error) {
	t, err := s.Tenant(ctx, owner)
	if err != nil {
		return nil, "", fmt.Errorf("list repositories: %w", err)
	}
	if err := checkAfter(after); err != nil {
		return nil, "", err
	}
	limit = pageLimit(limit)
	ready, err := s.listingReady(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("list repositories: %w", err)
	}
	keep := func(r *Repo) bool { return r.Public || !publicOnly }
	if !ready {
		return s.legacyRepoPage(ctx, reposPrefix+lower(t.Name)+"/", after, limit, keep)
	}
	// A page of everything needs about one key per repository shown; a
	// page of the public ones may have to skip private ones, and a LIST
	// costs the same whatever it returns.
	batch := min(limit+16, objstore.ListPageSize)
	if publicOnly {
		batch = objstore.ListPageSize
	}
	prefix := repoListPrefix + lower(t.Name) + "/"
	return s.repoPage(ctx, prefix, after, limit, batch, keep)
}

// repoPage is ListRepoPage and ReposPage on the listing keys under prefix.
func (s *Store) repoPage(ctx context.Context, prefix, after string, limit, batch int, keep func(*Repo) bool) ([]Repo, string, error) {
	start := ""
	if after != "" {
		start = prefix + after + pastLast
	}
	out := make([]Repo, 0, min(limit, 64))
	last, more, err := s.walkNames(ctx, prefix, start, batch, func(name string, keys []string) (bool, error) {
		r, ok, err := s.resolveRepo(ctx, keys)
		if err != nil {
			return false, err
		}
		if ok && keep(&r) {
			out = append(out, r)
		}
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list repositories: %w", err)
	}
	if !more {
		last = ""
	}
	return out, last, nil
}

// resolveRepo says what the listing keys of one name show: the repository
// a lone final key describes, or else what its record says (one GET),
// after which the keys are tidied as its writer would have (best effort).
func (s *Store) resolveRepo(ctx context.Context, keys []string) (Repo, bool, error) {
	entries := parseRepoKeys(keys)
	if len(entries) == 0 {
		return Repo{}, false, nil
	}
	if len(entries) == 1 && len(keys) == 1 && entries[0].state == stateFinal {
		e := entries[0]
		if e.flags&flagDeleted == 0 {
			return e.repo(), true, nil
		}
		// A tombstone's final key: hidden, and gone after a day.
		if s.now().UnixMilli()-e.written > staleIntent.Milliseconds() {
			_ = s.objects.Delete(ctx, e.key())
		}
		return Repo{}, false, nil
	}
	e := entries[0]
	var rec repoRecord
	_, err := s.getRecord(ctx, repoKey(e.owner, e.name), &rec)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		_ = s.settleRepoKeys(ctx, entries, nil)
		return Repo{}, false, nil
	case err != nil:
		return Repo{}, false, err
	}
	sctx, cancel := settleContext(ctx)
	defer cancel()
	_ = s.settleRepoKeys(sctx, entries, &rec)
	if rec.Deleted {
		return Repo{}, false, nil
	}
	return rec.repo(), true, nil
}

// settleRepoNames settles every name of the repository listing under
// prefix against its record, as a lister would: DeleteTenant leaves none
// of a deleted tenant's names for a later tenant of that name to settle.
// It reads the record of each unsettled name, and costs what exists under
// prefix.
func (s *Store) settleRepoNames(ctx context.Context, prefix string) error {
	start := ""
	for {
		last, more, err := s.walkNames(ctx, prefix, start, objstore.ListPageSize, func(name string, keys []string) (bool, error) {
			_, _, err := s.resolveRepo(ctx, keys)
			return err == nil, err
		})
		if err != nil || !more || last == "" {
			return err
		}
		start = prefix + last + pastLast
	}
}

// legacyRepoPage pages through repository records, one GET each: the
// lists of an installation whose listing is not built yet.
func (s *Store) legacyRepoPage(ctx context.Context, prefix, after string, limit int, keep func(*Repo) bool) ([]Repo, string, error) {
	start := ""
	if after != "" {
		start = prefix + after
	}
	page, err := s.objects.List(ctx, prefix, start, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list repositories: %w", err)
	}
	out := make([]Repo, 0, len(page))
	for _, o := range page {
		var rec repoRecord
		if _, err := s.getRecord(ctx, o.Key, &rec); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return nil, "", err
		}
		if r := rec.repo(); !rec.Deleted && keep(&r) {
			out = append(out, r)
		}
	}
	next := ""
	if len(page) == limit {
		next = strings.TrimPrefix(page[len(page)-1].Key, prefix)
	}
	return out, next, nil
}

// ListRepos returns every live repository of owner, in name order,
// reading the listing a page at a time. It does no authorization: callers
// filter with CanRead. ErrNotFound if owner does not exist. What it costs
// grows with the owner's repositories: pages use ListRepoPage.
func (s *Store) ListRepos(ctx context.Context, owner string) ([]Repo, error) {
	var out []Repo
	after := ""
	for {
		page, next, err := s.ListRepoPage(ctx, owner, after, MaxPageSize, false)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		after = next
	}
}

// ReposPage returns up to limit live repositories of every owner, in key
// order, after the cursor after ("" from the start), and the cursor of
// the next page ("" when this was the last). The scan sweep pages through
// an installation with it at its own pace; a page is one LIST.
func (s *Store) ReposPage(ctx context.Context, after string, limit int) ([]Repo, string, error) {
	if after != "" {
		o, n, ok := strings.Cut(after, "/")
		if !ok || !keyForm(o) || !keyForm(n) {
			return nil, "", fmt.Errorf("%w: page cursor %q: want owner/name in lower case", ErrInvalidArgument, after)
		}
	}
	limit = pageLimit(limit)
	ready, err := s.listingReady(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("list repositories: %w", err)
	}
	all := func(*Repo) bool { return true }
	if !ready {
		return s.legacyRepoPage(ctx, reposPrefix, after, limit, all)
	}
	return s.repoPage(ctx, repoListPrefix, after, limit, min(limit+16, objstore.ListPageSize), all)
}

// ListTenantPage returns up to limit tenants in name order after the name
// after ("" from the start), and the cursor of the next page ("" after
// the last). A page is one LIST, and a GET for each name a write is
// changing or left unfinished.
func (s *Store) ListTenantPage(ctx context.Context, after string, limit int) ([]Tenant, string, error) {
	if err := checkAfter(after); err != nil {
		return nil, "", err
	}
	limit = pageLimit(limit)
	ready, err := s.listingReady(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("list tenants: %w", err)
	}
	if !ready {
		return s.legacyTenantPage(ctx, after, limit)
	}
	start := ""
	if after != "" {
		start = tenantListPrefix + after + pastLast
	}
	out := make([]Tenant, 0, min(limit, 64))
	last, more, err := s.walkNames(ctx, tenantListPrefix, start, min(limit+16, objstore.ListPageSize), func(name string, keys []string) (bool, error) {
		t, ok, err := s.resolveTenant(ctx, name, keys)
		if err != nil {
			return false, err
		}
		if ok {
			out = append(out, t)
		}
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list tenants: %w", err)
	}
	if !more {
		last = ""
	}
	return out, last, nil
}

// resolveTenant is resolveRepo for a tenant name.
func (s *Store) resolveTenant(ctx context.Context, name string, keys []string) (Tenant, bool, error) {
	entries := parseTenantKeys(keys)
	if len(entries) == 0 {
		return Tenant{}, false, nil
	}
	if len(entries) == 1 && len(keys) == 1 {
		switch e := entries[0]; {
		case e.state == stateFinal:
			return e.tenant(), true, nil
		case e.state == stateDeleted:
			// A deletion's key alone: the record is gone (an existing
			// record keeps its final key beside it). Hidden, and gone
			// after a day.
			if s.now().UnixMilli()-e.written > staleIntent.Milliseconds() {
				_ = s.objects.Delete(ctx, e.key())
			}
			return Tenant{}, false, nil
		}
	}
	var rec tenantRecord
	_, err := s.getRecord(ctx, tenantKey(name), &rec)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		_ = s.settleTenantKeys(ctx, entries, nil)
		return Tenant{}, false, nil
	case err != nil:
		return Tenant{}, false, err
	}
	sctx, cancel := settleContext(ctx)
	defer cancel()
	_ = s.settleTenantKeys(sctx, entries, &rec)
	return rec.tenant(), true, nil
}

func (s *Store) legacyTenantPage(ctx context.Context, after string, limit int) ([]Tenant, string, error) {
	start := ""
	if after != "" {
		start = tenantKey(after)
	}
	page, err := s.objects.List(ctx, tenantsPrefix, start, limit)
	if err != nil {
		return nil, "", fmt.Errorf("list tenants: %w", err)
	}
	out := make([]Tenant, 0, len(page))
	for _, o := range page {
		var rec tenantRecord
		if _, err := s.getRecord(ctx, o.Key, &rec); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				continue
			}
			return nil, "", err
		}
		out = append(out, rec.tenant())
	}
	next := ""
	if len(page) == limit {
		next = strings.TrimPrefix(page[len(page)-1].Key, tenantsPrefix)
	}
	return out, next, nil
}

// ListTenants returns every tenant, in name order, a page at a time.
func (s *Store) ListTenants(ctx context.Context) ([]Tenant, error) {
	var out []Tenant
	after := ""
	for {
		page, next, err := s.ListTenantPage(ctx, after, MaxPageSize)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		after = next
	}
}

// EnsureListings runs BuildListings unless the listing is complete
// already, and reports whether it ran.
func (s *Store) EnsureListings(ctx context.Context) (built bool, tenants, repos int, err error) {
	ready, err := s.listingReady(ctx)
	if err != nil || ready {
		return false, 0, 0, err
	}
	tenants, repos, err = s.BuildListings(ctx)
	return true, tenants, repos, err
}

// BuildListings writes the listing keys of every tenant and repository
// record, then the marker that lets lists read the keys alone. An
// installation that predates the keys needs it once ("ghost serve" runs
// it when the marker is missing); running it again is harmless, and
// writes that race it leave at worst a name with two keys, which the
// next lister settles. It reads every record: it costs what exists.
func (s *Store) BuildListings(ctx context.Context) (tenants, repos int, err error) {
	err = objstore.Walk(ctx, s.objects, tenantsPrefix, func(o objstore.Info) error {
		var rec tenantRecord
		if _, err := s.getRecord(ctx, o.Key, &rec); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				return nil
			}
			return err
		}
		tenants++
		return s.putKey(ctx, tenantEntryOf(&rec, stateFinal, s.now()).key())
	})
	if err != nil {
		return tenants, repos, fmt.Errorf("build listings: %w", err)
	}
	err = objstore.Walk(ctx, s.objects, reposPrefix, func(o objstore.Info) error {
		var rec repoRecord
		if _, err := s.getRecord(ctx, o.Key, &rec); err != nil {
			if errors.Is(err, objstore.ErrNotFound) {
				return nil
			}
			return err
		}
		if rec.Deleted {
			return nil
		}
		repos++
		return s.putKey(ctx, repoEntryOf(&rec, stateFinal, s.now()).key())
	})
	if err != nil {
		return tenants, repos, fmt.Errorf("build listings: %w", err)
	}
	if err := s.putKey(ctx, listingMarkerKey); err != nil {
		return tenants, repos, fmt.Errorf("build listings: %w", err)
	}
	s.listing.ready.Store(true)
	return tenants, repos, nil
}

// listedAttempt is one write updateListedRepo sent: its intent key and the
// record it was conditional on (gen and nonce; absent: none).
type listedAttempt struct {
	intent string
	base   string
}

func baseOf(cur *repoRecord) string {
	if cur == nil {
		return ""
	}
	return fmt.Sprintf("%d,%s", cur.Gen, cur.Nonce)
}

// mutateError marks an error of change or of an announcement, so that
// updateListedRepo tells it from record.Update's own.
type mutateError struct{ err error }

func (e *mutateError) Error() string { return e.err.Error() }
func (e *mutateError) Unwrap() error { return e.err }

// updateListedRepo applies change to the repository record at key by
// compare-and-swap (record.Update, through updateRecord) with the listing
// protocol around every attempt (docs/adr/0027-listing-keys.md): each
// write is announced by its intent key first, under a fresh nonce and the
// next generation; the write that lands is finished (its final key, the
// keys it replaced gone). change returns nil when cur already holds the
// change; it never sees a record this call wrote. It returns the record
// as the call left it.
//
// An attempt's intent is deleted only once its write certainly cannot
// land: another of ours landed, the call applied nothing (record.Update's
// ErrNotApplied without a write pending), or a later read showed another
// record than the one the attempt was conditional on. Any other intent
// stays for listers, who read the record and settle it.
func (s *Store) updateListedRepo(ctx context.Context, key string, change func(cur *repoRecord) (*repoRecord, error)) (*repoRecord, error) {
	var (
		sent    []listedAttempt
		mine    = map[string]bool{} // nonces of our attempts
		lastCur = "?"
	)
	rec, err := updateRecord(ctx, s, key, func(cur *repoRecord) (*repoRecord, error) {
		lastCur = baseOf(cur)
		if cur != nil && mine[cur.Nonce] {
			return nil, nil // one of ours landed
		}
		next, err := change(cur)
		if err != nil {
			return nil, &mutateError{err}
		}
		if next == nil {
			return nil, nil
		}
		next = ptr(*next)
		var gen uint64
		if cur != nil {
			gen = cur.Gen
		}
		intent, err := s.announceRepo(ctx, next, gen)
		if err != nil {
			return nil, &mutateError{err}
		}
		mine[next.Nonce] = true
		sent = append(sent, listedAttempt{intent: intent, base: lastCur})
		return next, nil
	})
	var me *mutateError
	switch {
	case err == nil && rec != nil && mine[rec.Nonce]:
		s.finishRepo(rec) // also deletes the other attempts' keys: dead
		return rec, nil
	case err != nil && errors.As(err, &me):
		err = me.err
	}
	// Nothing pending: record.Update applied nothing and sent nothing
	// that may still land, so every attempt is dead. Otherwise those whose
	// base a later read saw replaced are (a write conditional on a record
	// that changed can never land).
	var de *record.DecodeError
	all := err != nil && errors.Is(err, record.ErrNotApplied) && !errors.Is(err, objstore.ErrOutcomeUnknown) && me == nil && !errors.As(err, &de)
	for _, a := range sent {
		if all || a.base != lastCur {
			s.abandon(a.intent)
		}
	}
	return rec, err
}

func ptr[T any](v T) *T { return &v }
