package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/secretscan"
	"github.com/ghost-scm/ghost/internal/secretscan/report"
)

const scanUsage = `ghost scan [flags] [PATH]

Scans the full history of the git repository at PATH (default ".") for
secrets with gitleaks' rules, each unique blob once; with --no-git, scans
the files of a directory. Exit code: 1 with findings (see --exit-code),
0 without, 2 on error.`

// scanError is a scan that failed: Main reports it with exit code 2,
// gitleaks' code for an error, which errUsage selects.
type scanError struct{ err error }

func (e scanError) Error() string   { return e.err.Error() }
func (e scanError) Unwrap() []error { return []error{e.err, errUsage} }

// errFindings is the error of a scan that found secrets: Main exits with
// --exit-code (1 by default).
var errFindings = errors.New("secrets found")

// newScanCmd returns "ghost scan", the local scanner: it needs no server.
func newScanCmd(env *Env) *cobra.Command {
	var (
		noGit, noProgress, skipBinary  bool
		configPath, format, reportPath string
		ignorePath, keyFile, rev       string
		exitCode, workers, decode      int
		maxSize                        int64
	)
	cmd := &cobra.Command{
		Use:   "scan [PATH]",
		Short: "scan a repository's history (or a directory) for secrets",
		Long:  scanUsage,
		Args:  usageArgs(cobra.RangeArgs(0, 1)),
	}
	f := cmd.Flags()
	f.BoolVar(&noGit, "no-git", false, "scan PATH as a plain directory, not a git history")
	f.StringVar(&configPath, "config", "", "gitleaks TOML config (default: PATH/.gitleaks.toml if present, else gitleaks' default rules)")
	f.StringVar(&format, "report-format", "", "report format: json, sarif or table (default: json with --report-path, table otherwise)")
	f.StringVar(&reportPath, "report-path", "", "write the report to this file instead of stdout")
	f.IntVar(&exitCode, "exit-code", 1, "exit code when secrets are found (0 to 125)")
	f.IntVar(&workers, "workers", runtime.NumCPU(), "blobs scanned in parallel")
	config.Bytes(f, &maxSize, "max-blob-size", secretscan.DefaultMaxBlobSize, "skip (and count) blobs larger than this, such as 50MiB; 0 for no limit")
	f.StringVar(&ignorePath, "gitleaks-ignore-path", "", "a .gitleaksignore file (default: PATH/.gitleaksignore)")
	f.StringVar(&keyFile, "fingerprint-key-file", "", "file holding the HMAC key of the secrets' fingerprints (default: empty key)")
	f.BoolVar(&noProgress, "no-progress", false, "no progress bar even on a terminal")
	f.BoolVar(&skipBinary, "skip-binary", false, "skip (and count) blobs git calls binary, as gitleaks does; by default they are scanned too")
	f.StringVar(&rev, "rev", "", "scan only the history this git revision reaches (a branch, a tag, A..B); default every ref")
	f.IntVar(&decode, "max-decode-depth", 5, "decode base64/hex/percent/unicode-escaped text and rescan it up to this many times, as gitleaks does; 0 for none")

	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		path := "."
		if len(args) == 1 {
			path = args[0]
		}
		if exitCode < 0 || exitCode > 125 {
			return usageErrorf("--exit-code must be between 0 and 125")
		}
		if format == "" {
			format = "table"
			if reportPath != "" {
				format = "json"
			}
		}
		rf, err := report.ParseFormat(format)
		if err != nil {
			return usageErrorf("--report-format: %v", err)
		}
		if workers < 1 {
			return usageErrorf("--workers must be at least 1")
		}
		if strings.HasPrefix(rev, "-") || strings.ContainsAny(rev, "\x00\n") {
			return usageErrorf("--rev must be a git revision, not an option")
		}
		if rev != "" && noGit {
			return usageErrorf("--rev needs a git history, not --no-git")
		}

		// A scan's garbage is transient blob buffers and regexp state: a
		// tighter GC target keeps peak RSS near the live heap for little CPU
		// (docs/adr/0030-secret-scanning-engine.md, "Memory").
		defer debug.SetGCPercent(debug.SetGCPercent(50))
		start := time.Now()
		findings, rules, stats, err := scan(ctx, env, scanParams{
			path: path, noGit: noGit, config: configPath, workers: workers,
			maxSize: maxSize, ignore: ignorePath, keyFile: keyFile, decode: decode, skipBinary: skipBinary, rev: rev,
			progress: !noProgress && isTerminal(env.Stderr),
		})
		if err != nil {
			return scanError{err}
		}

		var out io.Writer = env.Stdout
		var file *os.File
		if reportPath != "" {
			if file, err = os.Create(reportPath); err != nil {
				return scanError{err}
			}
			out = file
		}
		werr := report.Write(out, rf, rules, findings)
		if file != nil {
			if cerr := file.Close(); werr == nil {
				werr = cerr
			}
		}
		if werr != nil {
			return scanError{werr}
		}
		elapsed := time.Since(start)
		fmt.Fprintf(env.Stderr, "scanned %d blobs (%d binary), %s in %.2fs (%.1f MiB/s); skipped %d binary, %d larger than %d bytes; %d findings\n",
			stats.BlobsScanned, stats.BinaryScanned, humanBytes(stats.BytesScanned), elapsed.Seconds(),
			float64(stats.BytesScanned)/(1<<20)/max(elapsed.Seconds(), 1e-9),
			stats.BinarySkipped, stats.LargeSkipped, maxSize, len(findings))
		if len(findings) == 0 || exitCode == 0 {
			return nil
		}
		return &exitError{code: exitCode, err: fmt.Errorf("%d %w", len(findings), errFindings)}
	}
	return cmd
}

