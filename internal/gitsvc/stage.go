package gitsvc

import (
	"context"
	"encoding/hex"
	"io"
	"os"

	"github.com/ghost-scm/ghost/internal/wal"
)

// staging is a push's pack on its way to the store while the push is
// validated (docs/adr/0019-staged-entries.md): the spool's pack, as the
// client sent it, streamed into a staged entry by a goroutine of its own.
type staging struct {
	stager Stager
	cancel context.CancelFunc
	done   chan struct{}
	st     *wal.Staged // set when the entry is stored
	err    error
	// committing is set once CommitStaged has the entry: from then on
	// the log's contract says what becomes of it, and stop leaves it.
	committing bool
}

// startStaging starts uploading the pack in spool[off:size] as a staged
// entry of r's push, or returns nil when the push is not staged (the
// committer cannot stage, or the pack is below Options.StageMinBytes).
// The caller calls stop once it no longer needs the spool.
func (s *Service) startStaging(ctx context.Context, r Request, cmds []command, spool *os.File, off, size int64) *staging {
	stager, ok := s.opts.Commits.(Stager)
	if !ok || s.opts.StageMinBytes < 0 || size-off < s.opts.StageMinBytes {
		return nil
	}
	ts := make([]wal.Transition, len(cmds))
	for i, c := range cmds {
		ts[i] = wal.Transition{Ref: c.Ref, Old: c.Old, New: c.New}
	}
	ctx, cancel := context.WithCancel(ctx)
	g := &staging{stager: stager, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		g.st, g.err = stager.Stage(ctx, r.Repo, wal.Push{
			Transitions: ts, PushedBy: r.Principal,
			Pack: io.NewSectionReader(spool, off, size-off), PackSize: size - off,
		})
	}()
	return g
}

// wait returns the staged entry once its upload has ended. The caller
// that goes on to commit it sets committing first.
func (g *staging) wait() (*wal.Staged, error) {
	<-g.done
	return g.st, g.err
}

// stop ends the upload if it still runs and deletes the staged entry
// unless it is being committed. A delete that fails leaves an orphan
// that no index references, which garbage collection removes after its
// grace (docs/adr/0040-garbage-collection.md). It is a no-op on nil.
func (g *staging) stop() {
	if g == nil {
		return
	}
	g.cancel()
	<-g.done
	if g.st != nil && !g.committing {
		g.stager.Discard(g.st)
		g.st = nil
	}
}

// spooledIsValidated reports whether the spool's pack (spool[off:size])
// is byte for byte the validated pack: the same length, and a trailer
// (the pack's SHA-1 checksum, which index-pack verified against its
// contents) that is the validated pack's name. It is not when index-pack
// completed a thin pack (--fix-thin rewrites the header and appends the
// bases) or when bytes followed the pack.
func spooledIsValidated(spool *os.File, off, size int64, packHash string, packSize int64) (bool, error) {
	if size-off != packSize || packSize < 20 {
		return false, nil
	}
	var sum [20]byte
	if _, err := spool.ReadAt(sum[:], size-20); err != nil {
		return false, err
	}
	return hex.EncodeToString(sum[:]) == packHash, nil
}
