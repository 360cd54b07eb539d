package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/lfs"
	"github.com/ghost-scm/ghost/internal/pushprotect"
	"github.com/ghost-scm/ghost/internal/sshd"
)

// DefaultStoreTempMaxAge is how old a filesystem store's write temporary
// must be before "ghost serve" removes it at start.
const DefaultStoreTempMaxAge = time.Hour

// Limits are the resource limits of "ghost serve", the defences of a
// public git server against clients that send too much, too slowly or
// too often (docs/adr/0015-git-resource-limits.md). For every flag, 0
// switches the limit off (no queue, for GitQueue); Git and SSH turn that
// into the Go types' negative "off", where zero means "the default".
type Limits struct {
	// The git path's, declared once in gitsvc.
	gitsvc.Limits
	StoreTempMaxAge time.Duration
	// LFSMaxObjectBytes bounds one Git LFS object (issue 23).
	LFSMaxObjectBytes int64
	// LFSQuotaBytes bounds the Git LFS bytes one tenant stores, counted
	// once for all its repositories (0: no bound; docs/adr/0129-lfs-gc.md).
	LFSQuotaBytes int64
	// PushProtectLFSBytes bounds the Git LFS bytes push protection reads
	// before a push lands (docs/adr/0130-lfs-push-protection.md).
	PushProtectLFSBytes int64

	// The SSH transport's (docs/adr/0090-bounded-serving.md).
	SSHHandshakeTimeout            time.Duration
	SSHMaxUnauthenticated          int
	SSHMaxUnauthenticatedPerSource int
	SSHMaxConnsPerPrincipal        int
	SSHMaxSessions                 int
	SSHExecTimeout                 time.Duration
}

