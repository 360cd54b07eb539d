package clustertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore"
)

// report gathers every check's figures and findings.
type report struct {
	cfg     config
	repro   string
	faults  []fault
	rec     *recorder
	load    time.Duration // load start to healed
	runtime time.Duration

	failures []string // one line per failed check; details are in sections
	sections []string
}

func (r *report) fail(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *report) section(title string, lines ...string) {
	r.sections = append(r.sections, "== "+title+"\n"+strings.Join(lines, "\n"))
}

func (r *report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster fault test %q, seed %d, runtime %v (load and healing %v)\n", r.cfg.Name, r.cfg.Seed, r.runtime.Round(time.Second), r.load.Round(time.Second))
	fmt.Fprintf(&b, "reproduce: %s\n", r.repro)
	for _, s := range r.sections {
		b.WriteString(s)
		b.WriteString("\n")
	}
	if len(r.failures) == 0 {
		b.WriteString("== result: every check passed\n")
	} else {
		fmt.Fprintf(&b, "== result: %d checks failed\n", len(r.failures))
		for _, f := range r.failures {
			b.WriteString("  FAIL " + f + "\n")
		}
	}
	return b.String()
}

// graph is a repository's refs and commit graph, read from a clone.
type graph struct {
	refs    map[string]string   // every ref to its id
	parents map[string][]string // commit to parents
	objects map[string]bool     // every object the refs reach
}

// readGraph reads the refs and the commit graph of the repository in
// dir, and with objects every object the refs reach.
func readGraph(ctx context.Context, env []string, dir string, objects bool) (*graph, error) {
	g := &graph{refs: map[string]string{}, parents: map[string][]string{}, objects: map[string]bool{}}
	out, err := runGit(ctx, env, dir, "for-each-ref", "--format=%(refname) %(objectname)")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if ref, id, ok := strings.Cut(line, " "); ok {
			g.refs[ref] = id
		}
	}
	if out, err = runGit(ctx, env, dir, "log", "--all", "--format=%H %P"); err != nil {
		return nil, err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			g.parents[f[0]] = f[1:]
		}
	}
	if !objects {
		return g, nil
	}
	if out, err = runGit(ctx, env, dir, "rev-list", "--objects", "--all"); err != nil {
		return nil, err
	}
	for _, line := range strings.Split(out, "\n") {
		if id, _, _ := strings.Cut(line, " "); id != "" {
			g.objects[id] = true
		}
	}
	return g, nil
}

// reach is every commit tip reaches.
func (g *graph) reach(tip string) map[string]bool {
	seen := map[string]bool{}
	for stack := []string{tip}; len(stack) > 0; {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !seen[id] {
			seen[id] = true
			stack = append(stack, g.parents[id]...)
		}
	}
	return seen
}

// firstParents is the first-parent line from tip down: a ref's history is
// a chain exactly when every acknowledged tip lies on it.
func (g *graph) firstParents(tip string) map[string]bool {
	line := map[string]bool{}
	for id := tip; id != "" && !line[id]; {
		line[id] = true
		ps := g.parents[id]
		if len(ps) == 0 {
			break
		}
		id = ps[0]
	}
	return line
}

// finals holds node 0's view of each repository after healing.
type finals map[string]*graph // repo name to graph

