// Package e2e holds ghost's end-to-end tests: testscript scripts in
// testdata/*.txtar that drive the real ghost binary (this test binary,
// re-executed as "ghost") and the real git client over HTTP on loopback.
//
// Commands the scripts get besides testscript's own:
//
//	serve NAME [ghost serve flags]  start "ghost serve" on a free loopback port in
//	                                the background; sets $NAME (http://host:port)
//	                                and $NAME_HOST (host:port); logs go to $WORK/NAME.log.
//	                                SSH listens on another free port (unless the flags
//	                                or GHOST_SSH_LISTEN say otherwise): $NAME_SSH
//	                                (host:port) and $NAME_SSH_PORT
//	expand FILE...                  replace $VAR and ${VAR} in each file by the
//	                                script's variables (for ssh_config, known_hosts)
//	stopserve NAME                  SIGTERM the server and expect a clean exit (not
//	                                "stop", testscript's own, which ends the script)
//	stdout2env VAR                  set $VAR to the first line of the last stdout
//	waitfile FILE                   wait (up to a minute) until FILE exists
//	grep2env VAR REGEXP FILE        set $VAR to REGEXP's first group in FILE's first match
//	                                (FILE may be stdout or stderr)
//	http METHOD URL                 one HTTP request (userinfo in URL = Basic auth);
//	                                prints "status NNN", the headers but Date, the body
//	waitref REMOTE REF ID           wait (up to a minute) until git ls-remote REMOTE REF
//	                                names ID (a ref the server moves in the background)
//	randfile FILE BYTES             write BYTES pseudo-random bytes to FILE, the same for
//	                                the same FILE name (large LFS objects, without
//	                                keeping them in testdata)
//	s3server NAME [unchecked]       start the S3 test server (s3test: gofakes3 checking
//	                                presigned signatures and SHA-256 checksums as S3 does;
//	                                "unchecked": checksums as gofakes3 keeps them) on
//	                                loopback with a bucket "ghost"; sets $NAME (its URL)
//	                                and the AWS_* credentials ghost reads
//	s3requests NAME presigned|node METHOD PART
//	                                print the S3 server's requests so far, presigned or
//	                                the node's own, of METHOD on paths holding PART
package e2e

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/ghost-scm/ghost/internal/cli"
	"github.com/ghost-scm/ghost/internal/objstore/s3store/s3test"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ghost": func() {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
			stop()
			os.Exit(code)
		},
	})
}

type serversKey struct{}

// servers are the background ghost processes of one script.
type servers struct {
	mu    sync.Mutex
	procs map[string]*exec.Cmd
}

func TestScripts(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			home := filepath.Join(env.WorkDir, "home")
			if err := os.MkdirAll(home, 0o755); err != nil {
				return err
			}
			gitconfig := filepath.Join(home, ".gitconfig")
			cfg := "[user]\n\tname = Ghost Test\n\temail = test@ghost.invalid\n[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n[protocol]\n\tversion = 2\n"
			if err := os.WriteFile(gitconfig, []byte(cfg), 0o644); err != nil {
				return err
			}
			env.Setenv("HOME", home)
			env.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			env.Setenv("GIT_CONFIG_GLOBAL", gitconfig)
			env.Setenv("GIT_TERMINAL_PROMPT", "0")
			env.Setenv("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
			env.Setenv("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
			env.Setenv("LC_ALL", "C")
			env.Setenv("GHOST_DATA_DIR", filepath.Join(env.WorkDir, "data"))
			env.Values[serversKey{}] = &servers{procs: map[string]*exec.Cmd{}}
			env.Values[s3Key{}] = &s3Servers{byName: map[string]*s3test.Server{}}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"serve":      cmdServe,
			"stopserve":  cmdStop,
			"stdout2env": cmdStdout2Env,
			"grep2env":   cmdGrep2Env,
			"waitfile":   cmdWaitFile,
			"http":       cmdHTTP,
			"expand":     cmdExpand,
			"waitref":    cmdWaitRef,
			"receiver":   cmdReceiver,
			"randfile":   cmdRandFile,
			"s3server":   cmdS3Server,
			"s3requests": cmdS3Requests,
		},
	})
}