// Register binds the limits to fs, each with its GHOST_* variable as the
// default (config.Var and friends): a variable that does not parse is a
// usage error unless the flag is given.
func (l *Limits) Register(fs *pflag.FlagSet) {
	def := gitsvc.DefaultLimits()
	l.MaxPushBytes, l.MaxFetchRequestBytes = def.MaxPushBytes, def.MaxFetchRequestBytes
	Var(fs, (*bytesValue)(&l.MaxPushBytes), "max-push-bytes", "GHOST_MAX_PUSH_BYTES",
		usage("largest push accepted, counted after gzip decoding; refused in git's own output", "GHOST_MAX_PUSH_BYTES"))
	Var(fs, (*bytesValue)(&l.MaxFetchRequestBytes), "max-fetch-request-bytes", "GHOST_MAX_FETCH_REQUEST_BYTES",
		usage("largest fetch (upload-pack) request body, after gzip decoding", "GHOST_MAX_FETCH_REQUEST_BYTES"))
	DurationVar(fs, &l.FetchRequestTimeout, "fetch-request-timeout", "GHOST_FETCH_REQUEST_TIMEOUT", def.FetchRequestTimeout,
		usage("time allowed to receive a whole fetch request body", "GHOST_FETCH_REQUEST_TIMEOUT"))
	DurationVar(fs, &l.IOTimeout, "io-timeout", "GHOST_IO_TIMEOUT", def.IOTimeout,
		usage("how long a git request's connection may move no byte; extends while bytes flow", "GHOST_IO_TIMEOUT"))
	IntVar(fs, &l.MaxGitProcesses, "max-git-processes", "GHOST_MAX_GIT_PROCESSES", def.MaxGitProcesses,
		usage("git requests served at once on this node", "GHOST_MAX_GIT_PROCESSES"))
	IntVar(fs, &l.GitQueue, "git-queue", "GHOST_GIT_QUEUE", def.GitQueue,
		usage("git requests that may wait for a slot; more get 503 with Retry-After", "GHOST_GIT_QUEUE"))
	DurationVar(fs, &l.GitQueueTimeout, "git-queue-timeout", "GHOST_GIT_QUEUE_TIMEOUT", def.GitQueueTimeout,
		usage("how long a git request waits for a slot before 503", "GHOST_GIT_QUEUE_TIMEOUT"))
	l.LFSMaxObjectBytes = lfs.DefaultMaxObjectSize
	Var(fs, (*bytesValue)(&l.LFSMaxObjectBytes), "lfs-max-object-bytes", "GHOST_LFS_MAX_OBJECT_BYTES",
		usage("largest Git LFS object accepted", "GHOST_LFS_MAX_OBJECT_BYTES"))
	Var(fs, (*bytesValue)(&l.LFSQuotaBytes), "lfs-quota-bytes", "GHOST_LFS_QUOTA_BYTES",
		usage("Git LFS bytes one tenant may store, counted once for all its repositories and forks", "GHOST_LFS_QUOTA_BYTES"))
	l.PushProtectLFSBytes = pushprotect.DefaultMaxLFSBytes
	Var(fs, (*bytesValue)(&l.PushProtectLFSBytes), "push-protection-lfs-bytes", "GHOST_PUSH_PROTECTION_LFS_BYTES",
		usage("Git LFS bytes push protection reads before a push lands, riskiest files first; a push adding more is refused unless its repository scans LFS objects after the push", "GHOST_PUSH_PROTECTION_LFS_BYTES"))
	DurationVar(fs, &l.StoreTempMaxAge, "store-temp-max-age", "GHOST_STORE_TEMP_MAX_AGE", DefaultStoreTempMaxAge,
		usage("at start, remove filesystem-store write temporaries older than this", "GHOST_STORE_TEMP_MAX_AGE"))
	DurationVar(fs, &l.SSHHandshakeTimeout, "ssh-handshake-timeout", "GHOST_SSH_HANDSHAKE_TIMEOUT", sshd.DefaultHandshakeTimeout,
		usage("time an SSH client has to finish the handshake and authenticate", "GHOST_SSH_HANDSHAKE_TIMEOUT"))
	IntVar(fs, &l.SSHMaxUnauthenticated, "ssh-max-unauthenticated", "GHOST_SSH_MAX_UNAUTHENTICATED", sshd.DefaultMaxUnauthenticated,
		usage("SSH connections that may be authenticating at once; more are closed at once", "GHOST_SSH_MAX_UNAUTHENTICATED"))
	IntVar(fs, &l.SSHMaxUnauthenticatedPerSource, "ssh-max-unauthenticated-per-source", "GHOST_SSH_MAX_UNAUTHENTICATED_PER_SOURCE", sshd.DefaultMaxUnauthenticatedPerSource,
		usage("SSH connections from one address that may be authenticating at once", "GHOST_SSH_MAX_UNAUTHENTICATED_PER_SOURCE"))
	IntVar(fs, &l.SSHMaxConnsPerPrincipal, "ssh-max-connections-per-principal", "GHOST_SSH_MAX_CONNECTIONS_PER_PRINCIPAL", sshd.DefaultMaxConnsPerPrincipal,
		usage("authenticated SSH connections of one tenant (of one address, for anonymous clients)", "GHOST_SSH_MAX_CONNECTIONS_PER_PRINCIPAL"))
	IntVar(fs, &l.SSHMaxSessions, "ssh-max-sessions", "GHOST_SSH_MAX_SESSIONS", sshd.DefaultMaxSessions,
		usage("session channels one SSH connection may have open; more are refused", "GHOST_SSH_MAX_SESSIONS"))
	DurationVar(fs, &l.SSHExecTimeout, "ssh-exec-timeout", "GHOST_SSH_EXEC_TIMEOUT", sshd.DefaultExecTimeout,
		usage("time an SSH session channel may stay open without asking for a command", "GHOST_SSH_EXEC_TIMEOUT"))
}

// Git returns the git path's limits as gitsvc takes them: a flag's 0
// ("no limit") becomes negative. PushTimeout has no flag and keeps its
// default.
func (l *Limits) Git() gitsvc.Limits {
	g := l.Limits
	g.MaxPushBytes = off(g.MaxPushBytes)
	g.MaxFetchRequestBytes = off(g.MaxFetchRequestBytes)
	g.MaxGitProcesses = off(g.MaxGitProcesses)
	g.GitQueue = off(g.GitQueue)
	g.GitQueueTimeout = off(g.GitQueueTimeout)
	g.FetchRequestTimeout = off(g.FetchRequestTimeout)
	g.IOTimeout = off(g.IOTimeout)
	return g
}

