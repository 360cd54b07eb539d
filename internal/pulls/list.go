package pulls

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ghost-scm/ghost/internal/ids"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// Page sizes of a list, as the other lists of the API
// (docs/adr/0090-bounded-serving.md).
const (
	DefaultPageSize = 30
	MaxPageSize     = 100
)

// readers bounds the record GETs of one page that run at once.
const readers = 8

// Filter says which pull requests a list shows: "open" (the default),
// "closed" (merged ones too) or "all", as GitHub's ?state=.
type Filter string

// The filters.
const (
	FilterOpen   Filter = "open"
	FilterClosed Filter = "closed"
	FilterAll    Filter = "all"
)

func (f Filter) classes() ([]string, error) {
	switch f {
	case FilterOpen, "":
		return []string{"open"}, nil
	case FilterClosed:
		return []string{"closed"}, nil
	case FilterAll:
		return []string{"open", "closed"}, nil
	}
	return nil, fmt.Errorf("%w: state %q: want open, closed or all", ErrInvalid, string(f))
}

// listed is one listing key read by a page.
type listed struct {
	key   string
	class string
	k     stateKey
}

// List returns a page of repoID's pull requests that f selects, newest
// first, starting below number before (0: from the newest), and the
// number to pass as before for the next page (0 when this one is the
// last). A page costs one LIST per list it reads (two for "all") and
// one GET per pull request it shows: what it shows, never what the
// repository holds (docs/adr/0118-pull-request-records.md). A page may
// hold fewer than limit while a next page is named.
func (s *Store) List(ctx context.Context, repoID string, f Filter, before uint64, limit int) ([]PullRequest, uint64, error) {
	if err := ids.CheckRepoID(repoID); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	classes, err := f.classes()
	if err != nil {
		return nil, 0, err
	}
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	// Read a little more than a page of keys: a number may have more
	// than one key (a write in flight, a key not yet tidied).
	ask := limit + limit/4 + 4
	byNumber := map[uint64][]listed{}
	var floor uint64 // numbers below it may be missing from a list cut short
	more := false
	for _, class := range classes {
		prefix := listStatePrefix(repoID, class)
		after := ""
		if before > 0 {
			// "-" sorts after every key of that number ("<inv>,...").
			after = prefix + inv(before) + "-"
		}
		infos, err := s.objects.List(ctx, prefix, after, ask)
		if err != nil {
			return nil, 0, fmt.Errorf("list pull requests: %w", err)
		}
		var last uint64
		for _, info := range infos {
			k, ok := parseListKey(strings.TrimPrefix(info.Key, prefix))
			if !ok {
				continue // not a key this build writes
			}
			byNumber[k.number] = append(byNumber[k.number], listed{key: info.Key, class: class, k: k})
			last = k.number
		}
		if len(infos) == ask {
			more = true
			floor = max(floor, last)
		}
	}
	numbers := make([]uint64, 0, len(byNumber))
	for n := range byNumber {
		// A number at the floor may have keys past the cut: the next
		// page reads it whole.
		if n > floor {
			numbers = append(numbers, n)
		}
	}
	slices.SortFunc(numbers, compareDesc)
	if len(numbers) > limit {
		numbers, more = numbers[:limit], true
	}
	recs, err := s.readRecords(ctx, repoID, numbers)
	if err != nil {
		return nil, 0, err
	}
	var out []PullRequest
	var dead []string
	for i, n := range numbers {
		r := recs[i]
		show := false
		for _, l := range byNumber[n] {
			switch s.judge(r, l.k) {
			case keyLive:
				show = true
			case keyDead:
				dead = append(dead, l.key)
			}
		}
		if show {
			out = append(out, r.pull())
		}
	}
	s.deleteKeys(dead)
	next := uint64(0)
	switch {
	case more && len(numbers) > 0:
		next = numbers[len(numbers)-1]
	case more:
		// A whole read of keys of one number (writes keep a few keys
		// a number at most): go on below it.
		next = floor
	}
	return out, next, nil
}

func compareDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// readRecords reads the records of numbers, a few at a time; an absent
// one is nil.
func (s *Store) readRecords(ctx context.Context, repoID string, numbers []uint64) ([]*prRecord, error) {
	recs := make([]*prRecord, len(numbers))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for i, n := range numbers {
		g.Go(func() error {
			r, _, err := record.Get(gctx, s.objects, prCodec, recordKey(repoID, n))
			switch {
			case errors.Is(err, objstore.ErrNotFound):
				return nil
			case err != nil:
				return fmt.Errorf("pull request #%d: %w", n, err)
			}
			recs[i] = r
			return nil
		})
	}
	return recs, g.Wait()
}

// keyState is what a listing key says, judged against its record.
type keyState int

const (
	// keyLive is the key of the write that put the record in its list.
	keyLive keyState = iota
	// keyPending is a key no record explains yet: a write in flight, or
	// one that failed without saying so; kept for a day.
	keyPending
	// keyDead is a key of a write that can no longer matter: it can be
	// deleted.
	keyDead
)

// judge tells whether the key k of record r (nil: absent) is its
// live key, a write's that may still land, or dead
// (docs/adr/0118-pull-request-records.md). A key whose generation is at
// most the record's and is not its live key is dead: its write either
// landed and was replaced, or lost its compare-and-swap, and a write
// conditional on a record that has changed never lands. A key of a later
// generation, or of a record not there, is a write in flight until it is
// a day old.
func (s *Store) judge(r *prRecord, k stateKey) keyState {
	switch {
	case r != nil && r.liveKey() == k:
		// The write that put r in its list wrote this key in that list
		// (and the head key): a class change always takes a new key.
		return keyLive
	case r != nil && k.gen <= r.Gen:
		return keyDead
	case s.now().Sub(time.UnixMilli(k.at)) > s.maxKeyAge:
		return keyDead
	}
	return keyPending
}

// HeadRef names a pull request by its base repository and number.
type HeadRef struct {
	RepoID string
	Number uint64
}

// OpenByHead returns the open pull requests whose head is branch ref of
// headRepoID: one LIST of that branch's head keys and one GET per pull
// request named. It is how a push finds the refs/pull/<n>/head refs it
// moves (docs/adr/0117-pull-request-refs.md).
func (s *Store) OpenByHead(ctx context.Context, headRepoID, ref string) ([]PullRequest, error) {
	if err := ids.CheckRepoID(headRepoID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	prefix := headsRefPrefix(headRepoID, ref)
	type named struct {
		key    string
		repoID string
		k      stateKey
	}
	var keys []named
	err := objstore.Walk(ctx, s.objects, prefix, func(info objstore.Info) error {
		repoID, k, ok := parseHeadKey(strings.TrimPrefix(info.Key, prefix))
		if ok && ids.CheckRepoID(repoID) == nil {
			keys = append(keys, named{info.Key, repoID, k})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list pull requests of a head: %w", err)
	}
	var (
		mu   sync.Mutex
		out  []PullRequest
		dead []string
		seen = map[HeadRef]bool{}
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(readers)
	for _, nk := range keys {
		g.Go(func() error {
			r, _, err := record.Get(gctx, s.objects, prCodec, recordKey(nk.repoID, nk.k.number))
			switch {
			case errors.Is(err, objstore.ErrNotFound):
				r = nil
			case err != nil:
				return fmt.Errorf("pull request #%d: %w", nk.k.number, err)
			}
			mu.Lock()
			defer mu.Unlock()
			switch s.judge(r, nk.k) {
			case keyLive:
				if r.HeadRepoID == headRepoID && r.HeadRef == ref && !seen[HeadRef{r.RepoID, r.Number}] {
					seen[HeadRef{r.RepoID, r.Number}] = true
					out = append(out, r.pull())
				}
			case keyDead:
				dead = append(dead, nk.key)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	s.deleteKeys(dead)
	slices.SortFunc(out, func(a, b PullRequest) int {
		if c := strings.Compare(a.RepoID, b.RepoID); c != 0 {
			return c
		}
		return compareDesc(a.Number, b.Number)
	})
	return out, nil
}
