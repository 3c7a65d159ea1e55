package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
)

// The release build (make build, make dist) sets version.Version,
// Revision, Branch and BuildDate with -ldflags -X; a plain go build or go
// install leaves them empty and they come from the Go build info instead.
func init() {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	if version.Version == "" {
		version.Version = bi.Main.Version // "(devel)" for a build in a checkout
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && version.Revision == "":
			version.Revision = s.Value
		case s.Key == "vcs.time" && version.BuildDate == "":
			version.BuildDate = s.Value
		}
	}
}

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			orEmpty := func(s string) string {
				if s == "" {
					return "unknown"
				}
				return s
			}
			fmt.Fprintf(cmd.OutOrStdout(), "peakline %s\ncommit:     %s\nbranch:     %s\nbuild date: %s\ngo version: %s\nplatform:   %s/%s\n",
				orEmpty(version.Version), orEmpty(version.GetRevision()), orEmpty(version.Branch),
				orEmpty(version.BuildDate), version.GoVersion, runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
