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
				done.BlobsScanned += s.BlobsScanned
				done.BytesScanned += s.BytesScanned
				done.BinarySkipped += s.BinarySkipped
				done.BinaryScanned += s.BinaryScanned
				done.LargeSkipped += s.LargeSkipped
				done.LargeBytes += s.LargeBytes
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
	var out []Finding
	for _, ri := range e.pathOut {
		cd := candidate{rule: ri, pathOnly: true}
		if e.cfg.Rules[ri].Path.MatchString(rel) {
			if f, ok := e.locate(&cd, commitInfo{}, "", rel); ok {
				out = append(out, f)
			}
		}
	}
	if e.opts.MaxBlobSize > 0 && size > e.opts.MaxBlobSize {
		st.LargeSkipped++
		st.LargeBytes += size
		return out, st, nil
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, st, fmt.Errorf("secretscan: %w", err)
	}
	if isBinary(data) {
		if e.opts.SkipBinary {
			st.BinarySkipped++
			return out, st, nil
		}
		st.BinaryScanned++
	}
	st.BlobsScanned++
	st.BytesScanned += int64(len(data))
	cands := e.scanContent(data)
	for i := range cands {
		if f, ok := e.locate(&cands[i], commitInfo{}, "", rel); ok {
			out = append(out, f)
		}
	}
	return out, st, nil
}
