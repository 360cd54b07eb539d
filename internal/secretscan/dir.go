package secretscan

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
)

// ScanDir scans the regular files under root (not following symlinks,
// skipping .git directories), like gitleaks dir. Findings carry the
// slash-separated path relative to root and no commit.
func (e *Engine) ScanDir(ctx context.Context, root string, progress ProgressFunc) ([]Finding, Stats, error) {
	type file struct {
		rel  string
		size int64
	}
	var (
		files []file
		st    Stats
	)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, file{filepath.ToSlash(rel), info.Size()})
		st.Blobs++
		st.Bytes += info.Size()
		return nil
	})
	if err != nil {
		return nil, st, fmt.Errorf("secretscan: walk %s: %w", root, err)
	}
	total := st
	if progress != nil {
		progress(Stats{}, total)
	}

	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		findings []Finding
		done     Stats
		firstErr error
		next     = make(chan file)
	)
	for range e.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range next {
				fs, s, err := e.scanFile(root, f.rel, f.size)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				findings = append(findings, fs...)
				done.Blobs++
				done.Bytes += f.size
				done.Add(s)
				if progress != nil {
					progress(done, total)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, f := range files {
		select {
		case next <- f:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, st, err
	}
	if firstErr != nil {
		return nil, st, firstErr
	}
	st.BlobsScanned, st.BytesScanned = done.BlobsScanned, done.BytesScanned
	st.BinarySkipped, st.BinaryScanned, st.LargeSkipped, st.LargeBytes = done.BinarySkipped, done.BinaryScanned, done.LargeSkipped, done.LargeBytes
	sort.Slice(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		if a.StartLine != b.StartLine {
			return a.StartLine < b.StartLine
		}
		return a.RuleID < b.RuleID
	})
	return findings, st, nil
}

func (e *Engine) scanFile(root, rel string, size int64) ([]Finding, Stats, error) {
	var st Stats
	var here []*candidate
	for _, ri := range e.pathOut {
		if e.cfg.Rules[ri].Path.MatchString(rel) {
			here = append(here, &candidate{rule: ri, pathOnly: true})
		}
	}
	if e.opts.MaxBlobSize > 0 && size > e.opts.MaxBlobSize {
		st.LargeSkipped++
		st.LargeBytes += size
		return e.findingsAt(here, commitInfo{}, "", rel), st, nil
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, st, fmt.Errorf("secretscan: %w", err)
	}
	fs, st := e.ScanBytes(rel, data)
	return fs, st, nil
}

// ScanBytes scans content held outside git, as the file at path: a Git
// LFS object, whose bytes live in the object store while git holds only
// its pointer. Path-only rules match path; binary content is skipped when
// Options.SkipBinary says so. The findings carry no blob or commit: the
// caller places them.
func (e *Engine) ScanBytes(path string, content []byte) ([]Finding, Stats) {
	var st Stats
	var here []*candidate
	for _, ri := range e.pathOut {
		if e.cfg.Rules[ri].Path.MatchString(path) {
			here = append(here, &candidate{rule: ri, pathOnly: true})
		}
	}
	if e.opts.MaxBlobSize > 0 && int64(len(content)) > e.opts.MaxBlobSize {
		st.LargeSkipped++
		st.LargeBytes += int64(len(content))
		return e.findingsAt(here, commitInfo{}, "", path), st
	}
	if isBinary(content) {
		if e.opts.SkipBinary {
			st.BinarySkipped++
			return e.findingsAt(here, commitInfo{}, "", path), st
		}
		st.BinaryScanned++
	}
	st.BlobsScanned++
	st.BytesScanned += int64(len(content))
	cands := e.scanContent(content)
	for i := range cands {
		here = append(here, &cands[i])
	}
	return e.findingsAt(here, commitInfo{}, "", path), st
}
