package gitbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/countstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/latencystore"
	"github.com/ghost-scm/ghost/internal/server"
)

// BenchmarkLatency measures ghost on an object store as slow as S3
// against git http-backend on local disk, side by side in one run (issue
// 36): every daily operation of a git client (ls-remote, a push of one
// commit, the fetch of it, a clone on a warm node and on a node that has
// never seen the repository), over HTTP and over SSH, and the pages a
// browser asks for (the repository page, the log) and an API read. For
// each operation it reports the medians of the rounds, the ratio to the
// reference, and the object-store requests ghost sent and waited for one
// after another (countstore.Tally: sent / critical path):
//
//	go test -run='^$' -bench=Latency -benchtime=1x -v -timeout=60m ./internal/gitbench/
//
// GHOST_BENCH_LATENCY lists the store's latency profiles, each a group
// of its own (default "0ms,10ms,60ms": every request delayed so long;
// also s3-standard and s3-express, see latencystore). The reference of
// the git operations is http-backend; the pages and the API read have
// no http-backend equivalent, so theirs is ghost on the same disk with
// no delay, measured in the same rounds. GHOST_BENCH_ROUNDS (default 3)
// sets the rounds, GHOST_BENCH_COMMITS and GHOST_BENCH_BLOB_BYTES the
// generated repository (default 200 commits of 16 KiB of incompressible
// bytes, about 3.3 MB), GHOST_BENCH_OUT a file that receives the tables.
func BenchmarkLatency(b *testing.B) {
	var profiles []latencystore.Profile
	spec := os.Getenv("GHOST_BENCH_LATENCY")
	if spec == "" {
		spec = "0ms,10ms,60ms"
	}
	for _, s := range strings.Split(spec, ",") {
		p, err := latencystore.Parse(strings.TrimSpace(s))
		if err != nil {
			b.Fatal(err)
		}
		profiles = append(profiles, p)
	}
	_, err := exec.LookPath("ssh")
	withSSH := err == nil
	if !withSSH {
		b.Log("no OpenSSH client: SSH is not measured")
	}
	rounds := envInt("GHOST_BENCH_ROUNDS", 3)
	work := b.TempDir()
	env := gittest.Env(filepath.Join(work, "home"))
	src := filepath.Join(work, "src")
	gittest.Generate(b, env, src, gittest.Shape{Commits: envInt("GHOST_BENCH_COMMITS", 200), BlobBytes: envInt("GHOST_BENCH_BLOB_BYTES", 16<<10)})
	for i := 0; i < b.N; i++ {
		var groups []latencyGroup
		for pi, p := range profiles {
			root := filepath.Join(work, "run"+strconv.Itoa(i)+"-"+strconv.Itoa(pi))
			g := runLatencyGroup(b, env, src, root, p, rounds, withSSH)
			groups = append(groups, g)
			for _, r := range g.rows {
				if len(r.http) > 0 {
					b.ReportMetric(r.ratio(r.http), r.key+"@"+strings.ReplaceAll(p.Name, " ", "-")+"-x")
				}
			}
		}
		out := fmt.Sprintf("%d rounds; %s\n\n%s", rounds, strings.Join(os.Args[1:], " "), latencyTables(groups))
		b.Log("\n" + out)
		if f := os.Getenv("GHOST_BENCH_OUT"); f != "" {
			if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// latNode is one ghost node of the latency benchmark. Its store is its
// own countstore over the installation's (slow) store, so that a tally
// tracked on it counts what this node asked for.
type latNode struct {
	srv     *server.Server
	store   *countstore.Store
	all     *countstore.Tally // every request of the node, to see it idle
	base    string
	sshPort string
	close   func()
}

// newLatNode starts a node over store with its cache at cache, serving
// HTTP and, with ssh, SSH on loopback until close or the benchmark's end.
func newLatNode(b *testing.B, store objstore.Store, cache string, ssh bool) *latNode {
	n := &latNode{store: countstore.New(store, nil), all: countstore.NewTally()}
	n.store.Track(n.all)
	var err error
	n.srv, err = server.New(context.Background(), server.Options{Store: n.store, CacheDir: cache})
	if err != nil {
		b.Fatal(err)
	}
	var stopHTTP func()
	n.base, stopHTTP = serveStop(b, n.srv.Handler())
	stopSSH := func() {}
	if ssh {
		n.sshPort, stopSSH = serveSSH(b, n.srv)
	}
	n.close = sync.OnceFunc(func() { stopSSH(); stopHTTP(); n.srv.Close() })
	b.Cleanup(n.close)
	return n
}

// quiet waits until the nodes are idle: none of them sent a request for
// 300 ms, and none has background work of its cache or git running. So
// one measurement does not count the tail of the one before (the cache's
// work after a push).
func quiet(b *testing.B, nodes ...*latNode) {
	sent := func() (n int) {
		for _, nd := range nodes {
			n += nd.all.Sent()
		}
		return n
	}
	last := sent()
	deadline := time.Now().Add(2 * time.Minute)
	for still := 0; still < 3; {
		if time.Now().After(deadline) {
			b.Log("nodes not idle after two minutes; measuring anyway")
			return
		}
		time.Sleep(100 * time.Millisecond) // polling background work, not a timed assertion
		busy := false
		for _, nd := range nodes {
			busy = busy || nd.srv.Cache().Consolidating() > 0 || nd.srv.Background().Stats().Running > 0
		}
		now := sent()
		if now == last && !busy {
			still++
		} else {
			still = 0
		}
		last = now
	}
}

// latSample is one measured operation: its time, and for ghost the
// requests its nodes sent meanwhile, the critical path among them and
// how long one of them was in flight.
type latSample struct {
	took       time.Duration
	sent, path int
	busy       time.Duration
	chain      []countstore.Request // one critical path
}

// measure times f, once nodes are idle, counting what they ask of the
// store until f returns (none for http-backend, which has no nodes).
func measure(b *testing.B, nodes []*latNode, f func()) latSample {
	quiet(b, nodes...)
	t := countstore.NewRecordingTally()
	var stops []func()
	for _, n := range nodes {
		stops = append(stops, n.store.Track(t))
	}
	took := timed(f)
	for _, stop := range stops {
		stop()
	}
	return latSample{took: took, sent: t.Sent(), path: t.Path(), busy: t.Busy(), chain: t.CriticalPath()}
}

// latRow is one operation of one group: the reference's samples and
// ghost's over HTTP and SSH.
type latRow struct {
	op, ref   string
	key       string // op as a metric's unit
	refs      []latSample
	http, ssh []latSample
}

// latencyGroup is the rows measured at one latency profile.
type latencyGroup struct {
	profile latencystore.Profile
	rows    []*latRow
}

// gitTarget is a git server a client pushes to and fetches from.
type gitTarget struct {
	name string
	// url reaches the warm node (or http-backend); coldURL a given cold
	// node, nil for http-backend, whose clones are all alike.
	url     string
	coldURL func(n *latNode) string
	ghost   bool
	pusher  string // a clone that makes and pushes one commit a round
	fetcher string // a clone that fetches it
}

// runLatencyGroup sets up http-backend, a warm ghost node over a store
// with profile p and a reference ghost node with no delay, fills each
// with src, and measures rounds rounds of every operation, alternating
// which server goes first.
func runLatencyGroup(b *testing.B, env []string, src, root string, p latencystore.Profile, rounds int, withSSH bool) latencyGroup {
	disk, err := fsstore.Open(filepath.Join(root, "objects"))
	if err != nil {
		b.Fatal(err)
	}
	slow := latencystore.New(disk, p, uint64(envInt("GHOST_BENCH_SEED", 1)))
	warm := newLatNode(b, slow, filepath.Join(root, "cache-warm"), withSSH)
	tok := benchTenant(b, warm.srv.Meta(), "repo", "repo-ssh")
	env = slices.Clone(env)
	if withSSH {
		env = append(env, sshClient(b, warm.srv.Meta(), warm.store, root))
	}
	localDisk, err := fsstore.Open(filepath.Join(root, "local-objects"))
	if err != nil {
		b.Fatal(err)
	}
	local := newLatNode(b, localDisk, filepath.Join(root, "cache-local"), false)
	localTok := benchTenant(b, local.srv.Meta(), "repo")
	hbURL := serve(b, httpBackendHandler(b, env, filepath.Join(root, "hb"))) + "/repo.git"
	gittest.Git(b, env, filepath.Join(root, "hb", "repo.git"), "symbolic-ref", "HEAD", "refs/heads/main")

	httpURL := func(n *latNode, t, repo string) string {
		return "http://bench:" + t + "@" + strings.TrimPrefix(n.base, "http://") + "/bench/" + repo + ".git"
	}
	targets := []*gitTarget{
		{name: "http-backend", url: hbURL},
		{name: "ghost-http", url: httpURL(warm, tok, "repo"), ghost: true,
			coldURL: func(n *latNode) string { return httpURL(n, tok, "repo") }},
	}
	if withSSH {
		sshURL := func(n *latNode) string { return "ssh://git@127.0.0.1:" + n.sshPort + "/bench/repo-ssh.git" }
		targets = append(targets, &gitTarget{name: "ghost-ssh", url: sshURL(warm), coldURL: sshURL, ghost: true})
	}
	push := func(dir, url string) {
		gittest.Git(b, env, dir, "-c", "http.postBuffer=2147483647", "push", "-q", url, "HEAD:refs/heads/main")
	}
	push(src, httpURL(local, localTok, "repo"))
	for _, tg := range targets {
		push(src, tg.url)
		tg.pusher = filepath.Join(root, "push-"+tg.name)
		gittest.Git(b, env, "", "clone", "-q", src, tg.pusher)
		tg.fetcher = filepath.Join(root, "fetch-"+tg.name)
		gittest.Git(b, env, "", "clone", "-q", tg.url, tg.fetcher)
	}

	g := latencyGroup{profile: p}
	row := func(op, key, ref string) *latRow {
		r := &latRow{op: op, key: key, ref: ref}
		g.rows = append(g.rows, r)
		return r
	}
	rows := map[string]*latRow{}
	for _, op := range [][2]string{{"ls-remote", "ls-remote"}, {"push (one commit)", "push"}, {"fetch (one commit)", "fetch"},
		{"clone, warm node", "clone-warm"}, {"clone, cold node", "clone-cold"}} {
		rows[op[0]] = row(op[0], op[1], "http-backend")
	}
	pages := []struct{ op, key, path string }{
		{"page: repository", "page-repo", "/bench/repo"},
		{"page: log", "page-log", "/bench/repo/-/commits/main"},
		{"API: repository", "api-repo", "/api/repos/bench/repo"},
	}
	for _, pg := range pages {
		rows[pg.op] = row(pg.op, pg.key, "ghost, 0 ms")
	}
	record := func(op string, tg *gitTarget, s latSample) {
		r := rows[op]
		switch tg.name {
		case "http-backend":
			r.refs = append(r.refs, s)
		case "ghost-http":
			r.http = append(r.http, s)
		case "ghost-ssh":
			r.ssh = append(r.ssh, s)
		}
	}
	view := func(n *latNode, t, path string) {
		req, err := http.NewRequest(http.MethodGet, n.base+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasPrefix(path, "/api/") {
			req.Header.Set("Authorization", "Bearer "+t)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d", path, res.StatusCode)
		}
	}
	// One untimed pass warms both nodes' code paths (templates, git's
	// first runs).
	for _, pg := range pages {
		view(warm, tok, pg.path)
		view(local, localTok, pg.path)
	}
	nodesOf := func(tg *gitTarget, ns ...*latNode) []*latNode {
		if !tg.ghost {
			return nil
		}
		return ns
	}
	clones := filepath.Join(root, "clones")
	for r := range rounds {
		order := slices.Clone(targets)
		for range r % len(order) {
			order = append(order[1:], order[0])
		}
		each := func(op string, f func(tg *gitTarget) (nodes []*latNode, run func())) {
			for _, tg := range order {
				nodes, run := f(tg)
				record(op, tg, measure(b, nodes, run))
			}
		}
		each("ls-remote", func(tg *gitTarget) ([]*latNode, func()) {
			return nodesOf(tg, warm), func() { gittest.Git(b, env, "", "ls-remote", tg.url) }
		})
		for _, tg := range targets {
			name := fmt.Sprintf("round-%d.txt", r)
			if err := os.WriteFile(filepath.Join(tg.pusher, name), []byte(tg.name+" "+name+"\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			gittest.Git(b, env, tg.pusher, "add", name)
			gittest.Git(b, env, tg.pusher, "commit", "-q", "-m", name)
		}
		each("push (one commit)", func(tg *gitTarget) ([]*latNode, func()) {
			return nodesOf(tg, warm), func() { push(tg.pusher, tg.url) }
		})
		each("fetch (one commit)", func(tg *gitTarget) ([]*latNode, func()) {
			return nodesOf(tg, warm), func() { gittest.Git(b, env, tg.fetcher, "fetch", "-q", "origin") }
		})
		n := 0
		clone := func(url string) func() {
			n++
			dir := filepath.Join(clones, strconv.Itoa(n))
			return func() { gittest.Git(b, env, "", "clone", "-q", "--bare", url, dir) }
		}
		each("clone, warm node", func(tg *gitTarget) ([]*latNode, func()) {
			return nodesOf(tg, warm), clone(tg.url)
		})
		// A node that has never served the repository, started for the
		// round and stopped after it.
		cold := newLatNode(b, slow, filepath.Join(root, "cache-cold-"+strconv.Itoa(r)), withSSH)
		each("clone, cold node", func(tg *gitTarget) ([]*latNode, func()) {
			if !tg.ghost {
				return nil, clone(tg.url)
			}
			return []*latNode{cold}, clone(tg.coldURL(cold))
		})
		cold.close()
		os.RemoveAll(clones)
		// Pages: the warm node against the node with no delay.
		for _, pg := range pages {
			both := []struct {
				n   *latNode
				tok string
			}{{local, localTok}, {warm, tok}}
			if r%2 == 1 {
				both[0], both[1] = both[1], both[0]
			}
			for _, v := range both {
				s := measure(b, []*latNode{v.n}, func() { view(v.n, v.tok, pg.path) })
				if v.n == local {
					rows[pg.op].refs = append(rows[pg.op].refs, s)
				} else {
					rows[pg.op].http = append(rows[pg.op].http, s)
				}
			}
		}
	}
	return g
}

// medianSample is the median of each field of ss on its own.
func medianSample(ss []latSample) latSample {
	field := func(f func(latSample) int64) int64 {
		v := make([]int64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return latSample{
		took: time.Duration(field(func(s latSample) int64 { return int64(s.took) })),
		sent: int(field(func(s latSample) int64 { return int64(s.sent) })),
		path: int(field(func(s latSample) int64 { return int64(s.path) })),
		busy: time.Duration(field(func(s latSample) int64 { return int64(s.busy) })),
	}
}

// ratio is ghost's median time over the reference's.
func (r *latRow) ratio(ghost []latSample) float64 {
	return medianSample(ghost).took.Seconds() / medianSample(r.refs).took.Seconds()
}

func ms(d time.Duration) string { return strconv.FormatFloat(d.Seconds()*1000, 'f', 0, 64) }

// latencyTables renders the groups: a table per profile with the
// medians, ratios and request counts, then the ratios side by side.
func latencyTables(groups []latencyGroup) string {
	var sb strings.Builder
	for _, g := range groups {
		fmt.Fprintf(&sb, "Store latency %s. Milliseconds, medians; × is ghost over the reference; requests are sent / critical path (waited for in sequence), store busy is how long one was in flight:\n\n", g.profile.Name)
		sb.WriteString("| operation | reference | ms | ghost HTTP | × | requests | store busy | ghost SSH | × | requests |\n")
		sb.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, r := range g.rows {
			ref, h := medianSample(r.refs), medianSample(r.http)
			fmt.Fprintf(&sb, "| %s | %s | %s | %s | %.2f | %d / %d | %s |", r.op, r.ref, ms(ref.took), ms(h.took), r.ratio(r.http), h.sent, h.path, ms(h.busy))
			if len(r.ssh) > 0 {
				s := medianSample(r.ssh)
				fmt.Fprintf(&sb, " %s | %.2f | %d / %d |\n", ms(s.took), r.ratio(r.ssh), s.sent, s.path)
			} else {
				sb.WriteString(" | | |\n")
			}
		}
		sb.WriteString("\n")
	}
	last := groups[len(groups)-1]
	fmt.Fprintf(&sb, "Critical paths at %s, of the last round (sent / path: the requests, in order):\n\n", last.profile.Name)
	for _, r := range last.rows {
		for _, v := range []struct {
			via string
			ss  []latSample
		}{{"HTTP", r.http}, {"SSH", r.ssh}} {
			if len(v.ss) > 0 {
				s := v.ss[len(v.ss)-1]
				fmt.Fprintf(&sb, "- %s, %s, %d / %d: %s\n", r.op, v.via, s.sent, s.path, chainString(s.chain))
			}
		}
	}
	sb.WriteString("\n")
	if len(groups) < 2 {
		return sb.String()
	}
	sb.WriteString("Ghost over HTTP against its reference, × (critical path), by store latency:\n\n| operation |")
	for _, g := range groups {
		sb.WriteString(" " + g.profile.Name + " |")
	}
	sb.WriteString("\n| --- |" + strings.Repeat(" ---: |", len(groups)) + "\n")
	for i, r := range groups[0].rows {
		sb.WriteString("| " + r.op + " |")
		for _, g := range groups {
			gr := g.rows[i]
			fmt.Fprintf(&sb, " %.2f (%d) |", gr.ratio(gr.http), medianSample(gr.http).path)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}

// idSegment is what a ULID, a hash or another generated name looks like
// in a key.
var idSegment = regexp.MustCompile(`[0-9A-Za-z]{20,}`)

// chainString writes a critical path as its requests' operations and
// key shapes, runs of the same request folded.
func chainString(chain []countstore.Request) string {
	var parts []string
	n := 0
	for i, r := range chain {
		n++
		if i+1 < len(chain) && chain[i+1].Op == r.Op && idSegment.ReplaceAllString(chain[i+1].Key, "<id>") == idSegment.ReplaceAllString(r.Key, "<id>") {
			continue
		}
		p := r.Op + " " + idSegment.ReplaceAllString(r.Key, "<id>")
		if n > 1 {
			p += fmt.Sprintf(" ×%d", n)
		}
		parts = append(parts, p)
		n = 0
	}
	return strings.Join(parts, " → ")
}

// TestLatencyTables is the benchmark's smoke test in `go test ./...`: its
// tables render from samples, with and without SSH, without starting a
// server.
func TestLatencyTables(t *testing.T) {
	msec := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	chain := []countstore.Request{
		{Op: countstore.OpGet, Key: "meta/repos/bench/repo", Depth: 1},
		{Op: countstore.OpGet, Key: "repos/01JABCDEFGHJKMNPQRSTVWXYZ0/index", Depth: 2},
		{Op: countstore.OpGet, Key: "repos/01JABCDEFGHJKMNPQRSTVWXYZ0/index", Depth: 3},
	}
	row := func(ssh bool) *latRow {
		r := &latRow{op: "fetch (one commit)", key: "fetch", ref: "http-backend",
			refs: []latSample{{took: msec(100)}, {took: msec(300)}, {took: msec(200)}},
			http: []latSample{{took: msec(400), sent: 4, path: 3, chain: chain}, {took: msec(300), sent: 4, path: 3, chain: chain}}}
		if ssh {
			r.ssh = r.http
		}
		return r
	}
	out := latencyTables([]latencyGroup{
		{profile: latencystore.Fixed(0), rows: []*latRow{row(false)}},
		{profile: latencystore.Fixed(60 * time.Millisecond), rows: []*latRow{row(true)}},
	})
	for _, want := range []string{
		"| fetch (one commit) | http-backend | 200 | 400 | 2.00 | 4 / 3 | 0 | | | |",
		"| fetch (one commit) | http-backend | 200 | 400 | 2.00 | 4 / 3 | 0 | 400 | 2.00 | 4 / 3 |",
		"- fetch (one commit), SSH, 4 / 3: get meta/repos/bench/repo → get repos/<id>/index ×2",
		"| fetch (one commit) | 2.00 (3) | 2.00 (3) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
}