// Off turns a flag's 0 ("no limit") into the negative value that
// switches a limit off in the Go types, where 0 means the default.
func Off[T int | int64 | time.Duration](v T) T { return off(v) }

func off[T int | int64 | time.Duration](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// Err reports negative limits.
func (l *Limits) Err() error {
	var errs []error
	for name, v := range map[string]int64{
		"max-push-bytes": l.MaxPushBytes, "max-fetch-request-bytes": l.MaxFetchRequestBytes,
		"fetch-request-timeout": int64(l.FetchRequestTimeout), "io-timeout": int64(l.IOTimeout),
		"max-git-processes": int64(l.MaxGitProcesses), "git-queue": int64(l.GitQueue),
		"git-queue-timeout": int64(l.GitQueueTimeout), "store-temp-max-age": int64(l.StoreTempMaxAge),
		"lfs-max-object-bytes": l.LFSMaxObjectBytes, "lfs-quota-bytes": l.LFSQuotaBytes, "push-protection-lfs-bytes": l.PushProtectLFSBytes,
		"ssh-handshake-timeout": int64(l.SSHHandshakeTimeout), "ssh-max-unauthenticated": int64(l.SSHMaxUnauthenticated),
		"ssh-max-unauthenticated-per-source": int64(l.SSHMaxUnauthenticatedPerSource),
		"ssh-max-connections-per-principal":  int64(l.SSHMaxConnsPerPrincipal),
		"ssh-max-sessions":                   int64(l.SSHMaxSessions), "ssh-exec-timeout": int64(l.SSHExecTimeout),
	} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("--%s must not be negative", name))
		}
	}
	return errors.Join(errs...)
}

// usage adds what 0 means to a limit's help; config.Var adds the
// variable's name.
func usage(text, env string) string {
	switch env {
	case "GHOST_GIT_QUEUE":
		return text + ", 0 for none"
	case "GHOST_GIT_QUEUE_TIMEOUT":
		return text + ", 0 to wait as long as it takes"
	case "GHOST_STORE_TEMP_MAX_AGE":
		return text + ", 0 to keep them"
	}
	return text + ", 0 for no limit"
}

// bytesValue is a size flag: bytes, or a number with a binary unit.
type bytesValue int64

func (b *bytesValue) Set(s string) error {
	n, err := ParseBytes(s)
	if err != nil {
		return err
	}
	*b = bytesValue(n)
	return nil
}

func (b *bytesValue) String() string { return FormatBytes(int64(*b)) }

func (b *bytesValue) Type() string { return "bytes" }

// FormatBytes writes a size the way flags take it: in the largest binary
// unit that divides it exactly ("64MiB", "2GiB", "1536KiB"), or in bytes.
func FormatBytes(n int64) string {
	if n == 0 {
		return "0"
	}
	for i, u := range []string{"TiB", "GiB", "MiB", "KiB"} {
		shift := uint(10 * (4 - i))
		if n%(1<<shift) == 0 {
			return strconv.FormatInt(n>>shift, 10) + u
		}
	}
	return strconv.FormatInt(n, 10)
}

// HumanBytes writes a size for people: "512 B", "22.9 MiB", "1.5 GiB".
// Output of commands uses it; flags take it back only when exact
// (FormatBytes).
func HumanBytes(n int64) string {
	if n < 0 {
		return "-" + HumanBytes(-n)
	}
	if n < 1<<10 {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v, i := float64(n)/(1<<10), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i]
}

// ParseBytes parses a size: a number of bytes, optionally followed by a
// binary unit (K, M, G, T, with or without "iB"; "2G" and "2GiB" are both
// 2<<30).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	shift := 0
	for i, u := range []string{"K", "M", "G", "T"} {
		for _, suf := range []string{u + "iB", u + "B", u, strings.ToLower(u)} {
			if v, ok := strings.CutSuffix(t, suf); ok {
				t, shift = strings.TrimSpace(v), 10*(i+1)
				break
			}
		}
		if shift != 0 {
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q: want bytes, or a number with K, M, G or T", s)
	}
	if n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("bad size %q: out of range", s)
	}
	return n << shift, nil
}
