package pushprotect

import (
	"cmp"
	"fmt"
	"strconv"
	"unicode"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/secretscan"
)

// The messages follow the layout of GitHub's push protection, which users
// recognise: a header, the secrets grouped by type with each location's
// commit and path:line, at most MaxListed locations and "and N more",
// then how to proceed. git prints each line as "remote: <line>".

const rule = "  —————————————————————————————————————————"

func (s *Checker) blockedMessage(fs []secretscan.Finding) []string {
	out := []string{
		"error: push declined: the push contains secrets",
		"",
		"- GHOST PUSH PROTECTION",
		rule,
		"    Resolve the following violations before pushing again",
		"",
		"    - Push cannot contain secrets",
		"",
	}
	out = append(out, s.locations(fs)...)
	out = append(out,
		"     (?) To push, remove the secrets from the commits (git commit --amend,",
		"         git rebase -i), or, if they are not a risk, bypass push protection:",
		"         git push -o "+BypassOption+"=<reason>",
		fmt.Sprintf("         with <reason> one of %s, %s, %s.", alerts.BypassFalsePositive, alerts.BypassUsedInTests, alerts.BypassWillFixLater),
		"         A bypass is recorded as an alert of the repository.",
		"",
	)
	return out
}

func (s *Checker) tooManyMessage(fs []secretscan.Finding) []string {
	out := []string{
		"error: push declined: the push contains secrets",
		"",
		"- GHOST PUSH PROTECTION",
		rule,
		fmt.Sprintf("    The push contains %d secrets; one push may bypass at most %d.", len(fs), s.opts.MaxBypass),
		"    Remove them from the commits, or push in smaller parts.",
		"",
	}
	return append(out, s.locations(fs)...)
}

func (s *Checker) bypassedMessage(fs []secretscan.Finding, reason alerts.BypassReason) []string {
	out := []string{
		"",
		"- GHOST PUSH PROTECTION",
		rule,
		fmt.Sprintf("    Push protection bypassed (%s) for %d secret(s);", reason, len(fs)),
		"    each bypass is recorded as an alert of the repository.",
		"",
	}
	return append(out, s.locations(fs)...)
}

// locations lists findings grouped by secret type, in order of first
// appearance, at most MaxListed locations in all; it ends with a blank
// line.
func (s *Checker) locations(fs []secretscan.Finding) []string {
	var order []string
	byRule := map[string][]*secretscan.Finding{}
	for i := range fs {
		f := &fs[i]
		if _, ok := byRule[f.RuleID]; !ok {
			order = append(order, f.RuleID)
		}
		byRule[f.RuleID] = append(byRule[f.RuleID], f)
	}
	var out []string
	listed := 0
	for _, id := range order {
		if listed == s.opts.MaxListed {
			break
		}
		out = append(out, "      —— "+id+" ——————————————————————", "       locations:")
		for _, f := range byRule[id] {
			if listed == s.opts.MaxListed {
				break
			}
			out = append(out, locationLines(f)...)
			listed++
		}
		out = append(out, "")
	}
	if n := len(fs) - listed; n > 0 {
		out = append(out, fmt.Sprintf("      and %d more (%d in all)", n, len(fs)), "")
	}
	return out
}

// locationLines are the two lines of one location: the object (commit,
// tag, or the ref that reaches a blob no commit adds) and the place in it.
func locationLines(f *secretscan.Finding) []string {
	const first, second = "         - ", "           "
	switch {
	case f.Source == secretscan.SourceCommitMessage:
		return []string{first + "commit: " + f.Commit, fmt.Sprintf("%scommit message, line %d", second, f.StartLine)}
	case f.Source == secretscan.SourceTagMessage:
		return []string{first + "tag: " + f.BlobID, fmt.Sprintf("%stag message, line %d", second, f.StartLine)}
	case f.Commit != "":
		return []string{first + "commit: " + f.Commit, fmt.Sprintf("%spath: %s:%d", second, printable(f.Path), f.StartLine)}
	}
	head := first + "ref: " + printable(f.Ref) + " (no commit adds it)"
	if f.Ref == "" {
		head = first + "blob: " + f.BlobID + " (no commit adds it)"
	}
	if f.Path == "" {
		return []string{head, fmt.Sprintf("%sblob %s, line %d", second, f.BlobID, f.StartLine)}
	}
	return []string{head, fmt.Sprintf("%spath: %s:%d", second, printable(f.Path), f.StartLine)}
}

// where names a finding's location on one line, for errors and logs.
func where(f *secretscan.Finding) string {
	switch {
	case f.Source == secretscan.SourceCommitMessage:
		return fmt.Sprintf("commit message of %s, line %d", f.Commit, f.StartLine)
	case f.Source == secretscan.SourceTagMessage:
		return fmt.Sprintf("tag message of %s, line %d", f.BlobID, f.StartLine)
	case f.Commit != "":
		return fmt.Sprintf("%s:%d in %s", printable(f.Path), f.StartLine, f.Commit)
	}
	return fmt.Sprintf("%s:%d (blob %s, reached from %s)", printable(f.Path), f.StartLine, f.BlobID, printable(f.Ref))
}

// printable returns s, quoted as a Go string when it holds anything a
// terminal would interpret (a path or ref name may hold escape
// sequences): git prints these lines as they come.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// maxUnscannedListed bounds the unscanned LFS objects a message names.
const maxUnscannedListed = 10

func (s *Checker) unscannedMessage(objs []LFSObject) []string {
	budget := cmp.Or(s.opts.MaxLFSBytes, DefaultMaxLFSBytes)
	out := []string{
		"error: push declined: Git LFS objects could not be scanned for secrets",
		"",
		"- GHOST PUSH PROTECTION",
		rule,
		fmt.Sprintf("    This push adds Git LFS objects past the %s push protection reads", mib(budget)),
		"    before a push lands; it scanned the others, in order of risk:",
		"",
	}
	out = append(out, listObjects(objs)...)
	out = append(out,
		"",
		"     (?) Push them in smaller pushes (fewer large files each), or ask a",
		"         writer of the repository to scan Git LFS objects after the push:",
		"         ghost repo set <owner>/<name> --lfs-scan-after-push on",
		"         (they then land, and the push's scan run alerts on their secrets).",
		"",
	)
	return out
}

func (s *Checker) scanLaterMessage(objs []LFSObject) []string {
	out := []string{
		"",
		"- GHOST PUSH PROTECTION",
		rule,
		fmt.Sprintf("    %d Git LFS object(s) were too large to scan before the push; the", len(objs)),
		"    repository scans them after it, and alerts on what it finds:",
		"",
	}
	return append(append(out, listObjects(objs)...), "")
}

func listObjects(objs []LFSObject) []string {
	var out []string
	for i, o := range objs {
		if i == maxUnscannedListed {
			out = append(out, fmt.Sprintf("       and %d more (%d in all)", len(objs)-i, len(objs)))
			break
		}
		out = append(out, fmt.Sprintf("       - %s (%s, sha256:%s)", printable(o.Path), mib(o.Size), o.OID))
	}
	return out
}

// mib writes n bytes in MiB, or in bytes under one.
func mib(n int64) string {
	if n < 1<<20 {
		return strconv.FormatInt(n, 10) + " bytes"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}