// checkGitData clones every repository from every node and from a fresh
// node with an empty cache, and checks that the clones agree, pass fsck,
// and hold every acknowledged push on a chain.
func checkGitData(ctx context.Context, t *testing.T, c *cluster, r *report) finals {
	fresh := c.addNode(t, "fresh")
	defer fresh.shutdown(20 * time.Second)
	env := gittest.Env(filepath.Join(c.dir, "checks"))
	final := finals{}
	var lines []string
	identical, fsckClean := true, true
	for _, repo := range c.repos {
		var first *graph
		for n := range c.nodeURLs {
			name := c.nodes[n].name
			dir := filepath.Join(c.dir, "checks", strings.ReplaceAll(repo.Name, "/", "-")+"-"+name+".git")
			var err error
			for attempt := range 3 {
				os.RemoveAll(dir)
				if _, err = runGit(ctx, env, filepath.Dir(dir), "clone", "-q", "--mirror", c.remote(n, repo.Name), dir); err == nil {
					break
				}
				time.Sleep(time.Duration(attempt+1) * 2 * time.Second)
			}
			if err != nil {
				r.fail("clone of %s from %s after healing: %v", repo.Name, name, err)
				identical = false
				continue
			}
			if out, err := runGit(ctx, env, dir, "fsck", "--full", "--strict", "--no-dangling"); err != nil {
				r.fail("fsck of %s cloned from %s: %v", repo.Name, name, err)
				fsckClean = false
			} else if strings.TrimSpace(out) != "" {
				lines = append(lines, fmt.Sprintf("  fsck of %s from %s says: %s", repo.Name, name, strings.TrimSpace(out)))
			}
			g, err := readGraph(ctx, env, dir, true)
			if err != nil {
				r.fail("reading the clone of %s from %s: %v", repo.Name, name, err)
				continue
			}
			if first == nil {
				first = g
				final[repo.Name] = g
				lines = append(lines, fmt.Sprintf("  %s: %d refs, %d commits, %d objects", repo.Name, len(g.refs), len(g.parents), len(g.objects)))
				continue
			}
			if diff := refDiff(first.refs, g.refs); diff != "" {
				r.fail("the clone of %s from %s differs from node0's: %s", repo.Name, name, diff)
				identical = false
			}
		}
	}
	lines = append(lines, fmt.Sprintf("  clones from %d nodes (one fresh, empty cache) identical: %v; fsck --full --strict clean: %v", len(c.nodeURLs), identical, fsckClean))

	checked, forced, missing := chainProblems(r.rec.acked, final)
	lines = append(lines, fmt.Sprintf("  acknowledged pushes: %d (%d forced); checked on their ref's chain: %d; missing or off the chain: %d", len(r.rec.acked), forced, checked, len(missing)))
	lines = append(lines, missing...)
	if len(missing) > 0 {
		r.fail("%d acknowledged pushes missing or off their ref's chain (see the git data section)", len(missing))
	}
	r.section("git data after healing", lines...)
	return final
}

// chainProblems checks that every acknowledged push is present and each
// ref's acknowledged history a chain: from the ref's last acknowledged
// force push on (or from its first push), every acknowledged tip lies on
// the final tip's first-parent line. Clients never merge, so a chain of
// tips is exactly that.
func chainProblems(acked []pushRecord, final finals) (checked, forced int, problems []string) {
	byRef := map[string][]pushRecord{}
	for _, p := range acked {
		byRef[p.Repo+" "+p.Ref] = append(byRef[p.Repo+" "+p.Ref], p)
		if p.Forced {
			forced++
		}
	}
	keys := make([]string, 0, len(byRef))
	for k := range byRef {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		ps := byRef[key]
		repo, ref, _ := strings.Cut(key, " ")
		g := final[repo]
		if g == nil {
			problems = append(problems, fmt.Sprintf("  %s: no clone to check %d acknowledged pushes against", repo, len(ps)))
			continue
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].End.Before(ps[j].End) })
		from := 0
		for i, p := range ps {
			if p.Forced {
				from = i
			}
		}
		tip, ok := g.refs[ref]
		if !ok {
			problems = append(problems, fmt.Sprintf("  %s %s: the ref is gone; %d pushes to it were acknowledged, the last %s", repo, ref, len(ps), ps[len(ps)-1].New))
			continue
		}
		line := g.firstParents(tip)
		for _, p := range ps[from:] {
			checked++
			if !line[p.New] {
				where := "not in the repository"
				if g.objects[p.New] {
					where = "present but off the ref's first-parent line"
				}
				problems = append(problems, fmt.Sprintf("  %s %s: acknowledged %s (client %d, %d attempts, last via node%d, at %s) %s; final tip %s",
					repo, ref, p.New, p.Client, p.Attempts, p.Node, p.End.Format("15:04:05.000"), where, tip))
			}
		}
	}
	return checked, forced, problems
}

func refDiff(a, b map[string]string) string {
	var d []string
	for ref, id := range a {
		if b[ref] != id {
			d = append(d, fmt.Sprintf("%s %s vs %s", ref, short(id), short(b[ref])))
		}
	}
	for ref, id := range b {
		if _, ok := a[ref]; !ok {
			d = append(d, fmt.Sprintf("%s absent vs %s", ref, short(id)))
		}
	}
	sort.Strings(d)
	return strings.Join(d, "; ")
}

func short(id string) string {
	if id == "" {
		return "absent"
	}
	return id[:min(len(id), 12)]
}