// scriptEnv is the environment a background server inherits: the test
// process's, minus git and ghost settings, plus the script's.
func scriptEnv(ts *testscript.TestScript) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "GHOST_") {
			env = append(env, kv)
		}
	}
	for _, k := range []string{"HOME", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "LC_ALL", "GHOST_DATA_DIR", "GHOST_CACHE_DIR", "GHOST_LISTEN", "GHOST_SSH_LISTEN", "GHOST_SSH_ANONYMOUS_READ", "TMPDIR",
		"GHOST_MAX_PUSH_BYTES", "GHOST_MAX_FETCH_REQUEST_BYTES", "GHOST_FETCH_REQUEST_TIMEOUT", "GHOST_IO_TIMEOUT",
		"GHOST_MAX_GIT_PROCESSES", "GHOST_GIT_QUEUE", "GHOST_GIT_QUEUE_TIMEOUT", "GHOST_STORE_TEMP_MAX_AGE",
		"GHOST_S3_BUCKET", "GHOST_S3_ENDPOINT", "GHOST_S3_PATH_STYLE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"} {
		if v := ts.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func cmdServe(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: serve NAME [flags]")
	}
	name := args[0]
	srv := ts.Value(serversKey{}).(*servers)
	bin, err := exec.LookPath("ghost")
	ts.Check(err)
	cmdArgs := append([]string{"serve"}, args[1:]...)
	if !slicesContainsPrefix(args[1:], "--listen") && ts.Getenv("GHOST_LISTEN") == "" {
		cmdArgs = append(cmdArgs, "--listen", "127.0.0.1:0")
	}
	// Never the default port: scripts run in parallel.
	if !slicesContainsPrefix(args[1:], "--ssh-listen") && ts.Getenv("GHOST_SSH_LISTEN") == "" {
		cmdArgs = append(cmdArgs, "--ssh-listen", "127.0.0.1:0")
	}
	cmd := exec.Command(bin, cmdArgs...)
	cmd.Dir = ts.Getenv("WORK")
	cmd.Env = scriptEnv(ts)
	logf, err := os.Create(filepath.Join(ts.Getenv("WORK"), name+".log"))
	ts.Check(err)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	ts.Check(err)
	ts.Check(cmd.Start())
	ts.Defer(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		logf.Close()
	})
	// serve prints the SSH address, if any, before the HTTP one.
	type addrs struct{ http, ssh string }
	addr := make(chan addrs, 1)
	go func() {
		var a addrs
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "ghost: ssh on "); ok {
				a.ssh = strings.Fields(rest)[0]
			}
			if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
				a.http = strings.Fields(rest)[0]
				addr <- a
				break
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	select {
	case a := <-addr:
		ts.Setenv(name, a.http)
		ts.Setenv(name+"_HOST", a.http[strings.Index(a.http, "://")+3:])
		if a.ssh != "" {
			_, port, err := net.SplitHostPort(a.ssh)
			ts.Check(err)
			ts.Setenv(name+"_SSH", a.ssh)
			ts.Setenv(name+"_SSH_PORT", port)
		}
	case <-time.After(30 * time.Second):
		ts.Fatalf("server %s did not report its address; log:\n%s", name, ts.ReadFile(filepath.Join(ts.Getenv("WORK"), name+".log")))
	}
	srv.mu.Lock()
	srv.procs[name] = cmd
	srv.mu.Unlock()
}

func slicesContainsPrefix(args []string, prefix string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, prefix) {
			return true
		}
	}
	return false
}

func cmdStop(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: stopserve NAME")
	}
	srv := ts.Value(serversKey{}).(*servers)
	srv.mu.Lock()
	cmd := srv.procs[args[0]]
	delete(srv.procs, args[0])
	srv.mu.Unlock()
	if cmd == nil {
		ts.Fatalf("no server %s", args[0])
	}
	ts.Check(cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if (err != nil) != neg {
			ts.Fatalf("server %s exited: %v", args[0], err)
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		ts.Fatalf("server %s did not stop after SIGTERM", args[0])
	}
}

func cmdStdout2Env(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: stdout2env VAR")
	}
	out := ts.ReadFile("stdout")
	line, _, _ := strings.Cut(out, "\n")
	ts.Setenv(args[0], strings.TrimSpace(line))
}

func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile FILE")
	}
	p := ts.MkAbs(args[0])
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s did not appear within a minute", args[0])
		}
	}
}

func cmdRandFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: randfile FILE BYTES")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || n < 0 {
		ts.Fatalf("randfile: bad size %q", args[1])
	}
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	seed := sha256.Sum256([]byte(args[0]))
	_, err = io.CopyN(f, rand.NewChaCha8(seed), n)
	ts.Check(err)
	ts.Check(f.Close())
}

func cmdWaitRef(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: waitref REMOTE REF ID")
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := ts.Exec("git", "ls-remote", args[0], args[1])
		if err == nil && strings.HasPrefix(ts.ReadFile("stdout"), args[2]+"\t") {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("%s did not become %s within a minute (ls-remote: %q, %v)", args[1], args[2], ts.ReadFile("stdout"), err)
		}
	}
}

func cmdGrep2Env(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: grep2env VAR REGEXP FILE")
	}
	re, err := regexp.Compile("(?m)" + args[1])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile(args[2]))
	if len(m) < 2 {
		ts.Fatalf("grep2env: no match of %q with a group in %s", args[1], args[2])
	}
	ts.Setenv(args[0], m[1])
}

func cmdHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: http METHOD URL")
	}
	req, err := http.NewRequest(args[0], args[1], nil)
	ts.Check(err)
	resp, err := http.DefaultClient.Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	ts.Check(err)
	var b strings.Builder
	fmt.Fprintf(&b, "status %d\n", resp.StatusCode)
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		if k != "Date" { // varies between otherwise identical answers
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range resp.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteString("\n")
	b.Write(body)
	ts.Stdout().Write([]byte(b.String()))
}

func cmdExpand(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: expand FILE...")
	}
	for _, f := range args {
		path := ts.MkAbs(f)
		ts.Check(os.WriteFile(path, []byte(os.Expand(ts.ReadFile(f), ts.Getenv)), 0o644))
	}
}

// cmdReceiver starts a webhook receiver on 127.0.0.1 for the rest of the
// script: "receiver NAME SECRETFILE" sets $NAME to its URL; each delivery
// is checked as GitHub's receivers check it (X-Hub-Signature-256, the
// HMAC-SHA256 of the body under the secret), its body written to
// NAME.d/<event> and a line "<event> <delivery id> signature ok|BAD"
// appended to NAME.log.
func cmdReceiver(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: receiver NAME SECRETFILE")
	}
	name := args[0]
	secret := []byte(strings.TrimSpace(ts.ReadFile(args[1])))
	dir, logFile := ts.MkAbs(name+".d"), ts.MkAbs(name+".log") // where the script is now
	ts.Check(os.MkdirAll(dir, 0o755))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	var mu sync.Mutex
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		verdict := "signature BAD"
		if hmac.Equal([]byte(r.Header.Get("X-Hub-Signature-256")), []byte("sha256="+hex.EncodeToString(mac.Sum(nil)))) {
			verdict = "signature ok"
		}
		event := r.Header.Get("X-GitHub-Event")
		if !regexp.MustCompile(`^[a-z_]{1,40}$`).MatchString(event) {
			event = "unknown"
		}
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "%s %s %s\n", event, r.Header.Get("X-GitHub-Delivery"), verdict)
			f.Close()
		}
		os.WriteFile(filepath.Join(dir, event), body, 0o644)
		fmt.Fprintln(w, "received")
	})}
	go srv.Serve(ln)
	ts.Defer(func() { srv.Close() })
	ts.Setenv(name, "http://"+ln.Addr().String()+"/hook")
}

type s3Key struct{}

// s3Servers are the S3 test servers of one script.
type s3Servers struct {
	mu     sync.Mutex
	byName map[string]*s3test.Server
}

// The S3 test server's credentials, which ghost reads from AWS_*.
const (
	s3AccessKey = "AKIDE2E"
	s3Secret    = "e2e-secret"
)

// cmdS3Server starts the S3 test server on 127.0.0.1 for the rest of the
// script: "s3server NAME [unchecked]".
func cmdS3Server(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 || (len(args) == 2 && args[1] != "unchecked") {
		ts.Fatalf("usage: s3server NAME [unchecked]")
	}
	srv := s3test.New(s3test.Options{AccessKey: s3AccessKey, Secret: s3Secret, Unchecked: len(args) == 2})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	hs := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: srv}
	go hs.Serve(ln)
	ts.Defer(func() { hs.Close() })
	url := "http://" + ln.Addr().String()
	c := s3.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(s3AccessKey, s3Secret, "")},
		func(o *s3.Options) { o.BaseEndpoint = aws.String(url); o.UsePathStyle = true })
	_, err = c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("ghost")})
	ts.Check(err)
	all := ts.Value(s3Key{}).(*s3Servers)
	all.mu.Lock()
	all.byName[args[0]] = srv
	all.mu.Unlock()
	ts.Setenv(args[0], url)
	ts.Setenv("AWS_ACCESS_KEY_ID", s3AccessKey)
	ts.Setenv("AWS_SECRET_ACCESS_KEY", s3Secret)
	ts.Setenv("AWS_REGION", "us-east-1")
}

// cmdS3Requests prints an S3 test server's requests:
// "s3requests NAME presigned|node METHOD PART".
func cmdS3Requests(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 || (args[1] != "presigned" && args[1] != "node") {
		ts.Fatalf("usage: s3requests NAME presigned|node METHOD PART")
	}
	all := ts.Value(s3Key{}).(*s3Servers)
	all.mu.Lock()
	srv := all.byName[args[0]]
	all.mu.Unlock()
	if srv == nil {
		ts.Fatalf("no S3 server %s", args[0])
	}
	out := ts.Stdout() // asked for even when nothing is printed, so stdout is this command's
	for _, l := range srv.Requests(args[1] == "presigned", args[2], args[3]) {
		fmt.Fprintln(out, l)
	}
}
