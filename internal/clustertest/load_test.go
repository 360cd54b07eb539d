package clustertest

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
)

// How clients behave. A real client retries a failed push until it lands
// or it gives up; these do too, against a node picked at random each try,
// as behind a load balancer.
const (
	pushGiveUp     = 3 * time.Minute  // a push is reported failed after retrying this long
	gitTimeout     = 90 * time.Second // one git invocation
	maxMainRetries = 12               // non-fast-forward rebuilds of one change to main
	mainShare      = 0.2              // fraction of operations that push to the shared main
	forceShare     = 0.05             // fraction that amend the own branch's tip and force-push
)

// pushRecord is one push as the client saw it.
type pushRecord struct {
	Client   int
	Repo     string
	Ref      string
	New      string
	Secret   string // the secret the pushed commit planted, if any
	Forced   bool
	Start    time.Time // the first attempt began
	End      time.Time // acknowledged, or given up
	Attempts int
	Node     int    // the node of the last attempt
	Err      string // why it was reported failed
	// Ambiguous is set when an attempt failed in a way that leaves its
	// outcome unknown (a 500, a reset connection, a timeout), so the push
	// may have landed even if it is reported failed.
	Ambiguous bool
}

// planted is a fake secret committed by a client.
type planted struct {
	Client int
	Repo   string
	Secret string
	Blob   string // the git blob id of the file holding it
	Path   string
	Commit string // the last commit a push carried it in
}

// cloneRecord is a clone made while faults ran.
type cloneRecord struct {
	Repo  string
	Node  int
	Start time.Time
	End   time.Time
	Err   string
	// Tips are the clone's refs.
	Tips map[string]string
	// Reach maps each ref of the clone to the commits it reaches.
	Reach map[string]map[string]bool `json:"-"`
}

// attemptRecord is one failed attempt of a push.
type attemptRecord struct {
	Client int
	Repo   string
	Node   int
	At     time.Time
	Cause  string
	Output string // git's last lines
}

// recorder collects what every client saw.
type recorder struct {
	mu             sync.Mutex
	acked          []pushRecord
	failed         []pushRecord
	forced         []pushRecord // every force push, acknowledged or not
	failedAttempts int
	attemptErrs    map[string]int // failed attempts by a short cause
	attempts       []attemptRecord
	mainRejected   int // non-fast-forward rejections on main: expected
	anomalies      []string
	secrets        []planted
	clones         []cloneRecord
}