// checkFailedPushes looks for pushes reported failed that committed
// anyway (their new id is a transition of an entry the nodes logged as
// committed). After an ambiguous failure (a 500, a reset connection)
// that is allowed; after only definite ones (refused connections, 4xx,
// 503 "nothing was changed") it is a lie to the client.
func checkFailedPushes(c *cluster, r *report, seqs pushSeqs) {
	ids := map[string]string{}
	for _, repo := range c.repos {
		ids[repo.Name] = repo.ID
	}
	landed, lied := landedFailures(r.rec.failed, ids, seqs)
	lines := []string{fmt.Sprintf("  pushes reported failed %d; of them committed anyway %d (after only definite failures: %d)", len(r.rec.failed), len(landed), len(lied))}
	lines = append(lines, landed...)
	r.section("pushes reported failed", lines...)
	if len(lied) > 0 {
		r.fail("%d pushes were told they certainly failed, yet committed: %s", len(lied), strings.Join(lied, "; "))
	}
}

// landedFailures lists failed pushes that committed, and among them those
// that saw no ambiguous failure.
func landedFailures(failed []pushRecord, ids map[string]string, seqs pushSeqs) (landed, lied []string) {
	for _, p := range failed {
		if p.New == "" {
			continue
		}
		seq, ok := seqs[ids[p.Repo]][p.New]
		if !ok {
			continue
		}
		l := fmt.Sprintf("    %s %s %s committed at seq %d; client %d was told: %s", p.Repo, p.Ref, short(p.New), seq, p.Client, p.Err)
		landed = append(landed, l)
		if !p.Ambiguous {
			lied = append(lied, l)
		}
	}
	return landed, lied
}

// checkClones checks the clones made during the faults: a clone that
// started after a push was acknowledged holds that push. On a client's
// own branch only its last acknowledged tip is required, and not while a
// force push that began later might have replaced it.
func checkClones(c *cluster, r *report, seqs pushSeqs) {
	ok, failed, causes, stale := staleClones(r.rec.clones, r.rec.acked, r.rec.forced)
	lines := []string{fmt.Sprintf("  clones during the faults: %d complete, %d failed; complete clones missing an earlier acknowledged push: %d", ok, failed, len(stale))}
	for _, cause := range sortedKeys(causes) {
		lines = append(lines, fmt.Sprintf("    failed clones, %d: %s", causes[cause], cause))
	}
	lines = append(lines, stale...)
	if len(stale) > 0 {
		lines = append(lines, c.staleCloneDiagnosis(r, seqs)...)
	}
	r.section("clones during the faults", lines...)
	if len(stale) > 0 {
		r.fail("%d clones made during the faults missed a push acknowledged before they began", len(stale))
	}
}

// staleCloneDiagnosis says, for each stale clone, at which seq each of
// its refs was committed, and what the serving node logged about the
// repository while the clone ran: enough to tell a stale read of the
// index from a stale cache.
func (c *cluster) staleCloneDiagnosis(r *report, seqs pushSeqs) []string {
	ids := map[string]string{}
	for _, repo := range c.repos {
		ids[repo.Name] = repo.ID
	}
	var out []string
	for _, cl := range r.rec.clones {
		if cl.Err != "" {
			continue
		}
		if _, _, _, s := staleClones([]cloneRecord{cl}, r.rec.acked, r.rec.forced); len(s) == 0 {
			continue
		}
		id := ids[cl.Repo]
		out = append(out, fmt.Sprintf("  diagnosis of the clone of %s (%s) from node%d, %s to %s:", cl.Repo, id, cl.Node,
			cl.Start.Format("15:04:05.000"), cl.End.Format("15:04:05.000")))
		for _, ref := range sortedKeys(cl.Tips) {
			seq, ok := seqs[id][cl.Tips[ref]]
			at := "at an unlogged seq"
			if ok {
				at = fmt.Sprintf("committed at seq %d", seq)
			}
			out = append(out, fmt.Sprintf("    the clone's %s %s, %s", ref, short(cl.Tips[ref]), at))
		}
		if cl.Node < 0 || cl.Node >= len(c.nodes) {
			continue
		}
		n := 0
		c.nodeLogFile(c.nodes[cl.Node].logPath, func(raw []byte, l nodeLogLine) {
			if (l.Repo != id && !strings.Contains(l.Path, "/"+cl.Repo+".git")) || l.Time.Before(cl.Start.Add(-2*time.Second)) || l.Time.After(cl.End.Add(time.Second)) {
				return
			}
			if n++; n <= 40 {
				out = append(out, "    node"+fmt.Sprint(cl.Node)+": "+strings.TrimSpace(string(raw)))
			}
		})
		if n > 40 {
			out = append(out, fmt.Sprintf("    (%d more lines)", n-40))
		}
	}
	return out
}

