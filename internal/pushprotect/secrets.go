package pushprotect

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/secretscan"
)

// secretsOf finds the clear-text secret of each bypassed finding, so that
// its alert can reveal it as any alert holding a secret does (issue 21
// §2; docs/adr/0070-alert-store.md). The engine hands out no secrets, only
// their places and fingerprints, so the secret is read back from the
// object at the finding's place (the match spans StartLine:StartColumn to
// EndLine:EndColumn), the rule's regular expression picks the secret out
// of the match as the engine does, and it is kept only if its HMAC under
// the tenant's key is the finding's fingerprint. A finding in decoded
// text (base64 and the like), a path-only rule, or anything that does not
// check out gets no secret: the alert is then recorded as before, with
// nothing to reveal, never refused.
//
// Findings in Git LFS objects take their bytes from held (by the
// pointer's blob id). It reads each other object holding a finding once, with one git cat-file
// --batch; what a push bypasses is bounded (Options.MaxBypass), and so is
// each object (Options.MaxBlobSize, applied by the scan).
func (s *Checker) secretsOf(ctx context.Context, repo secretscan.Repo, key []byte, fs []secretscan.Finding, held map[string][]byte) map[int]string {
	out := map[int]string{}
	byObject := map[string][]int{}
	var order []string
	for i := range fs {
		f := &fs[i]
		if s.rule(f.RuleID) == nil || f.StartLine < 1 || f.StartColumn < 1 || strings.HasPrefix(f.Match, "file detected:") {
			continue
		}
		if content, ok := held[f.BlobID]; ok { // a Git LFS object's bytes
			if secret, ok := s.secretAt(content, f); ok && fingerprint(key, secret) == f.Fingerprint {
				out[i] = secret
			}
			continue
		}
		if _, seen := byObject[f.BlobID]; !seen {
			order = append(order, f.BlobID)
		}
		byObject[f.BlobID] = append(byObject[f.BlobID], i)
	}
	if len(order) == 0 {
		return out
	}
	cmd := command(ctx, repo, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(order, "\n") + "\n")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return out
	}
	if err := cmd.Start(); err != nil {
		return out
	}
	br := bufio.NewReaderSize(stdout, 64<<10)
	for range order {
		content, id, err := readBatch(br)
		if err != nil {
			break
		}
		for _, i := range byObject[id] {
			f := &fs[i]
			if secret, ok := s.secretAt(content, f); ok && fingerprint(key, secret) == f.Fingerprint {
				out[i] = secret
			}
		}
	}
	io.Copy(io.Discard, stdout)
	cmd.Wait()
	return out
}

// readBatch reads one object of git cat-file --batch: "<id> <type>
// <size>\n<content>\n", or "<id> missing\n".
func readBatch(br *bufio.Reader) ([]byte, string, error) {
	head, err := br.ReadString('\n')
	if err != nil {
		return nil, "", err
	}
	fields := strings.Fields(head)
	if len(fields) != 3 {
		return nil, "", fmt.Errorf("pushprotect: git cat-file printed %q", clip(head, 100))
	}
	size, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil || size < 0 || size > 1<<31 {
		return nil, "", fmt.Errorf("pushprotect: git cat-file printed %q", clip(head, 100))
	}
	content := make([]byte, size+1) // and the newline after it
	if _, err := io.ReadFull(br, content); err != nil {
		return nil, "", err
	}
	return content[:size], fields[0], nil
}

// rule returns the rule with id, if it has a regular expression.
func (s *Checker) rule(id string) *secretscan.Rule {
	for _, r := range s.cfg.Rules {
		if r.ID == id && r.Regex != nil {
			return r
		}
	}
	return nil
}

// secretAt cuts the finding's match out of content and picks the secret
// out of it as the engine does: the rule's secret group, else its first
// group that matched, else the whole match.
func (s *Checker) secretAt(content []byte, f *secretscan.Finding) (string, bool) {
	lines := strings.SplitAfter(string(content), "\n")
	if f.EndLine < f.StartLine || f.EndLine > len(lines) {
		return "", false
	}
	first := lines[f.StartLine-1]
	last := lines[f.EndLine-1]
	if f.StartColumn-1 > len(first) || f.EndColumn > len(last) || f.EndColumn < 0 {
		return "", false
	}
	var match string
	if f.StartLine == f.EndLine {
		if f.EndColumn < f.StartColumn-1 {
			return "", false
		}
		match = first[f.StartColumn-1 : f.EndColumn]
	} else {
		match = first[f.StartColumn-1:] + strings.Join(lines[f.StartLine:f.EndLine-1], "") + last[:f.EndColumn]
	}
	r := s.rule(f.RuleID)
	secret := match
	if groups := r.Regex.FindStringSubmatch(match); len(groups) >= 2 {
		switch {
		case r.SecretGroup > 0 && r.SecretGroup < len(groups):
			secret = groups[r.SecretGroup]
		case r.SecretGroup > 0:
			return "", false
		default:
			for _, g := range groups[1:] {
				if g != "" {
					secret = g
					break
				}
			}
		}
	}
	return secret, secret != ""
}

// fingerprint is the alert store's: hex HMAC-SHA256 of the secret under
// the tenant's key.
func fingerprint(key []byte, secret string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(secret))
	return hex.EncodeToString(m.Sum(nil))
}
