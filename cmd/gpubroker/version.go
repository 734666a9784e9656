package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionString describes this build: the module version, and the VCS
// revision, time and a "+dirty" mark when the binary was built from a
// checkout (go build records them; `go run` and test binaries do not).
func versionString(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "unknown (no build information)"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, at, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " (" + rev + dirty
		if at != "" {
			v += ", " + at
		}
		v += ")"
	} else {
		v += " (revision unknown)"
	}
	return v + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}

func versionLine() string { return versionString(debug.ReadBuildInfo()) }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the gpubroker version and the VCS revision it was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "gpubroker", versionLine())
			return err
		},
	}
}