// staleClones finds the complete clones that lack a push acknowledged
// before they began.
func staleClones(clones []cloneRecord, acked, forced []pushRecord) (ok, failed int, causes map[string]int, stale []string) {
	causes = map[string]int{}
	for _, cl := range clones {
		if cl.Err != "" {
			failed++
			causes[shortCause(cl.Err)]++
			continue
		}
		ok++
		lacks := func(ref string, p pushRecord) {
			if !cl.Reach[ref][p.New] {
				stale = append(stale, fmt.Sprintf("  clone of %s from node%d at %s lacks %s %s, acknowledged %v before it began (client %d, via node%d); the clone has %s",
					cl.Repo, cl.Node, cl.Start.Format("15:04:05.000"), ref, short(p.New), cl.Start.Sub(p.End).Round(time.Millisecond), p.Client, p.Node, short(cl.Tips[ref])))
			}
		}
		last := map[string]pushRecord{}
		for _, p := range acked {
			if p.Repo != cl.Repo || !p.End.Before(cl.Start) {
				continue
			}
			if p.Ref == "refs/heads/main" {
				lacks(p.Ref, p)
				continue
			}
			if l, seen := last[p.Ref]; !seen || p.End.After(l.End) {
				last[p.Ref] = p
			}
		}
	next:
		for _, ref := range sortedKeys(last) {
			p := last[ref]
			for _, f := range forced {
				if f.Repo == cl.Repo && f.Ref == ref && f.Start.After(p.End) && f.Start.Before(cl.Start) {
					continue next
				}
			}
			lacks(ref, p)
		}
	}
	return ok, failed, causes, stale
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// alertJSON is the part of the API's alert the check reads.
type alertJSON struct {
	ID        string `json:"id"`
	RuleID    string `json:"rule_id"`
	State     string `json:"state"`
	Locations []struct {
		BlobID string `json:"blob_id"`
		Path   string `json:"path"`
		Commit string `json:"commit"`
		Seq    uint64 `json:"seq"`
	} `json:"locations"`
}

// listAlerts reads every alert of a repository through a node's API.
func (c *cluster) listAlerts(ctx context.Context, node int, repo string) ([]alertJSON, error) {
	var all []alertJSON
	for page := ""; ; {
		var p struct {
			Alerts   []alertJSON `json:"alerts"`
			NextPage string      `json:"next_page"`
		}
		path := "/api/repos/" + repo + "/alerts?per_page=100"
		if page != "" {
			path += "&page=" + url.QueryEscape(page)
		}
		if err := c.api(ctx, node, path, &p); err != nil {
			return nil, err
		}
		all = append(all, p.Alerts...)
		if page = p.NextPage; page == "" {
			return all, nil
		}
	}
}

// checkAlerts waits until every planted secret in an acknowledged push
// has an alert, at most cfg.AlertWait after healing, and then checks
// that each has exactly one.
func checkAlerts(ctx context.Context, c *cluster, clients []*client, r *report, final finals, seqs pushSeqs, healed time.Time) {
	ackedObjs := map[string]bool{}
	for _, cl := range clients {
		set, err := cl.ackedObjects(ctx)
		if err != nil {
			r.fail("listing what client %d's acknowledged pushes reach: %v", cl.id, err)
			return
		}
		for id := range set {
			ackedObjs[id] = true
		}
	}
	var want, unacked []planted // in acknowledged pushes; landed without one
	for _, s := range r.rec.secrets {
		switch {
		case ackedObjs[s.Blob]:
			want = append(want, s)
		case final[s.Repo] != nil && final[s.Repo].objects[s.Blob]:
			unacked = append(unacked, s)
		}
	}

	// Poll until every wanted secret has an alert or time is up.
	var byBlob map[string][]alertJSON
	var all int
	deadline := healed.Add(r.cfg.AlertWait)
	var pollErr error
	for poll := 0; ; poll++ {
		byBlob, all, pollErr = map[string][]alertJSON{}, 0, nil
		for _, repo := range c.repos {
			as, err := c.listAlerts(ctx, poll%3, repo.Name)
			if err != nil {
				pollErr = err
				continue
			}
			all += len(as)
			for _, a := range as {
				seen := map[string]bool{}
				for _, l := range a.Locations {
					if !seen[l.BlobID] {
						seen[l.BlobID] = true
						byBlob[l.BlobID] = append(byBlob[l.BlobID], a)
					}
				}
			}
		}
		complete := pollErr == nil
		for _, s := range want {
			if len(byBlob[s.Blob]) == 0 {
				complete = false
				break
			}
		}
		if complete || time.Now().After(deadline) {
			break
		}
		sleepCtx(ctx, 5*time.Second)
	}
	waited := time.Since(healed)

	tl := tallyAlerts(want, r.rec.secrets, byBlob)
	alerted, dup, missing, dupLines, unexpected := tl.alerted, len(tl.dupLines), tl.missing, tl.dupLines, tl.unexpected
	unackedAlerted := 0
	for _, s := range unacked {
		if len(byBlob[s.Blob]) > 0 {
			unackedAlerted++
		}
	}
	dropped, droppedAlerted := 0, 0 // acknowledged, then force-pushed away
	for _, s := range want {
		if g := final[s.Repo]; g != nil && !g.objects[s.Blob] {
			dropped++
			if len(byBlob[s.Blob]) > 0 {
				droppedAlerted++
			}
		}
	}

	lines := []string{
		fmt.Sprintf("  planted %d secrets; in acknowledged pushes %d; alerted %d; missing %d; with more than one alert %d", len(r.rec.secrets), len(want), alerted, len(missing), dup),
		fmt.Sprintf("  waited %v after healing (bound %v); %d alerts in all; alerts on blobs no client planted: %d", waited.Round(time.Second), r.cfg.AlertWait, all, unexpected),
		fmt.Sprintf("  of those in acknowledged pushes, force-pushed away since: %d, of which alerted %d", dropped, droppedAlerted),
		fmt.Sprintf("  landed without an acknowledged push (in the final refs): %d, of which alerted %d (not part of the check)", len(unacked), unackedAlerted),
	}
	if pollErr != nil {
		lines = append(lines, "  the last poll failed: "+pollErr.Error())
		r.fail("listing alerts after healing: %v", pollErr)
	}
	lines = append(lines, dupLines...)
	if len(missing) > 0 {
		lines = append(lines, missingDetail(ctx, c, missing, seqs)...)
		r.fail("%d of %d planted secrets in acknowledged pushes have no alert %v after healing", len(missing), len(want), waited.Round(time.Second))
	}
	if dup > 0 {
		r.fail("%d planted secrets have more than one alert", dup)
	}
	if unexpected > 0 {
		r.fail("%d alerts name blobs that hold no planted secret", unexpected)
	}
	r.section("secrets and alerts", lines...)
}

// alertTally is how the alerts match the planted secrets.
type alertTally struct {
	alerted    int       // wanted secrets with at least one alert
	missing    []planted // wanted secrets with none
	dupLines   []string  // wanted secrets with more than one
	unexpected int       // blobs with alerts that hold no planted secret
}

// tallyAlerts matches alerts to planted secrets by the blob that holds
// each secret: every secret is new and alone in its blob, so its alert
// is the one whose locations name that blob, and two such alerts are two
// alerts for one secret.
func tallyAlerts(want, planted []planted, byBlob map[string][]alertJSON) alertTally {
	var tl alertTally
	for _, s := range want {
		switch n := len(byBlob[s.Blob]); {
		case n == 0:
			tl.missing = append(tl.missing, s)
		case n == 1:
			tl.alerted++
		default:
			tl.alerted++
			var ids []string
			for _, a := range byBlob[s.Blob] {
				ids = append(ids, short(a.ID)+" "+a.RuleID)
			}
			tl.dupLines = append(tl.dupLines, fmt.Sprintf("  %s %s (%s…): %d alerts: %s", s.Repo, s.Path, s.Secret[:8], n, strings.Join(ids, ", ")))
		}
	}
	plantedBlobs := map[string]bool{}
	for _, s := range planted {
		plantedBlobs[s.Blob] = true
	}
	for blob := range byBlob {
		if !plantedBlobs[blob] {
			tl.unexpected++
		}
	}
	return tl
}

// missingDetail describes the secrets without an alert (repository, the
// seq of the push that carried them when the nodes' logs say, the
// secret's first characters) and the scan runs of their repositories.
func missingDetail(ctx context.Context, c *cluster, missing []planted, seqs pushSeqs) []string {
	byRepo := map[string][]planted{}
	for _, s := range missing {
		byRepo[s.Repo] = append(byRepo[s.Repo], s)
	}
	var lines []string
	for _, repo := range c.repos {
		ms := byRepo[repo.Name]
		if len(ms) == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("  missing in %s (%s): %d", repo.Name, repo.ID, len(ms)))
		seqOf := func(s planted) uint64 {
			if n, ok := seqs[repo.ID][s.Commit]; ok {
				return n
			}
			return 1 << 63
		}
		sort.SliceStable(ms, func(i, j int) bool { return seqOf(ms[i]) < seqOf(ms[j]) })
		for _, s := range ms {
			seq := "seq ?"
			if n, ok := seqs[repo.ID][s.Commit]; ok {
				seq = fmt.Sprintf("seq %d", n)
			}
			lines = append(lines, fmt.Sprintf("    %s  %s…  %s  commit %s  client %d", seq, s.Secret[:8], s.Path, short(s.Commit), s.Client))
		}
		lines = append(lines, c.scanState(ctx, repo)...)
	}
	return lines
}

