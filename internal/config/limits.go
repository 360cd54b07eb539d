package config

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/githttp"
)

// DefaultStoreTempMaxAge is how old a filesystem store's write temporary
// must be before "ghost serve" removes it at start.
const DefaultStoreTempMaxAge = time.Hour

// Limits are the resource limits of "ghost serve", the defences of a
// public git server against clients that send too much, too slowly or
// too often (docs/adr/0015-git-resource-limits.md). For every setting, 0
// switches the limit off (no queue, for GitQueue).
type Limits struct {
	MaxPushBytes         int64
	MaxFetchRequestBytes int64
	FetchRequestTimeout  time.Duration
	IOTimeout            time.Duration
	MaxGitProcesses      int
	GitQueue             int
	GitQueueTimeout      time.Duration
	StoreTempMaxAge      time.Duration

	errs []error // GHOST_* values that did not parse
}

// Register binds the limits to fs, with defaults from their GHOST_*
// variables, like Config.Register. A variable that does not parse is
// reported by Err, after parsing the flags.
func (l *Limits) Register(fs *flag.FlagSet) {
	l.bytes(fs, &l.MaxPushBytes, "max-push-bytes", "GHOST_MAX_PUSH_BYTES", githttp.DefaultMaxPushBytes,
		"largest push accepted, counted after gzip decoding; refused in git's own output")
	l.bytes(fs, &l.MaxFetchRequestBytes, "max-fetch-request-bytes", "GHOST_MAX_FETCH_REQUEST_BYTES", githttp.DefaultMaxFetchRequestBytes,
		"largest fetch (upload-pack) request body, after gzip decoding")
	l.duration(fs, &l.FetchRequestTimeout, "fetch-request-timeout", "GHOST_FETCH_REQUEST_TIMEOUT", githttp.DefaultFetchRequestTimeout,
		"time allowed to receive a whole fetch request body")
	l.duration(fs, &l.IOTimeout, "io-timeout", "GHOST_IO_TIMEOUT", githttp.DefaultIOTimeout,
		"how long a git request's connection may move no byte; extends while bytes flow")
	l.int(fs, &l.MaxGitProcesses, "max-git-processes", "GHOST_MAX_GIT_PROCESSES", githttp.DefaultMaxGitProcesses(),
		"git requests served at once on this node")
	l.int(fs, &l.GitQueue, "git-queue", "GHOST_GIT_QUEUE", 4*githttp.DefaultMaxGitProcesses(),
		"git requests that may wait for a slot; more get 503 with Retry-After")
	l.duration(fs, &l.GitQueueTimeout, "git-queue-timeout", "GHOST_GIT_QUEUE_TIMEOUT", githttp.DefaultGitQueueTimeout,
		"how long a git request waits for a slot before 503")
	l.duration(fs, &l.StoreTempMaxAge, "store-temp-max-age", "GHOST_STORE_TEMP_MAX_AGE", DefaultStoreTempMaxAge,
		"at start, remove filesystem-store write temporaries older than this")
}

// Err reports GHOST_* limit variables that did not parse, and negative
// values.
func (l *Limits) Err() error {
	errs := l.errs
	for name, v := range map[string]int64{
		"max-push-bytes": l.MaxPushBytes, "max-fetch-request-bytes": l.MaxFetchRequestBytes,
		"fetch-request-timeout": int64(l.FetchRequestTimeout), "io-timeout": int64(l.IOTimeout),
		"max-git-processes": int64(l.MaxGitProcesses), "git-queue": int64(l.GitQueue),
		"git-queue-timeout": int64(l.GitQueueTimeout), "store-temp-max-age": int64(l.StoreTempMaxAge),
	} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("--%s must not be negative", name))
		}
	}
	return errors.Join(errs...)
}

func usage(text, env string) string {
	zero := ", 0 for no limit"
	switch env {
	case "GHOST_GIT_QUEUE":
		zero = ", 0 for none"
	case "GHOST_GIT_QUEUE_TIMEOUT":
		zero = ", 0 to wait as long as it takes"
	case "GHOST_STORE_TEMP_MAX_AGE":
		zero = ", 0 to keep them"
	}
	return text + zero + " (env " + env + ")"
}

func (l *Limits) bytes(fs *flag.FlagSet, p *int64, name, env string, def int64, text string) {
	*p = def
	if v := Env(env, ""); v != "" {
		n, err := ParseBytes(v)
		if err != nil {
			l.errs = append(l.errs, fmt.Errorf("%s: %w", env, err))
		}
		*p = n
	}
	fs.Func(name, usage(text, env)+fmt.Sprintf(" (default %d)", def), func(s string) error {
		n, err := ParseBytes(s)
		*p = n
		return err
	})
}

func (l *Limits) duration(fs *flag.FlagSet, p *time.Duration, name, env string, def time.Duration, text string) {
	if v := Env(env, ""); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			l.errs = append(l.errs, fmt.Errorf("%s: %w", env, err))
		}
		def = d
	}
	fs.DurationVar(p, name, def, usage(text, env))
}

func (l *Limits) int(fs *flag.FlagSet, p *int, name, env string, def int, text string) {
	if v := Env(env, ""); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			l.errs = append(l.errs, fmt.Errorf("%s: %w", env, err))
		}
		def = n
	}
	fs.IntVar(p, name, def, usage(text, env))
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
