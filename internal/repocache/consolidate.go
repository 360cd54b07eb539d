package repocache

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gitexec"
)

// consolidateLater starts a background consolidation of repo unless one
// is already running in this process (docs/design.md §5.6): with a
// Background, consolidating is background work, off the path of the
// request that found too many packs, and it holds the repository's lock
// only to read and to record the state, never while git works, so no
// request waits for it.
func (c *Cache) consolidateLater(repo string) {
	c.mu.Lock()
	if c.consolidating[repo] || c.base.Err() != nil {
		c.mu.Unlock()
		return
	}
	c.consolidating[repo] = true
	c.bgWG.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.bgWG.Done()
		ctx, cancel := context.WithTimeout(c.base, c.timeout)
		defer cancel()
		start := time.Now()
		done, err := c.consolidateBackground(ctx, repo)
		c.mu.Lock()
		delete(c.consolidating, repo)
		c.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			c.logger.Warn("consolidating packs in the background failed", "repo", repo, "err", err)
		}
		if done && c.observe != nil {
			c.observe(Event{Repo: repo, Duration: time.Since(start), Consolidated: true, Err: err})
		}
	}()
}

// consolidateBackground rolls up the small packs of repo's recorded packs
// the way `git repack --geometric=2` chooses them, and reports whether it
// recorded a consolidation:
//
//  1. Under the repository's lock, read the state and choose the packs to
//     roll up among the recorded ones (by object count, as git weighs
//     them).
//  2. Without it, pack them into one new pack (`git pack-objects
//     --stdin-packs`), which git finds at once, and write a multi-pack
//     index with a bitmap over the packs that stay and the new one. Packs
//     that pushes add meanwhile are in neither, and untouched.
//  3. Under the lock again, record the new pack in place of the rolled-up
//     ones, unless the repository was rebuilt or its state no longer
//     records them all, and only then delete them.
//
// Consolidations of one repository are serialized across processes by a
// lock file of their own. The git processes are background work (the
// cache's Background).
func (c *Cache) consolidateBackground(ctx context.Context, repo string) (bool, error) {
	if err := c.bg.Pause(ctx); err != nil {
		return false, err
	}
	if err := c.ensureDirs(); err != nil {
		return false, err
	}
	clk, err := lockFile(ctx, c.lockPath(repo)+".consolidate")
	if err != nil {
		return false, err
	}
	defer clk.unlock()
	dir := c.repoPath(repo)
	packDir := filepath.Join(dir, "objects", "pack")
	git := c.bg.Runner(c.git)

	// 1. What to roll up, from the recorded state.
	var st *state
	var ident os.FileInfo
	err = c.underLock(ctx, repo, func() error {
		var err error
		if ident, err = os.Stat(dir); err != nil {
			return err
		}
		if st, err = readState(dir); err != nil {
			return err
		}
		// What a consolidation that stopped between writing its pack and
		// recording it left: nothing else adds a pack without both locks.
		n, err := removeUnrecorded(packDir, recordedNames(st))
		if n > 0 {
			c.logger.Info("removed the files of an unrecorded consolidation", "repo", repo, "files", n)
		}
		return err
	})
	if err != nil {
		return false, err
	}
	recorded := recordedNames(st)
	var roll []string
	var counts map[string]int64
	if c.maxPks >= 0 && len(recorded) > c.maxPks {
		if roll, counts, err = geometricRoll(packDir, recorded, 2); err != nil {
			return false, err
		}
	}
	if len(roll) < 2 {
		// Nothing to roll up; the packs may still lack a bitmap.
		if !c.wantsBitmap(dir) {
			return false, nil
		}
		return false, c.writeBitmap(ctx, git, dir, recorded)
	}
	c.hook("planned")

	// 2. The new pack, and a multi-pack index with a bitmap over what
	// stays and it.
	var names strings.Builder
	for _, p := range roll {
		fmt.Fprintf(&names, "pack-%s.pack\n", p)
	}
	po := git.Command(ctx, dir, nil, "pack-objects", "-q", "--delta-base-offset", "--stdin-packs", filepath.Join(packDir, "pack"))
	po.Stdin = strings.NewReader(names.String())
	out, err := po.Output()
	if err != nil {
		return false, po.Wrap(err)
	}
	newPack, err := packName(string(out))
	if err != nil {
		return false, err
	}
	var midx strings.Builder
	stays := []string{newPack}
	for _, p := range recorded {
		if !slices.Contains(roll, p) && p != newPack {
			stays = append(stays, p)
		}
	}
	// The largest pack is the preferred one: a clone sends it verbatim.
	var rolled int64
	for _, p := range roll {
		rolled += counts[p]
	}
	preferred := newPack
	for _, p := range stays {
		fmt.Fprintf(&midx, "pack-%s.idx\n", p)
		if p != newPack && counts[p] > rolled && counts[p] > counts[preferred] {
			preferred = p
		}
	}
	mi := git.Command(ctx, dir, nil, "multi-pack-index", "write", "--bitmap", "--stdin-packs", "--preferred-pack=pack-"+preferred+".pack")
	mi.Stdin = strings.NewReader(midx.String())
	if err := mi.Run(); err != nil {
		return false, mi.Wrap(err)
	}
	c.hook("packed")

	// 3. Record it, then delete what it replaced.
	recordedIt := false
	err = c.underLock(ctx, repo, func() error {
		now, err := os.Stat(dir)
		if err != nil || !os.SameFile(now, ident) {
			return errors.New("the repository was rebuilt meanwhile")
		}
		cur, err := readState(dir)
		if err != nil {
			return err
		}
		next, ok := replacePacks(st, cur, roll, newPack)
		if !ok {
			return errors.New("the packs to roll up are no longer all recorded")
		}
		if err := writeState(dir, next); err != nil {
			return err
		}
		recordedIt = true
		c.trustNew(dir, next)
		for _, p := range roll {
			for _, ext := range []string{".idx", ".pack", ".rev", ".bitmap"} {
				// .idx first: git finds packs by their index.
				if err := os.Remove(filepath.Join(packDir, "pack-"+p+ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
			}
		}
		return nil
	})
	return recordedIt, err
}

// writeBitmap writes a multi-pack index with a reachability bitmap over
// the recorded packs of the repository in dir, preferring the one with
// the most objects (a clone sends it verbatim). It changes no pack and
// records nothing: git replaces the index atomically, and an index that
// names a pack a later consolidation removes is removed with it
// (removeUnrecorded). Packs an install adds meanwhile are in neither,
// and git reads them beside the index.
func (c *Cache) writeBitmap(ctx context.Context, git *gitexec.Runner, dir string, recorded []string) error {
	if len(recorded) == 0 {
		return nil
	}
	packDir := filepath.Join(dir, "objects", "pack")
	var list strings.Builder
	preferred, most := "", int64(-1)
	for _, p := range recorded {
		n, err := idxObjects(filepath.Join(packDir, "pack-"+p+".idx"))
		if err != nil {
			return err
		}
		if n > most {
			preferred, most = p, n
		}
		fmt.Fprintf(&list, "pack-%s.idx\n", p)
	}
	mi := git.Command(ctx, dir, nil, "multi-pack-index", "write", "--bitmap", "--stdin-packs", "--preferred-pack=pack-"+preferred+".pack")
	mi.Stdin = strings.NewReader(list.String())
	if err := mi.Run(); err != nil {
		return mi.Wrap(err)
	}
	c.hook("bitmap")
	return nil
}

// removeUnrecorded deletes from packDir the packs that recorded does not
// name, and the scratch and lock files of git processes that did not
// finish, and returns how many files it deleted. It must run holding
// both the repository's lock and its consolidation lock: then no
// install, repack or consolidation is writing into packDir, and such
// files are what one that stopped between writing and recording left
// (docs/design.md §5.6). The objects of an unrecorded pack are in the
// recorded ones, so nothing is lost; left alone it would stay for as long
// as the repository is cached. A multi-pack index may name it (the
// index is written before the record), so that goes too: git then reads
// the packs one by one until the next consolidation writes a new one.
func removeUnrecorded(packDir string, recorded []string) (int, error) {
	ents, err := os.ReadDir(packDir)
	if err != nil {
		return 0, err
	}
	var idx, rest, midx []string
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, "tmp_") || strings.HasSuffix(name, ".lock") {
			rest = append(rest, name)
			continue
		}
		if strings.HasPrefix(name, "multi-pack-index") {
			midx = append(midx, name)
			continue
		}
		stem, ext, _ := strings.Cut(name, ".")
		h, ok := strings.CutPrefix(stem, "pack-")
		if !ok || !isHex(h) || slices.Contains(recorded, h) {
			continue
		}
		if ext == "idx" {
			idx = append(idx, name) // first: git finds packs by their index
		} else {
			rest = append(rest, name)
		}
	}
	if len(idx) > 0 {
		rest = append(rest, midx...)
	}
	n := 0
	for _, name := range append(idx, rest...) {
		if err := os.Remove(filepath.Join(packDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, err
		}
		n++
	}
	return n, nil
}

// underLock runs fn holding repo's materialization slot and file lock.
func (c *Cache) underLock(ctx context.Context, repo string, fn func() error) error {
	s := c.slot(repo)
	select {
	case s.run <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.run }()
	lk, err := c.lockRepo(ctx, repo)
	if err != nil {
		return err
	}
	defer lk.unlock()
	return fn()
}

// hook runs the test hook at a step of a background consolidation.
func (c *Cache) hook(step string) {
	if c.testHook != nil {
		c.testHook(step)
	}
}

// recordedNames lists the packs st records, each once, base first.
func recordedNames(st *state) []string {
	var out []string
	for _, p := range st.base.packs {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	for _, l := range st.layers {
		if l.pack != "" && !slices.Contains(out, l.pack) {
			out = append(out, l.pack)
		}
	}
	return out
}

// replacePacks returns cur with the packs of roll, recorded in snap
// through snap.seq, replaced by newPack: the base becomes everything cur
// records through snap.seq (with roll swapped for newPack) and the layers
// after snap.seq stay layers. It reports false when cur does not record
// every pack of roll through snap.seq, or its base is past snap.seq
// (another consolidation recorded since snap was read).
func replacePacks(snap, cur *state, roll []string, newPack string) (*state, bool) {
	if cur.base.seq > snap.seq || cur.seq < snap.seq {
		return nil, false
	}
	n := int(snap.seq - cur.base.seq) // cur's layers through snap.seq
	through := slices.Clone(cur.base.packs)
	for _, l := range cur.layers[:n] {
		if l.pack != "" {
			through = append(through, l.pack)
		}
	}
	for _, p := range roll {
		if !slices.Contains(through, p) {
			return nil, false
		}
	}
	// A rolled-up pack recorded again after snap.seq (a layer identical
	// to an earlier one) must stay.
	for _, l := range cur.layers[n:] {
		if slices.Contains(roll, l.pack) {
			return nil, false
		}
	}
	b := stateBase{seq: snap.seq, packs: []string{newPack}}
	for _, p := range through {
		if !slices.Contains(roll, p) && !slices.Contains(b.packs, p) {
			b.packs = append(b.packs, p)
		}
	}
	if n > 0 {
		b.last = cur.layers[n-1].id
	} else {
		b.last, b.checkpoint = cur.base.last, cur.base.checkpoint
	}
	if b.last != (ulid.ULID{}) {
		b.checkpoint = [32]byte{}
	}
	return &state{seq: cur.seq, base: b, layers: slices.Clone(cur.layers[n:])}, true
}

// geometricRoll chooses, among packs, the ones `git repack --geometric`
// with this factor would roll into one: sorted by object count, the
// smallest ones up to where the rest form a geometric progression, and
// then any of those the new pack would break the progression with.
// It also returns every pack's object count.
func geometricRoll(packDir string, packs []string, factor int64) ([]string, map[string]int64, error) {
	type weighed struct {
		name string
		n    int64
	}
	ws := make([]weighed, 0, len(packs))
	counts := make(map[string]int64, len(packs))
	for _, p := range packs {
		n, err := idxObjects(filepath.Join(packDir, "pack-"+p+".idx"))
		if err != nil {
			return nil, nil, err
		}
		ws = append(ws, weighed{p, n})
		counts[p] = n
	}
	slices.SortStableFunc(ws, func(a, b weighed) int {
		switch {
		case a.n < b.n:
			return -1
		case a.n > b.n:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	i := len(ws) - 1
	for ; i > 0; i-- {
		if ws[i].n < factor*ws[i-1].n {
			break
		}
	}
	split := i
	if split > 0 {
		split++
	}
	var total int64
	for _, w := range ws[:split] {
		total += w.n
	}
	for split < len(ws) && ws[split].n < factor*total {
		total += ws[split].n
		split++
	}
	out := make([]string, 0, split)
	for _, w := range ws[:split] {
		out = append(out, w.name)
	}
	return out, counts, nil
}

// idxObjects reads the object count of a version-2 pack index: the last
// entry of its fan-out table.
func idxObjects(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var hdr [8 + 256*4]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if string(hdr[:4]) != "\xfftOc" || binary.BigEndian.Uint32(hdr[4:8]) != 2 {
		return 0, fmt.Errorf("%s: not a version 2 pack index", path)
	}
	return int64(binary.BigEndian.Uint32(hdr[len(hdr)-4:])), nil
}

// packName reads the pack name pack-objects printed.
func packName(out string) (string, error) {
	name := strings.TrimSpace(out)
	if !isHex(name) {
		return "", fmt.Errorf("unexpected pack-objects output %q", name)
	}
	return name, nil
}