// pushSeqs maps, per repository id, the new ids of committed pushes to
// their seq.
type pushSeqs map[string]map[string]uint64

// pushSeqs reads which pushes committed at which seq: the nodes log each
// commit's seq and entry, and the entry's header in the bucket holds its
// ref transitions. A node killed between a commit and its log line
// leaves that commit out.
func (c *cluster) pushSeqs(ctx context.Context) pushSeqs {
	out := pushSeqs{}
	c.nodeLogs(func(l nodeLogLine) {
		if l.Msg != "push committed" {
			return
		}
		id, err := ulid.Parse(l.Entry)
		if err != nil {
			return
		}
		h, err := c.log.ReadEntryHeader(ctx, l.Repo, id)
		if err != nil {
			return
		}
		if out[l.Repo] == nil {
			out[l.Repo] = map[string]uint64{}
		}
		for _, tr := range h.Transitions {
			out[l.Repo][tr.New] = l.Seq
		}
	})
	return out
}

// nodeLogLine is the part of a node's JSON log line the checks read.
type nodeLogLine struct {
	Time  time.Time `json:"time"`
	Level string    `json:"level"`
	Msg   string    `json:"msg"`
	Repo  string    `json:"repo"`
	Path  string    `json:"path"`
	Seq   uint64    `json:"seq"`
	Entry string    `json:"entry"`
}

