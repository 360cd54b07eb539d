package secretscan

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ghost-scm/ghost/internal/wal"
)

// RefTip is a ref and the object it points at (or will point at, for a
// ref a push updates).
type RefTip struct {
	Ref, Tip string
}

// Reach is where a blob is found: a ref that reaches it, and the path git
// rev-list --objects gives it under that ref ("" for an object the ref's
// tag names directly).
type Reach struct {
	Ref, Path string
}

// Locate finds, for each of ids, a ref of refs that reaches it and its
// path there. It walks the refs in order with git rev-list --objects
// <tip> --not <not...> <the tips before it> (not holds revision
// arguments, such as "--all"), so that every object is listed
// once, under the first ref that reaches it, and stops as soon as every
// id is found. Ids no walk reaches are absent from the answer.
//
// This is the rare path of a scan (AttributeAll's Unplaced): a blob no
// diff adds. Push protection walks the refs a push updates with not
// ["--all"], so each walk costs what the push adds; a scan run walks the
// refs that peel to a tree or a blob (TreeAndBlobRefs), which reach little.
func Locate(ctx context.Context, repo Repo, refs []RefTip, not []string, ids []string) (map[string]Reach, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	found := make(map[string]Reach, len(ids))
	var before strings.Builder
	for _, r := range refs {
		if len(found) == len(want) {
			break
		}
		if !wal.IsObjectID(r.Tip) {
			return nil, fmt.Errorf("secretscan: locate: ref %s: bad object id %q", r.Ref, r.Tip)
		}
		if err := locateUnder(ctx, repo, r, before.String(), not, want, found); err != nil {
			return nil, err
		}
		before.WriteString("^" + r.Tip + "\n")
	}
	return found, nil
}

// errFoundAll stops a walk early.
var errFoundAll = errors.New("all found")

func locateUnder(ctx context.Context, repo Repo, r RefTip, before string, not []string, want map[string]bool, found map[string]Reach) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	args := []string{"rev-list", "--objects", "--stdin"}
	if len(not) > 0 {
		args = append(append(args, "--not"), not...)
	}
	cmd := repo.command(ctx, args...)
	cmd.Stdin = strings.NewReader(r.Tip + "\n" + before)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("secretscan: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("secretscan: start git rev-list: %w", err)
	}
	br := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if id, path, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " "); want[id] {
			if _, ok := found[id]; !ok {
				found[id] = Reach{Ref: r.Ref, Path: path}
				if len(found) == len(want) {
					cancel(errFoundAll)
					break
				}
			}
		}
		if err != nil {
			break
		}
	}
	io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if context.Cause(ctx) == errFoundAll {
		return nil
	}
	if werr != nil {
		return gitError(cmd, args, werr)
	}
	return nil
}

// TreeAndBlobRefs returns the refs of repo whose object, once every tag
// is peeled, is a tree or a blob: the only way a blob can be reachable
// without some commit's diff adding it. A scan run hands them to Locate.
func TreeAndBlobRefs(ctx context.Context, repo Repo) ([]RefTip, error) {
	args := []string{"for-each-ref", "--format=%(objectname) %(objecttype) %(refname)"}
	cmd := repo.command(ctx, args...)
	out, err := cmd.Output()
	if err != nil {
		return nil, gitError(cmd, args, err)
	}
	var tags []RefTip
	var refs []RefTip
	for line := range strings.Lines(string(out)) {
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 3)
		if len(f) != 3 {
			continue
		}
		switch f[1] {
		case "tree", "blob":
			refs = append(refs, RefTip{Ref: f[2], Tip: f[0]})
		case "tag":
			tags = append(tags, RefTip{Ref: f[2], Tip: f[0]})
		}
	}
	if len(tags) == 0 {
		return refs, nil
	}
	// Peel every tag at once: cat-file takes <id>^{} and answers the
	// type of what the chain of tags ends at.
	var in strings.Builder
	for _, t := range tags {
		in.WriteString(t.Tip + "^{}\n")
	}
	pargs := []string{"cat-file", "--batch-check=%(objecttype)"}
	pc := repo.command(ctx, pargs...)
	pc.Stdin = strings.NewReader(in.String())
	pout, err := pc.Output()
	if err != nil {
		return nil, gitError(pc, pargs, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(pout), "\n"), "\n")
	if len(lines) != len(tags) {
		return nil, fmt.Errorf("secretscan: git cat-file answered %d lines for %d tags", len(lines), len(tags))
	}
	for i, t := range tags {
		if lines[i] == "tree" || lines[i] == "blob" {
			refs = append(refs, t)
		}
	}
	slices.SortFunc(refs, func(a, b RefTip) int { return strings.Compare(a.Ref, b.Ref) })
	return refs, nil
}

// LocatedFindings reports the candidates of the blobs ids (AttributeAll's
// Unplaced) where reach says they are: with no commit, at the path under
// the ref that reaches them, or at neither when no ref does. Path-only
// candidates need a path that matches their rule. The findings are in
// the order of ids.
func (s *BlobScan) LocatedFindings(ids []string, reach map[string]Reach) []Finding {
	var out []Finding
	for _, id := range ids {
		cands := s.blobs[id]
		at := reach[id]
		for i := range cands {
			cd := &cands[i]
			if cd.pathOnly && !s.e.cfg.Rules[cd.rule].Path.MatchString(at.Path) {
				continue
			}
			if f, ok := s.e.locate(cd, commitInfo{}, id, at.Path); ok {
				f.Ref = at.Ref
				out = append(out, f)
			}
		}
	}
	return out
}

// MessageFindings reports the candidates found in commit and tag objects
// (Options.Messages), each at its object: Source says which kind, BlobID
// is the object's id, Commit the commit's (empty for a tag), and the line
// counts from the object's first header line. Rules restricted to paths
// do not apply to a message. The findings are in object id order.
func (s *BlobScan) MessageFindings() []Finding {
	ids := make([]string, 0, len(s.messages))
	for id := range s.messages {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []Finding
	for _, id := range ids {
		m := s.messages[id]
		c := commitInfo{}
		if m.source == SourceCommitMessage {
			c.hash = id
		}
		for i := range m.cands {
			if f, ok := s.e.locate(&m.cands[i], c, id, ""); ok {
				f.Source = m.source
				out = append(out, f)
			}
		}
	}
	return out
}

// CandidateBlobs returns the blobs with candidates, sorted.
func (s *BlobScan) CandidateBlobs() []string {
	ids := make([]string, 0, len(s.blobs))
	for id := range s.blobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
