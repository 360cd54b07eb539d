package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// newVersionCmd returns "ghost version", which prints the build's module
// version, VCS commit and Go version, as recorded in the binary.
func newVersionCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print ghost's version, commit and Go version",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			v := versionOf(buildInfo())
			fmt.Fprintf(env.Stdout, "version: %s\ncommit: %s\ngo: %s\n", v.version, v.commit, v.goVersion)
			return nil
		},
	}
}

// buildInfo is the binary's build information, nil when it has none.
func buildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

// buildVersion is what "ghost version" prints.
type buildVersion struct {
	version, commit, goVersion string
}

// versionOf reads bi, which is nil when the binary has no build info.
// What is missing reads "unknown"; a commit built with local changes ends
// in "+dirty".
func versionOf(bi *debug.BuildInfo) buildVersion {
	v := buildVersion{version: "unknown", commit: "unknown", goVersion: runtime.Version()}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.goVersion = bi.GoVersion
	}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && v.commit != "unknown" {
		v.commit += "+dirty"
	}
	return v
}