// nodeLogs calls fn for every JSON line of every node's log.
func (c *cluster) nodeLogs(fn func(nodeLogLine)) {
	for _, p := range c.nodes {
		c.nodeLogFile(p.logPath, func(_ []byte, l nodeLogLine) { fn(l) })
	}
}

// nodeLogFile calls fn for every JSON line of one node's log.
func (c *cluster) nodeLogFile(path string, fn func(raw []byte, l nodeLogLine)) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l nodeLogLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			fn(sc.Bytes(), l)
		}
	}
}

// scanState summarises a repository's scan runs, its watermark and its
// log's head, as the API and the bucket show them.
func (c *cluster) scanState(ctx context.Context, repo repoInfo) []string {
	var lines []string
	if x, err := c.log.Head(ctx, repo.ID); err == nil {
		lines = append(lines, fmt.Sprintf("    log: seq %d, compacted through %d, %d layers", x.Seq, x.CompactedThroughSeq, len(x.Layers)))
	}
	wm := "absent"
	if rc, _, err := c.store.Get(ctx, "scans/"+repo.ID+"/watermark"); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		var w struct {
			Seq uint64 `json:"seq"`
		}
		if json.Unmarshal(b, &w) == nil {
			wm = fmt.Sprint(w.Seq)
		}
	} else if !errors.Is(err, objstore.ErrNotFound) {
		wm = err.Error()
	}
	lines = append(lines, "    scan watermark: "+wm)
	var scans struct {
		Scans []struct {
			Kind   string `json:"kind"`
			Seq    uint64 `json:"seq"`
			State  string `json:"state"`
			Parked []struct {
				Shard  string `json:"shard"`
				Reason string `json:"reason"`
			} `json:"parked_shards"`
		} `json:"scans"`
	}
	if err := c.api(ctx, 0, "/api/repos/"+repo.Name+"/scans?per_page=100000", &scans); err != nil {
		return append(lines, "    scans: "+err.Error())
	}
	states := map[string][]uint64{}
	reasons := map[string][]uint64{} // by the reason with its numbers masked, the runs' seqs
	for _, s := range scans.Scans {
		k := s.Kind + " " + s.State
		states[k] = append(states[k], s.Seq)
		for _, p := range s.Parked {
			masked := digits.ReplaceAllString(strings.Join(strings.Fields(p.Reason), " "), "N")
			if len(masked) > 240 {
				masked = masked[:240] + "…"
			}
			reasons[masked] = append(reasons[masked], s.Seq)
		}
	}
	for _, k := range sortedKeys(states) {
		lines = append(lines, fmt.Sprintf("    runs %s: %d (seqs %s)", k, len(states[k]), seqRanges(states[k])))
	}
	for _, reason := range sortedKeys(reasons) {
		lines = append(lines, fmt.Sprintf("    parked shards, %d: %s (runs at seqs %s)", len(reasons[reason]), reason, seqRanges(reasons[reason])))
	}
	return lines
}

