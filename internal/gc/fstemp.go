package gc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// SweepTemps removes the filesystem store's leftover temporaries: files
// named put-* directly in dir (fsstore's <root>/tmp, docs/design.md §2.2)
// whose modification time is older than olderThan. A write that a crash
// interrupted leaves one; a write in progress keeps touching its file, and
// the callers' olderThan is the grace period, hours longer than any write.
// The modification time is the right clock here, unlike for log objects:
// it is the local filesystem's, the clock of the machine that wrote it.
//
// It lives here rather than in fsstore only because fsstore is owned
// elsewhere for now; it depends on nothing but the temp file names. fn,
// when set, is called for each file removed (or, in a dry run, that would
// be). A missing dir is not an error: the store may be empty.
func SweepTemps(dir string, olderThan time.Duration, now time.Time, dryRun bool, fn func(path string, size int64)) (int, int64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("gc: temporaries: %w", err)
	}
	var n int
	var bytes int64
	var errs []error
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), "put-") {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // renamed into place meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if now.Sub(info.ModTime()) <= olderThan {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if !dryRun {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("gc: temporaries: %w", err))
				continue
			}
		}
		n++
		bytes += info.Size()
		if fn != nil {
			fn(p, info.Size())
		}
	}
	return n, bytes, errors.Join(errs...)
}
