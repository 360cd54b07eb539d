package meta

import (
	"context"
	"errors"
	"fmt"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// maxCASAttempts bounds read-modify-write loops on a repository record.
// Metadata writes are rare; losing this many times in a row means something
// is wrong, not busy.
const maxCASAttempts = 8

// repoRef resolves owner and a lookup name ("x" or "x.git") to the record
// key.
func repoRef(owner, name string) (string, error) {
	o, err := canon(owner)
	if err != nil {
		return "", fmt.Errorf("owner: %w", err)
	}
	n, err := lookupName(name)
	if err != nil {
		return "", fmt.Errorf("repository: %w", err)
	}
	return repoKey(o, n), nil
}

// readRepo reads a live repository record and its ETag: ErrNotFound for a
// missing or deleted one.
func (s *Store) readRepo(ctx context.Context, owner, name string) (repoRecord, string, error) {
	key, err := repoRef(owner, name)
	if err != nil {
		return repoRecord{}, "", err
	}
	var rec repoRecord
	etag, err := s.getRecord(ctx, key, &rec)
	if errors.Is(err, objstore.ErrNotFound) || err == nil && rec.Deleted {
		return repoRecord{}, "", fmt.Errorf("repository %s/%s: %w", owner, name, ErrNotFound)
	}
	var oe *objstore.Error
	if errors.As(err, &oe) {
		// The store failed to answer: the name may well exist. Say so
		// (503), rather than 500 or, worse, "not found".
		return repoRecord{}, "", unavailable(fmt.Errorf("repository %s/%s: %w", owner, name, err))
	}
	if err != nil {
		return repoRecord{}, "", err
	}
	return rec, etag, nil
}

// claimName writes rec at key if the name is free: absent, or holding a
// deletion tombstone (replaced by compare-and-swap on the tombstone's
// ETag). Of racing claimers exactly one wins; the rest get ErrExists.
// Each attempt announces its listing keys first and finishes them once
// it landed (docs/adr/0027-listing-keys.md).
func (s *Store) claimName(ctx context.Context, key string, rec *repoRecord) (string, error) {
	intent, err := s.announceRepo(ctx, rec, 0)
	if err != nil {
		return "", err
	}
	etag, err := s.createRecord(ctx, key, rec)
	switch {
	case err == nil:
		s.finishRepo(rec)
		return etag, nil
	case !errors.Is(err, ErrExists):
		return "", err // the outcome is unknown: the intent stays for listers to settle
	}
	s.abandon(intent) // ErrExists: another record holds the name, ours never landed
	// Taken: by a tombstone, which the claim replaces by compare-and-swap
	// (record.Update settles an unknown outcome by our nonce), or by a
	// live repository.
	landed, err := s.updateListedRepo(ctx, key, func(cur *repoRecord) (*repoRecord, error) {
		if cur == nil || !cur.Deleted {
			// Tombstones are never removed, so an absent record was
			// deleted by hand: treat the name as taken rather than guess.
			return nil, fmt.Errorf("repository %s/%s: %w", rec.Owner, rec.Name, ErrExists)
		}
		return rec, nil
	})
	if err != nil {
		return "", err
	}
	*rec = *landed
	_, etag, err = s.readRepo(ctx, rec.Owner, rec.Name)
	if err != nil {
		return "", err
	}
	return etag, nil
}

// CreateRepo creates an empty repository under an existing tenant, with a
// fresh log id. The name record is written first and is the commit point:
// of racing creators one wins and the rest get ErrExists, and no loser
// leaves a log behind. The log's index is initialised after; if that
// fails the name is released again.
func (s *Store) CreateRepo(ctx context.Context, owner, name string, public bool) (Repo, error) {
	o, err := canon(owner)
	if err != nil {
		return Repo{}, fmt.Errorf("create repository: owner: %w", err)
	}
	n, err := canon(name)
	if err != nil {
		return Repo{}, fmt.Errorf("create repository: %w", err)
	}
	t, err := s.Tenant(ctx, owner)
	if err != nil {
		return Repo{}, fmt.Errorf("create repository: owner: %w", err)
	}
	rec := repoRecord{V: recordVersion, ID: s.newID(), Owner: t.Name, Name: name, Public: public, CreatedAt: s.now()}
	key := repoKey(o, n)
	etag, err := s.claimName(ctx, key, &rec)
	if err != nil {
		return Repo{}, fmt.Errorf("create repository: %w", err)
	}
	if err := s.log.Init(ctx, rec.ID); err != nil {
		s.release(key, rec, etag)
		return Repo{}, fmt.Errorf("create repository %s: init log: %w", rec.repo().FullName(), err)
	}
	return rec.repo(), nil
}

// release turns a just-claimed name back into a tombstone after a failed
// create. It is best effort on a fresh context (the caller's may be why we
// failed): if it fails, the name points at a log with no index, which reads
// as an empty repository, so nothing is corrupt.
func (s *Store) release(key string, rec repoRecord, etag string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	rec.Deleted = true
	intent, err := s.announceRepo(ctx, &rec, rec.Gen)
	if err != nil {
		return
	}
	_, err = s.replaceRecord(ctx, key, &rec, etag)
	switch {
	case err == nil:
		s.finishRepo(&rec)
	case errors.Is(err, objstore.ErrPreconditionFailed):
		s.abandon(intent)
	}
}

// Repo resolves owner/name with one GET. name may end in ".git", which is
// stripped, so "x" and "x.git" are the same repository. A missing or
// deleted repository is ErrNotFound; a malformed name is ErrInvalidName.
// Repo does not consult the log: a repository whose log was tombstoned by
// a delete that has not yet removed the name reads wal.ErrRepoDeleted on
// its first log access, which the server reports as 404 too.
func (s *Store) Repo(ctx context.Context, owner, name string) (Repo, error) {
	rec, _, err := s.readRepo(ctx, owner, name)
	if err != nil {
		return Repo{}, err
	}
	return rec.repo(), nil
}

// DeleteRepo deletes owner/name: first the log is tombstoned (wal.Delete,
// which makes racing pushes lose and purges the entries), then the name
// record becomes a tombstone by compare-and-swap, so the name can be
// created again with a new log id while the old log stays deleted forever.
// A crash between the two steps leaves a name whose log reads as deleted;
// running DeleteRepo again finishes the job.
func (s *Store) DeleteRepo(ctx context.Context, owner, name string) error {
	key, err := repoRef(owner, name)
	if err != nil {
		return fmt.Errorf("delete repository: %w", err)
	}
	rec, _, err := s.readRepo(ctx, owner, name)
	if err != nil {
		return fmt.Errorf("delete repository: %w", err)
	}
	if err := s.log.Delete(ctx, rec.ID); err != nil && !errors.Is(err, wal.ErrRepoDeleted) {
		return fmt.Errorf("delete repository %s: %w", rec.repo().FullName(), err)
	}
	id := rec.ID
	_, err = s.updateListedRepo(ctx, key, func(cur *repoRecord) (*repoRecord, error) {
		if cur == nil || cur.Deleted || cur.ID != id {
			return nil, nil // deleted by someone else, and perhaps recreated
		}
		next := *cur
		next.Deleted = true
		return &next, nil
	})
	if err != nil {
		return fmt.Errorf("delete repository %s: %w", rec.repo().FullName(), err)
	}
	return nil
}

// ForkRepo copies srcOwner/srcName's log to a new repository
// dstOwner/dstName with a fresh id (wal.Fork copies every layer, then
// writes the new index). The copy happens before the name is claimed, so
// no one can push into a half-made fork; so does the copy of its Git LFS
// references through the store's ForkCopier. If the name is lost to a
// racing creator, or the references cannot be copied, the copied log is
// deleted again. The fork keeps the source's visibility.
func (s *Store) ForkRepo(ctx context.Context, srcOwner, srcName, dstOwner, dstName string) (Repo, error) {
	src, _, err := s.readRepo(ctx, srcOwner, srcName)
	if err != nil {
		return Repo{}, fmt.Errorf("fork: source: %w", err)
	}
	o, err := canon(dstOwner)
	if err != nil {
		return Repo{}, fmt.Errorf("fork: destination owner: %w", err)
	}
	n, err := canon(dstName)
	if err != nil {
		return Repo{}, fmt.Errorf("fork: destination: %w", err)
	}
	t, err := s.Tenant(ctx, dstOwner)
	if err != nil {
		return Repo{}, fmt.Errorf("fork: destination owner: %w", err)
	}
	// Cheap early refusal before copying a whole log; claimName below is
	// the real check.
	if _, _, err := s.readRepo(ctx, dstOwner, dstName); err == nil {
		return Repo{}, fmt.Errorf("fork: repository %s/%s: %w", t.Name, dstName, ErrExists)
	} else if !errors.Is(err, ErrNotFound) {
		return Repo{}, fmt.Errorf("fork: %w", err)
	}
	rec := repoRecord{
		V: recordVersion, ID: s.newID(), Owner: t.Name, Name: dstName, Public: src.Public,
		CreatedAt: s.now(), ForkedFrom: src.repo().FullName(), DefaultBranch: src.DefaultBranch,
	}
	if err := s.log.Fork(ctx, src.ID, rec.ID); err != nil {
		if errors.Is(err, wal.ErrRepoDeleted) {
			return Repo{}, fmt.Errorf("fork: repository %s: %w", src.repo().FullName(), ErrNotFound)
		}
		return Repo{}, fmt.Errorf("fork %s: %w", src.repo().FullName(), err)
	}
	if s.forks != nil {
		// Before the name: a fork is never seen without its LFS
		// references (docs/adr/0132-lfs-forks.md).
		if err := s.forks.CopyToFork(ctx, src.Owner, src.ID, rec.Owner, rec.ID); err != nil {
			s.discardLog(rec.ID)
			var oe *objstore.Error
			if errors.As(err, &oe) && !errors.Is(err, objstore.ErrNotFound) {
				err = unavailable(err) // the store failed to answer: 503
			}
			return Repo{}, fmt.Errorf("fork %s: copy its LFS objects: %w", src.repo().FullName(), err)
		}
	}
	if _, err := s.claimName(ctx, repoKey(o, n), &rec); err != nil {
		s.discardLog(rec.ID)
		return Repo{}, fmt.Errorf("fork: %w", err)
	}
	return rec.repo(), nil
}

// discardLog tombstones and purges a log no name points at. Best effort:
// a leftover is unreachable garbage.
func (s *Store) discardLog(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = s.log.Delete(ctx, id)
}

// SetVisibility makes owner/name public or private, by compare-and-swap on
// its record so a concurrent delete or rename is never undone.
func (s *Store) SetVisibility(ctx context.Context, owner, name string, public bool) error {
	key, err := repoRef(owner, name)
	if err != nil {
		return fmt.Errorf("set visibility: %w", err)
	}
	if _, _, err := s.readRepo(ctx, owner, name); err != nil {
		return fmt.Errorf("set visibility: %w", err)
	}
	_, err = s.updateListedRepo(ctx, key, func(cur *repoRecord) (*repoRecord, error) {
		if cur == nil || cur.Deleted {
			return nil, fmt.Errorf("repository %s/%s: %w", owner, name, ErrNotFound)
		}
		if cur.Public == public {
			return nil, nil
		}
		next := *cur
		next.Public = public
		return &next, nil
	})
	if err != nil {
		return fmt.Errorf("set visibility of %s/%s: %w", owner, name, err)
	}
	return nil
}
