package secretscan

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Source says what kind of object held a finding's secret.
type Source string

// The sources. A file is a blob at a path; a message is a commit or tag
// object, scanned whole (headers and message, as git cat-file -p prints
// it), whose line numbers count from the object's first line.
const (
	SourceFile          Source = ""
	SourceCommitMessage Source = "commit-message"
	SourceTagMessage    Source = "tag-message"
)

// Finding is one secret at one place in history: the commit that added it
// at Path (empty in a directory scan). It carries no clear-text secret.
//
// A finding in a commit or tag message has Source set, BlobID the
// object's id, Commit the commit's id (empty for a tag) and no Path. A
// finding in a blob that no diff of the scanned commits adds (a blob
// reached only through a tag of a tree or blob, or through no ref at
// all) has no Commit; Ref names a ref that reaches it, when one does, and
// Path is where under that ref.
type Finding struct {
	RuleID      string
	Description string
	BlobID      string
	Commit      string
	Path        string
	Source      Source
	Ref         string
	StartLine   int
	EndLine     int
	StartColumn int
	EndColumn   int
	// Match is the regexp match with the secret replaced by "REDACTED".
	Match   string
	Entropy float32
	Tags    []string
	// Fingerprint is the hex HMAC-SHA256 of the secret under
	// Options.FingerprintKey: equal secrets compare equal within a key.
	Fingerprint string
	// Commit metadata, for gitleaks-compatible reports.
	Author, Email, Date, Message string
}

// GitleaksFingerprint is gitleaks' identifier of a finding,
// commit:path:rule:line (path:rule:line without a commit), the format
// of .gitleaksignore entries.
func (f *Finding) GitleaksFingerprint() string {
	if f.Commit == "" {
		return fmt.Sprintf("%s:%s:%d", f.Path, f.RuleID, f.StartLine)
	}
	return fmt.Sprintf("%s:%s:%s:%d", f.Commit, f.Path, f.RuleID, f.StartLine)
}

// Stats counts a scan's work. Skipped blobs are counted, never silent.
type Stats struct {
	Blobs         int64 // blobs enumerated
	Bytes         int64 // their total size
	BlobsScanned  int64
	BytesScanned  int64
	BinarySkipped int64 // binary blobs skipped (Options.SkipBinary)
	BinaryScanned int64 // binary blobs scanned, of BlobsScanned
	LargeSkipped  int64 // blobs and messages over Options.MaxBlobSize
	LargeBytes    int64 // bytes of LargeSkipped objects
	// PathSkipped counts the blobs ScanRevs never read: every path the
	// history adds them at is excluded by the global allowlist.
	PathSkipped int64
	// BlobsChanged counts the blobs of BlobsScanned that ScanRevs
	// matched only around the lines their base lacks, and BytesChanged
	// the bytes of those lines (docs/adr/0120-scanner-speed.md).
	BlobsChanged int64
	BytesChanged int64
	// Commit and tag objects enumerated and scanned (Options.Messages).
	Messages        int64
	MessageBytes    int64
	MessagesScanned int64
}

// Add adds o's counts to s.
func (s *Stats) Add(o Stats) {
	s.Blobs += o.Blobs
	s.Bytes += o.Bytes
	s.BlobsScanned += o.BlobsScanned
	s.BytesScanned += o.BytesScanned
	s.BinarySkipped += o.BinarySkipped
	s.BinaryScanned += o.BinaryScanned
	s.LargeSkipped += o.LargeSkipped
	s.LargeBytes += o.LargeBytes
	s.PathSkipped += o.PathSkipped
	s.BlobsChanged += o.BlobsChanged
	s.BytesChanged += o.BytesChanged
	s.Messages += o.Messages
	s.MessageBytes += o.MessageBytes
	s.MessagesScanned += o.MessagesScanned
}

// Ignore is a parsed .gitleaksignore: gitleaks fingerprints, one a line,
// either commit:path:rule:line or path:rule:line; # starts a comment.
type Ignore struct {
	set map[string]struct{}
}

// ParseIgnore reads .gitleaksignore content.
func ParseIgnore(r io.Reader) (*Ignore, error) {
	ig := &Ignore{set: make(map[string]struct{})}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := strings.Split(line, ":")
		switch len(s) {
		case 3:
			s[0] = strings.ReplaceAll(s[0], `\`, "/")
		case 4:
			s[1] = strings.ReplaceAll(s[1], `\`, "/")
		default:
			continue // gitleaks warns and ignores such lines too
		}
		ig.set[strings.Join(s, ":")] = struct{}{}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("secretscan: read .gitleaksignore: %w", err)
	}
	return ig, nil
}

// LoadIgnore reads a .gitleaksignore file; a missing file is an empty list.
func LoadIgnore(path string) (*Ignore, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return &Ignore{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	defer f.Close()
	return ParseIgnore(f)
}

// Ignored reports whether f matches an entry, with or without its commit.
func (ig *Ignore) Ignored(f *Finding) bool {
	if ig == nil || len(ig.set) == 0 {
		return false
	}
	if _, ok := ig.set[fmt.Sprintf("%s:%s:%d", f.Path, f.RuleID, f.StartLine)]; ok {
		return true
	}
	if f.Commit == "" {
		return false
	}
	_, ok := ig.set[f.GitleaksFingerprint()]
	return ok
}