// digits masks the numbers of parked shards' reasons (seqs, ports), so
// that reasons differing only in them count as one.
var digits = regexp.MustCompile(`\b[0-9]+\b`)

// seqRanges writes seqs as sorted ranges: 1-4,7,9-10.
func seqRanges(seqs []uint64) string {
	seqs = append([]uint64(nil), seqs...)
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	var parts []string
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, fmt.Sprint(seqs[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", seqs[i], seqs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// checkCounters recounts the coordination store's shard counters from its
// records; after healing there must be nothing to fix.
func checkCounters(ctx context.Context, c *cluster, r *report) {
	out, err := c.ghost(ctx, "coord", "repair-counters", "--etcd-endpoints", strings.Join(c.etcdURLs, ","), "--data-dir", filepath.Join(c.dir, "checks", "admin"))
	lines := []string{"  ghost coord repair-counters:"}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		lines = append(lines, "    "+l)
	}
	if err == nil {
		err = countersExact(out)
	}
	if err != nil {
		r.fail("coordination counters: %v", err)
	}
	r.section("coordination counters", lines...)
}

// countersExact reads the output of "ghost coord repair-counters": it
// rewrote nothing and said the counters are correct.
func countersExact(out string) error {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "fixed ") {
			return fmt.Errorf("repair-counters had to fix them: %s", l)
		}
	}
	if !strings.Contains(out, "are correct") {
		return fmt.Errorf("repair-counters did not say the counters are correct: %q", strings.TrimSpace(out))
	}
	return nil
}

// checkGC runs "ghost gc --dry-run" and checks that nothing it would
// delete is referenced by its log's index, and that no live repository's
// log would be tombstoned as an orphan.
func checkGC(ctx context.Context, c *cluster, r *report) {
	out, err := c.ghost(ctx, append([]string{"gc", "--dry-run", "--data-dir", filepath.Join(c.dir, "checks", "admin")}, c.storeFlags()...)...)
	if err != nil {
		r.fail("ghost gc --dry-run: %v", err)
	}
	referenced := map[string]bool{}
	live := map[string]bool{}
	for _, repo := range c.repos {
		live[repo.ID] = true
		x, err := c.log.Head(ctx, repo.ID)
		if err != nil {
			r.fail("reading the index of %s: %v", repo.Name, err)
			continue
		}
		for _, k := range x.ReferencedKeys(repo.ID) {
			referenced[k] = true
		}
	}
	would, summary, bad := gcProblems(out, referenced, live)
	lines := []string{fmt.Sprintf("  ghost gc --dry-run: %s", summary), fmt.Sprintf("  objects it would delete: %d; of them referenced: %d", would, len(bad))}
	r.section("garbage collection (dry run)", append(lines, bad...)...)
	if len(bad) > 0 {
		r.fail("ghost gc --dry-run would delete %d referenced objects or live logs", len(bad))
	}
}

