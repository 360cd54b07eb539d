package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/gc"
)

// minGrace is the smallest --grace accepted. A push may take up to 15
// minutes between allocating its entry's ULID and its commit point
// (docs/design.md §4.1), and node clocks differ; a grace below an hour
// would let GC delete the entry of a push still in flight
// (docs/adr/0040-garbage-collection.md).
const minGrace = time.Hour

// newGCCmd returns "ghost gc", which runs garbage collection on the
// object store:
//
//	ghost gc [--dry-run] [--grace 24h] [--retention 168h] [--concurrency 8]
//
// It works on the store directly, like the other admin commands, and is
// safe to run while servers serve and while another gc runs.
func newGCCmd(env *Env) *cobra.Command {
	var o gcOptions
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "delete unreferenced objects from the object store",
		Args:  exactArgs(0),
	}
	a := newAdmin(env, cmd)
	f := cmd.Flags()
	f.BoolVar(&o.dry, "dry-run", false, "list what would be deleted and how many bytes; change nothing")
	config.DurationVar(f, &o.grace, "grace", "GHOST_GC_GRACE", gc.DefaultGrace, "delete unreferenced entries only when their ULID time is older than this (at least 1h)")
	config.DurationVar(f, &o.retention, "retention", "GHOST_GC_RETENTION", gc.DefaultRetention, "keep what is left under a deleted repository's log this long after gc first sees it")
	config.IntVar(f, &o.conc, "concurrency", "GHOST_GC_CONCURRENCY", gc.DefaultConcurrency, "deletes in flight at once")
	var nice int
	registerNice(f, &nice)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := lowerProcess(env, nice); err != nil {
			return err
		}
		if o.grace < minGrace {
			return usageErrorf("--grace %s is below %s, which in-flight pushes need", config.FormatDuration(o.grace), config.FormatDuration(minGrace))
		}
		if o.retention <= 0 || o.conc <= 0 {
			return usageErrorf("--retention and --concurrency must be positive")
		}
		// gc names its store on stdout before it starts, so no note after.
		return a.runE(false, func(ctx context.Context, s stores, _ []string) error {
			return runGC(ctx, env, s, a.cfg, o)
		})(cmd, nil)
	}
	return cmd
}

// gcOptions are the flags of "ghost gc" but the store's.
type gcOptions struct {
	dry              bool
	grace, retention time.Duration
	conc             int
}

func runGC(ctx context.Context, env *Env, s stores, cfg config.Config, o gcOptions) error {
	dry, grace, retention, conc := o.dry, o.grace, o.retention, o.conc
	mode := ""
	if dry {
		mode = " (dry run: nothing is deleted)"
	}
	fmt.Fprintf(env.Stdout, "ghost gc: store %s%s\n", describeStore(cfg), mode)
	verb := "deleted"
	if dry {
		verb = "would delete"
	}
	col := gc.New(s.objects, gc.Options{
		Grace:       grace,
		Retention:   retention,
		DryRun:      dry,
		Concurrency: conc,
		Live:        gc.MetaLive(s.objects, s.meta),
		Owners:      gc.MetaOwners(s.objects, s.meta),
		OnObject: func(o gc.Object) {
			fmt.Fprintf(env.Stdout, "%s %s %d bytes (%s)\n", verb, o.Key, o.Size, o.Reason)
		},
		OnOrphanLog: func(repo string) {
			if dry {
				fmt.Fprintf(env.Stdout, "would tombstone orphan log %s (no repository name points at it)\n", repo)
			} else {
				fmt.Fprintf(env.Stdout, "tombstoning orphan log %s (no repository name points at it)\n", repo)
			}
		},
	})
	rep, err := col.Run(ctx)
	// Git LFS objects no live repository references, references of
	// deleted repositories, upload temporaries (docs/adr/0129-lfs-gc.md).
	lrep, lerr := col.RunLFS(ctx)
	rep.Objects += lrep.Objects + lrep.Refs + lrep.Temps
	rep.Bytes += lrep.Bytes
	rep.Kept += lrep.Kept
	err = errors.Join(err, lerr)
	if cfg.S3.Bucket == "" {
		// The filesystem store's interrupted writes (docs/adr/0040).
		n, size, terr := gc.SweepTemps(filepath.Join(cfg.DataDir, "objects", "tmp"), grace, time.Now(), dry,
			func(path string, size int64) { fmt.Fprintf(env.Stdout, "%s temporary %s %d bytes\n", verb, path, size) })
		rep.Objects += n
		rep.Bytes += size
		err = errors.Join(err, terr)
	}
	if rep.NamesUnknown {
		fmt.Fprintln(env.Stdout, "note: the store holds no repository names, so no log was taken for an orphan")
	}
	fmt.Fprintf(env.Stdout, "%s %d objects, %d bytes; %d orphan logs; %d logs listed; kept %d unreferenced objects within grace or retention",
		verb, rep.Objects, rep.Bytes, rep.OrphanLogs, rep.Logs, rep.Kept)
	fmt.Fprintln(env.Stdout)
	return err
}

// describeStore names the object store the settings select, so an
// operator sees which data a destructive command is about to act on.
func describeStore(c config.Config) string {
	if c.S3.Bucket != "" {
		s := "s3://" + c.S3.Bucket + "/" + c.S3.Prefix
		if c.S3.Endpoint != "" {
			s += " at " + c.S3.Endpoint
		}
		return s
	}
	return "filesystem " + filepath.Join(c.DataDir, "objects")
}