func (r *recorder) add(f func(r *recorder)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// client is one git user with a work tree of its own: it commits to its
// own branch and, now and then, to the repository's shared main.
type client struct {
	id        int
	c         *cluster
	rec       *recorder
	rng       *rand.Rand
	repo      string
	branch    string // refs/heads/c<id>
	dir       string
	env       []string
	n         int      // commits made
	acked     []string // ids this client had acknowledged, for the landed set
	ownDepth  int      // own commits above the branch's base
	ownBroken bool     // a push to the own branch was rejected: stop forcing
	// needForce: a force push was reported failed, so the server's
	// branch may still hold the dropped commit; the next push forces.
	needForce bool
}

func newClient(c *cluster, rec *recorder, id int, seed uint64) *client {
	dir := filepath.Join(c.dir, "clients", fmt.Sprintf("c%d", id))
	return &client{
		id: id, c: c, rec: rec,
		rng:    rand.New(rand.NewPCG(seed, uint64(id)+1)),
		repo:   c.repos[id%len(c.repos)].Name,
		branch: fmt.Sprintf("refs/heads/c%d", id),
		dir:    filepath.Join(dir, "work"),
		env:    gittest.Env(dir),
	}
}

// git runs git in the client's work tree. Stalled HTTP transfers abort
// after 20 s without a byte, as a user's git would be told to.
func (cl *client) git(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	return runGit(ctx, cl.env, cl.dir, args...)
}

func runGit(ctx context.Context, env []string, dir string, args ...string) (string, error) {
	sub := args[0]
	args = append([]string{"-c", "http.lowSpeedLimit=1", "-c", "http.lowSpeedTime=20", "-c", "gc.auto=0"}, args...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("git %s: %w: %s", sub, err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

func (cl *client) node() int { return cl.rng.IntN(len(cl.c.nodeURLs)) }

// init clones the repository and creates the own branch on its main.
func (cl *client) init(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(cl.dir), 0o755); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		_, err := runGit(ctx, cl.env, filepath.Dir(cl.dir), "clone", "-q", cl.c.remote(cl.node(), cl.repo), cl.dir)
		if err == nil {
			break
		}
		os.RemoveAll(cl.dir)
		if attempt == 5 {
			return err
		}
		time.Sleep(time.Second)
	}
	_, err := cl.git(ctx, "checkout", "-q", "-b", strings.TrimPrefix(cl.branch, "refs/heads/"))
	return err
}

// run performs operations until the load ends; the one in progress is
// finished, with its retries.
func (cl *client) run(ctx context.Context, until time.Time) {
	for time.Now().Before(until) && ctx.Err() == nil {
		r := cl.rng.Float64()
		switch {
		case r < mainShare:
			cl.pushMain(ctx)
		case r < mainShare+forceShare && cl.ownDepth >= 2 && !cl.ownBroken:
			cl.forcePush(ctx)
		default:
			cl.pushOwn(ctx)
		}
		time.Sleep(time.Duration(50+cl.rng.IntN(250)) * time.Millisecond)
	}
}

// commit makes one commit in the work tree: a line appended to a file of
// the client's, sometimes a filler file, sometimes a planted secret in a
// file of its own.
func (cl *client) commit(ctx context.Context, what string) (*planted, error) {
	cl.n++
	write := func(rel, content string, appendTo bool) error {
		p := filepath.Join(cl.dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		flag := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		if appendTo {
			flag = os.O_CREATE | os.O_WRONLY | os.O_APPEND
		}
		f, err := os.OpenFile(p, flag, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(content)
		return errors.Join(err, f.Close())
	}
	if err := write(fmt.Sprintf("c%d/%s.txt", cl.id, what), fmt.Sprintf("commit %d of client %d: %d\n", cl.n, cl.id, cl.rng.Uint64()), true); err != nil {
		return nil, err
	}
	if cl.rng.Float64() < 0.2 {
		var b strings.Builder
		for range 50 + cl.rng.IntN(400) {
			fmt.Fprintf(&b, "%08d %08d %08d %08d\n", cl.rng.IntN(1e8), cl.rng.IntN(1e8), cl.rng.IntN(1e8), cl.rng.IntN(1e8))
		}
		if err := write(fmt.Sprintf("fill/c%d-%d.txt", cl.id, cl.n), b.String(), false); err != nil {
			return nil, err
		}
	}
	var sec *planted
	if cl.rng.Float64() < cl.c.cfg.SecretRate {
		s := fakeSecret(cl.rng)
		content := fmt.Sprintf("# planted by clustertest client %d, commit %d\n%s\n", cl.id, cl.n, s.line)
		path := fmt.Sprintf("secrets/c%d-%d.txt", cl.id, cl.n)
		if err := write(path, content, false); err != nil {
			return nil, err
		}
		sec = &planted{Client: cl.id, Repo: cl.repo, Secret: s.secret, Blob: blobID(content), Path: path}
	}
	if _, err := cl.git(ctx, "add", "-A"); err != nil {
		return nil, err
	}
	if _, err := cl.git(ctx, "commit", "-q", "-m", fmt.Sprintf("client %d: %s %d", cl.id, what, cl.n)); err != nil {
		return nil, err
	}
	if sec != nil {
		head, err := cl.head(ctx)
		if err != nil {
			return nil, err
		}
		sec.Commit = head
		cl.rec.add(func(r *recorder) { r.secrets = append(r.secrets, *sec) })
	}
	return sec, nil
}

func (cl *client) head(ctx context.Context) (string, error) {
	out, err := cl.git(ctx, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}

// pushOwn commits on the own branch and pushes it.
func (cl *client) pushOwn(ctx context.Context) {
	sec, err := cl.commit(ctx, "own")
	if err != nil {
		cl.anomaly("commit: %v", err)
		return
	}
	cl.ownDepth++
	head, _ := cl.head(ctx)
	rec, outcome := cl.push(ctx, cl.branch, head, cl.needForce, sec)
	switch outcome {
	case pushAcked:
		cl.needForce = false
	case pushRejected:
		// Only this client writes its branch, and it never drops an
		// acknowledged tip without forcing: the server's branch is not
		// what the acknowledgements say.
		cl.anomaly("push of %s to %s %s rejected: %s", head, cl.repo, cl.branch, rec.Err)
		cl.ownBroken = true
	}
}

// forcePush drops the own branch's tip, commits instead, and force-pushes.
// Secrets in the dropped commit were acknowledged and must still be
// alerted.
func (cl *client) forcePush(ctx context.Context) {
	if _, err := cl.git(ctx, "reset", "-q", "--hard", "HEAD~1"); err != nil {
		cl.anomaly("reset: %v", err)
		return
	}
	cl.ownDepth--
	sec, err := cl.commit(ctx, "amend")
	if err != nil {
		cl.anomaly("commit: %v", err)
		return
	}
	cl.ownDepth++
	head, _ := cl.head(ctx)
	_, outcome := cl.push(ctx, cl.branch, head, true, sec)
	cl.needForce = outcome != pushAcked
}

// pushMain builds a commit on the shared main and pushes it; a
// non-fast-forward rejection fetches main again and moves the change on
// top, as "git pull --rebase" would.
func (cl *client) pushMain(ctx context.Context) {
	defer func() {
		if _, err := cl.git(ctx, "checkout", "-q", "-f", strings.TrimPrefix(cl.branch, "refs/heads/")); err != nil {
			cl.anomaly("checkout own branch: %v", err)
		}
	}()
	if !cl.fetchMain(ctx) {
		return
	}
	if _, err := cl.git(ctx, "checkout", "-q", "-f", "--detach", "FETCH_HEAD"); err != nil {
		cl.anomaly("checkout main: %v", err)
		return
	}
	sec, err := cl.commit(ctx, "main")
	if err != nil {
		cl.anomaly("commit: %v", err)
		return
	}
	for range maxMainRetries {
		head, _ := cl.head(ctx)
		if sec != nil {
			cl.setSecretCommit(sec, head)
		}
		_, outcome := cl.push(ctx, "refs/heads/main", head, false, sec)
		if outcome != pushRejected {
			return
		}
		cl.rec.add(func(r *recorder) { r.mainRejected++ })
		if !cl.fetchMain(ctx) {
			return
		}
		mine := head
		if _, err := cl.git(ctx, "checkout", "-q", "-f", "--detach", "FETCH_HEAD"); err != nil {
			cl.anomaly("checkout main: %v", err)
			return
		}
		if _, err := cl.git(ctx, "cherry-pick", "--allow-empty", mine); err != nil {
			cl.anomaly("cherry-pick: %v", err)
			cl.git(ctx, "cherry-pick", "--abort")
			return
		}
	}
	cl.rec.add(func(r *recorder) {
		r.failed = append(r.failed, pushRecord{Client: cl.id, Repo: cl.repo, Ref: "refs/heads/main", Err: "gave up after repeated non-fast-forward rejections"})
	})
}

// setSecretCommit records that the secret now travels in commit id (a
// rebuilt change to main has a new commit, the same blob).
func (cl *client) setSecretCommit(sec *planted, id string) {
	cl.rec.add(func(r *recorder) {
		for i := range r.secrets {
			if r.secrets[i].Blob == sec.Blob {
				r.secrets[i].Commit = id
			}
		}
	})
}

// fetchMain fetches the shared main into FETCH_HEAD, retrying.
func (cl *client) fetchMain(ctx context.Context) bool {
	deadline := time.Now().Add(pushGiveUp)
	for attempt := 0; ; attempt++ {
		_, err := cl.git(ctx, "fetch", "-q", cl.c.remote(cl.node(), cl.repo), "refs/heads/main")
		if err == nil {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			cl.anomaly("fetch of main from %s failed for %v: %v", cl.repo, pushGiveUp, err)
			return false
		}
		sleepCtx(ctx, backoff(cl.rng, attempt))
	}
}

type pushOutcome int

const (
	pushAcked pushOutcome = iota
	pushRejected
	pushFailed
)

// push pushes id to ref, retrying failures that are not rejections until
// pushGiveUp, and records the outcome.
func (cl *client) push(ctx context.Context, ref, id string, force bool, sec *planted) (pushRecord, pushOutcome) {
	rec := pushRecord{Client: cl.id, Repo: cl.repo, Ref: ref, New: id, Forced: force, Start: time.Now()}
	if sec != nil {
		rec.Secret = sec.Secret
	}
	args := []string{"push", "--porcelain"}
	if force {
		args = append(args, "--force")
	}
	for attempt := 0; ; attempt++ {
		rec.Attempts++
		rec.Node = cl.node()
		out, err := cl.git(ctx, append(args, cl.c.remote(rec.Node, cl.repo), "HEAD:"+ref)...)
		rec.End = time.Now()
		if err == nil {
			cl.acked = append(cl.acked, id)
			cl.rec.add(func(r *recorder) {
				r.acked = append(r.acked, rec)
				if force {
					r.forced = append(r.forced, rec)
				}
			})
			return rec, pushAcked
		}
		if strings.Contains(out, "[rejected]") {
			rec.Err = lastLine(out)
			return rec, pushRejected
		}
		cause := shortCause(out)
		if !definiteCause(cause) {
			rec.Ambiguous = true
		}
		ar := attemptRecord{Client: cl.id, Repo: cl.repo, Node: rec.Node, At: rec.End, Cause: cause, Output: lastLines(out, 3)}
		cl.rec.add(func(r *recorder) { r.failedAttempts++; r.attemptErrs[cause]++; r.attempts = append(r.attempts, ar) })
		if time.Since(rec.Start) > pushGiveUp || ctx.Err() != nil {
			rec.Err = fmt.Sprintf("%d attempts: %v", rec.Attempts, err)
			cl.rec.add(func(r *recorder) {
				r.failed = append(r.failed, rec)
				if force {
					r.forced = append(r.forced, rec)
				}
			})
			return rec, pushFailed
		}
		sleepCtx(ctx, backoff(cl.rng, attempt))
	}
}

func (cl *client) anomaly(format string, args ...any) {
	msg := fmt.Sprintf("client %d: ", cl.id) + fmt.Sprintf(format, args...)
	cl.rec.add(func(r *recorder) { r.anomalies = append(r.anomalies, msg) })
}

// ackedObjects lists every object the client's acknowledged pushes reach,
// read from its own work tree, which holds all of them: what it pushed
// and what it fetched from main to build on.
func (cl *client) ackedObjects(ctx context.Context) (map[string]bool, error) {
	set := map[string]bool{}
	if len(cl.acked) == 0 {
		return set, nil
	}
	cmd := exec.CommandContext(ctx, "git", "rev-list", "--objects", "--stdin")
	cmd.Dir, cmd.Env = cl.dir, cl.env
	cmd.Stdin = strings.NewReader(strings.Join(cl.acked, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("client %d: rev-list: %w", cl.id, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if id, _, _ := strings.Cut(line, " "); id != "" {
			set[id] = true
		}
	}
	return set, nil
}

// cloner clones a random repository from a random node every few seconds
// while faults run, and records what each clone's refs reach.
func cloner(ctx context.Context, c *cluster, rec *recorder, rng *rand.Rand, until time.Time) {
	home := filepath.Join(c.dir, "clients", "cloner")
	env := gittest.Env(home)
	if err := os.MkdirAll(home, 0o755); err != nil {
		rec.add(func(r *recorder) { r.anomalies = append(r.anomalies, "cloner: "+err.Error()) })
		return
	}
	for i := 0; time.Now().Before(until) && ctx.Err() == nil; i++ {
		repo := c.repos[rng.IntN(len(c.repos))].Name
		node := rng.IntN(len(c.nodeURLs))
		dir := filepath.Join(c.dir, "clients", "cloner", fmt.Sprintf("clone%d.git", i))
		cr := cloneRecord{Repo: repo, Node: node, Start: time.Now()}
		cctx, cancel := context.WithTimeout(ctx, gitTimeout)
		_, err := runGit(cctx, env, filepath.Dir(dir), "clone", "-q", "--mirror", c.remote(node, repo), dir)
		cancel()
		cr.End = time.Now()
		var g *graph
		if err == nil {
			g, err = readGraph(ctx, env, dir, false)
		}
		if err == nil {
			cr.Tips = g.refs
			cr.Reach = map[string]map[string]bool{}
			for ref, tip := range g.refs {
				cr.Reach[ref] = g.reach(tip)
			}
		}
		if err != nil {
			cr.Err = err.Error()
		}
		os.RemoveAll(dir)
		rec.add(func(r *recorder) { r.clones = append(r.clones, cr) })
		sleepCtx(ctx, time.Duration(1500+rng.IntN(3000))*time.Millisecond)
	}
}

// seedMain gives every repository a main branch to build on, through
// node 0, before the load and the faults start.
func seedMain(ctx context.Context, c *cluster, rec *recorder) error {
	for _, r := range c.repos {
		home := filepath.Join(c.dir, "clients", "seed-"+strings.ReplaceAll(r.Name, "/", "-"))
		env := gittest.Env(home)
		dir := filepath.Join(home, "work")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# "+r.Name+"\n"), 0o644); err != nil {
			return err
		}
		for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "seed"}, {"push", "-q", c.remote(0, r.Name), "HEAD:refs/heads/main"}} {
			if _, err := runGit(ctx, env, dir, args...); err != nil {
				return err
			}
		}
		head, err := runGit(ctx, env, dir, "rev-parse", "HEAD")
		if err != nil {
			return err
		}
		rec.add(func(rr *recorder) {
			rr.acked = append(rr.acked, pushRecord{Client: -1, Repo: r.Name, Ref: "refs/heads/main", New: strings.TrimSpace(head), Start: time.Now(), End: time.Now(), Attempts: 1})
		})
	}
	return nil
}

// fakeSecret is a credential shaped so that gitleaks' default rules
// report it (github-pat, aws-access-token), random so that every one is
// new to the scanner. Both rules also ask for a Shannon entropy of at
// least 3 bits a character: a random AWS key id draws from 32 symbols in
// 16 places and falls below that about once in 5,500 draws
// (AKIAIA7GJW77I7DGH7J7 has 2.87), which the scanner rightly does not
// report, so a draw under minSecretEntropy is drawn again.
type secretLine struct{ secret, line string }

// minSecretEntropy keeps every planted secret clear of the rules' entropy
// threshold (3).
const minSecretEntropy = 3.3

func fakeSecret(rng *rand.Rand) secretLine {
	for {
		if s := drawSecret(rng); entropy(s.secret) >= minSecretEntropy {
			return s
		}
	}
}

// entropy is the Shannon entropy of s in bits a byte, as gitleaks
// computes it for a rule's entropy threshold.
func entropy(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	var h float64
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / float64(len(s))
			h -= p * math.Log2(p)
		}
	}
	return h
}

func drawSecret(rng *rand.Rand) secretLine {
	const alnum = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	const b32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	pick := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	if rng.IntN(3) == 0 {
		s := "AKIA" + pick(b32, 16)
		return secretLine{s, "aws_access_key_id = " + s}
	}
	s := "ghp_" + pick(alnum, 36)
	return secretLine{s, "token = " + s}
}

// blobID is git's SHA-1 object id of a blob with this content.
func blobID(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}

// backoff is the pause before retry n: 250 ms doubling to 4 s, jittered.
func backoff(rng *rand.Rand, n int) time.Duration {
	d := 250 * time.Millisecond << min(n, 4)
	return d/2 + time.Duration(rng.Int64N(int64(d)))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// definiteCause reports whether a failed attempt certainly changed
// nothing: the connection was refused, or the server answered 4xx or 503
// (busy, contention: "nothing was changed").
func definiteCause(cause string) bool {
	return cause == "connection refused" || strings.HasPrefix(cause, "HTTP 4") || cause == "HTTP 503"
}

// shortCause condenses a failed git invocation's output into a label for
// the report's tally of failed attempts.
func shortCause(out string) string {
	switch {
	case strings.Contains(out, "[remote rejected]"):
		line := out[strings.Index(out, "[remote rejected]"):]
		line, _, _ = strings.Cut(line, "\n")
		return strings.TrimSpace(line)
	case strings.Contains(out, "Authentication failed"):
		return "HTTP 401 (git: Authentication failed)"
	case strings.Contains(out, "Failed to connect"), strings.Contains(out, "Couldn't connect"), strings.Contains(out, "Connection refused"):
		return "connection refused"
	case strings.Contains(out, "Connection reset"), strings.Contains(out, "Recv failure"):
		return "connection reset"
	case strings.Contains(out, "Empty reply from server"):
		return "empty reply"
	case strings.Contains(out, "Operation too slow"), strings.Contains(out, "timed out"):
		return "stalled"
	}
	if m := httpStatus.FindStringSubmatch(out); m != nil {
		return "HTTP " + m[1]
	}
	if s := lastLine(out); s != "" {
		return s[:min(len(s), 80)]
	}
	return "killed (timeout)"
}

// httpStatus finds the status git reports for a failed HTTP request.
var httpStatus = regexp.MustCompile(`(?:returned error: |HTTP )(\d{3})`)
