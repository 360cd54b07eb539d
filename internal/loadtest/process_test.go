package loadtest

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/testkit"
)

// ghostProc is a running "ghost serve".
type ghostProc struct {
	Addr string
	Pid  int
	Logs *testkit.Buffer
}

// startGhost runs "bin serve" on a free loopback port with env (nil: this
// process's), waits until it is healthy, and stops it (SIGINT, then KILL
// after 30 s) when the test ends, logging its output if the test failed.
func startGhost(t *testing.T, bin string, env []string, args ...string) *ghostProc {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin, append([]string{"serve", "--listen", addr, "--ssh-listen", "", "--log-level", "warn"}, args...)...)
	cmd.Env = env
	logs := &testkit.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("ghost serve on %s:\n%s", addr, logs.String())
		}
	})
	waitHealthy(t, "http://"+addr+"/healthz")
	return &ghostProc{Addr: addr, Pid: cmd.Process.Pid, Logs: logs}
}