type scanParams struct {
	path, config, ignore, keyFile string
	rev                           string // "" for every ref
	noGit, progress, skipBinary   bool
	workers, decode               int
	maxSize                       int64
}

func scan(ctx context.Context, env *Env, p scanParams) ([]secretscan.Finding, []*secretscan.Rule, secretscan.Stats, error) {
	var st secretscan.Stats
	cfg, err := loadScanConfig(p.path, p.config)
	if err != nil {
		return nil, nil, st, err
	}
	ignorePath := p.ignore
	if ignorePath == "" {
		ignorePath = filepath.Join(p.path, ".gitleaksignore")
	}
	ig, err := secretscan.LoadIgnore(ignorePath)
	if err != nil {
		return nil, nil, st, err
	}
	var key []byte
	if p.keyFile != "" {
		if key, err = os.ReadFile(p.keyFile); err != nil {
			return nil, nil, st, fmt.Errorf("fingerprint key: %w", err)
		}
	}
	maxSize := p.maxSize
	if maxSize == 0 {
		maxSize = -1
	}
	eng, err := secretscan.New(cfg, secretscan.Options{
		Workers: p.workers, MaxBlobSize: maxSize, FingerprintKey: key, Ignore: ig, MaxDecodeDepth: p.decode,
		SkipBinary: p.skipBinary,
	})
	if err != nil {
		return nil, nil, st, err
	}
	var progress secretscan.ProgressFunc
	if p.progress {
		bar := newBar(env.Stderr)
		defer bar.finish()
		progress = bar.update
	}
	if p.noGit {
		fs, st, err := eng.ScanDir(ctx, p.path, progress)
		return fs, cfg.Rules, st, err
	}
	// git runs through gitexec (no replace refs), but with the user's
	// own git configuration: this is their repository.
	repo := secretscan.Repo{Dir: p.path, Git: &gitexec.Runner{HostConfig: true}}
	var revs []string // nil: every ref
	if p.rev != "" {
		revs = []string{p.rev}
	}
	bs, err := eng.ScanRevs(ctx, repo, revs, progress)
	if err != nil {
		return nil, nil, st, err
	}
	defer bs.Close()
	fs, err := bs.Attribute(ctx, repo, revs)
	return fs, cfg.Rules, bs.Stats, err
}

// loadScanConfig picks the rules as gitleaks does: --config, else a
// .gitleaks.toml at the scanned root, else the default rules.
func loadScanConfig(root, path string) (*secretscan.Config, error) {
	if path != "" {
		return secretscan.LoadConfig(path)
	}
	p := filepath.Join(root, ".gitleaks.toml")
	if _, err := os.Stat(p); err == nil {
		cfg, err := secretscan.LoadConfig(p)
		if err != nil {
			return nil, err
		}
		cfg.Path = ".gitleaks.toml" // never report the config file itself
		return cfg, nil
	}
	return secretscan.DefaultConfig()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// bar draws blobs, bytes, rate and ETA on a terminal.
type bar struct {
	pb *progressbar.ProgressBar
	w  io.Writer
}

func newBar(w io.Writer) *bar { return &bar{w: w} }

func (b *bar) update(done, total secretscan.Stats) {
	if b.pb == nil {
		b.pb = progressbar.NewOptions64(max(total.Bytes, 1),
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionFullWidth(),
			progressbar.OptionClearOnFinish(),
		)
	}
	b.pb.Describe(fmt.Sprintf("blobs %d/%d", done.Blobs, total.Blobs))
	b.pb.Set64(done.Bytes)
}

func (b *bar) finish() {
	if b.pb != nil {
		b.pb.Finish()
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