// gcProblems reads the output of "ghost gc --dry-run": what it would
// delete that an index references, and live logs it would tombstone.
func gcProblems(out string, referenced, live map[string]bool) (would int, summary string, bad []string) {
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		switch {
		case strings.HasPrefix(l, "would delete ") && strings.Contains(l, " bytes ("):
			would++
			key := strings.Fields(strings.TrimPrefix(l, "would delete "))[0]
			if referenced[key] {
				bad = append(bad, "  referenced: "+l)
			}
		case strings.HasPrefix(l, "would tombstone orphan log "):
			id := strings.Fields(strings.TrimPrefix(l, "would tombstone orphan log "))[0]
			if live[id] {
				bad = append(bad, "  a live repository's log: "+l)
			}
		case strings.HasPrefix(l, "would delete "):
			summary = l
		}
	}
	return would, summary, bad
}

// checkProcesses reports processes that exited by themselves and panics
// or races in any process's log.
func checkProcesses(c *cluster, r *report) {
	var lines []string
	for _, p := range c.procs() {
		for _, u := range p.unexpectedExits() {
			lines = append(lines, fmt.Sprintf("  %s: %s", p.name, u))
			r.fail("%s %s", p.name, u)
		}
		b, err := os.ReadFile(p.logPath)
		if err != nil {
			continue
		}
		for _, marker := range []string{"panic:", "DATA RACE", "fatal error:"} {
			if n := strings.Count(string(b), marker); n > 0 {
				lines = append(lines, fmt.Sprintf("  %s: %d × %q in its log", p.name, n, marker))
				r.fail("%s logged %q %d times", p.name, marker, n)
			}
		}
	}
	if len(lines) == 0 {
		lines = append(lines, "  no process exited by itself; no panic in any log")
	}
	r.section("processes", lines...)
}

// summarizeLoad reports what the clients and the fault schedule did.
func summarizeLoad(r *report) {
	rec := r.rec
	forced, mainAcks := 0, 0
	for _, p := range rec.acked {
		if p.Forced {
			forced++
		}
		if p.Ref == "refs/heads/main" {
			mainAcks++
		}
	}
	lines := []string{
		fmt.Sprintf("  pushes acknowledged %d (to main %d, forced %d); reported failed %d; failed attempts retried %d; non-fast-forward rejections on main %d",
			len(rec.acked), mainAcks, forced, len(rec.failed), rec.failedAttempts, rec.mainRejected),
	}
	causes := make([]string, 0, len(rec.attemptErrs))
	for k := range rec.attemptErrs {
		causes = append(causes, k)
	}
	sort.Slice(causes, func(i, j int) bool { return rec.attemptErrs[causes[i]] > rec.attemptErrs[causes[j]] })
	for _, k := range causes {
		lines = append(lines, fmt.Sprintf("    failed attempts, %d: %s", rec.attemptErrs[k], k))
	}
	for _, p := range rec.failed {
		lines = append(lines, fmt.Sprintf("    reported failed: client %d %s %s %s: %s", p.Client, p.Repo, p.Ref, short(p.New), p.Err))
	}
	for _, a := range rec.anomalies {
		lines = append(lines, "    client anomaly: "+a)
		r.fail("client anomaly: %s", a)
	}
	r.section("load", lines...)

	lines = []string{"  " + faultCounts(r.faults)}
	for _, f := range r.faults {
		l := "    " + f.String()
		if f.Err != "" {
			l += "  RESTART FAILED: " + f.Err
			r.fail("fault %s: %s", f, f.Err)
		}
		lines = append(lines, l)
	}
	r.section("faults", lines...)
}

// summarizeLogs counts, over every node's log, the commits, the
// compactions, and the warnings and errors by message: the context a
// reader of a failure needs first.
func summarizeLogs(c *cluster, r *report) {
	counts := map[string]int{}
	c.nodeLogs(func(l nodeLogLine) {
		switch {
		case l.Msg == "push committed" || l.Msg == "compacted":
			counts[l.Msg]++
		case l.Level == "WARN" || l.Level == "ERROR":
			counts[strings.ToLower(l.Level)+": "+l.Msg]++
		}
	})
	lines := []string{fmt.Sprintf("  pushes committed %d; compactions landed %d", counts["push committed"], counts["compacted"])}
	delete(counts, "push committed")
	delete(counts, "compacted")
	keys := sortedKeys(counts)
	sort.SliceStable(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("    %d × %s", counts[k], k))
	}
	r.section("node logs", lines...)
}
