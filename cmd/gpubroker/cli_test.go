//go:build !agentonly

package main

import (
	"bytes"
	"context"
	"os"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestVersionString(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got := versionString(info, true); !strings.HasPrefix(got, "v1.2.3 (0123456789ab+dirty, 2026-12-01T10:00:00Z), go") {
		t.Errorf("versionString = %q", got)
	}
	if got := versionString(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true); !strings.HasPrefix(got, "devel (revision unknown)") {
		t.Errorf("versionString = %q", got)
	}
	if got := versionString(nil, false); !strings.Contains(got, "unknown") {
		t.Errorf("versionString = %q", got)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != exitOK || !strings.HasPrefix(out.String(), "gpubroker ") {
			t.Errorf("%v: exit %d, %q %q", args, code, out.String(), errOut.String())
		}
	}
}

func TestEnvFlags(t *testing.T) {
	env := map[string]string{"GPUBROKER_OUTPUT": "json", "GPUBROKER_LIMIT_UNUSED": "x", "GPUBROKER_CLOUD": "aws,gcp"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cmd := newPricesCmd()
	if err := cmd.ParseFlags([]string{"--cloud", "azure"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(cmd, lookup); err != nil {
		t.Fatal(err)
	}
	if o, _ := cmd.Flags().GetString("output"); o != "json" {
		t.Errorf("--output from GPUBROKER_OUTPUT = %q", o)
	}
	if c, _ := cmd.Flags().GetStringSlice("cloud"); len(c) != 1 || c[0] != "azure" {
		t.Errorf("the command line must win over GPUBROKER_CLOUD: %v", c)
	}
	env["GPUBROKER_OUTPUT"] = ""
	env["GPUBROKER_DB"] = "/no/such.db"
	var out, errOut bytes.Buffer
	t.Setenv("GPUBROKER_DB", "/no/such.db")
	if code := run(context.Background(), []string{"prices"}, &out, &errOut); code != exitUsageError || !strings.Contains(errOut.String(), "no such database") {
		t.Errorf("GPUBROKER_DB not applied: exit %d %q", code, errOut.String())
	}
}

// TestEnvTableDocumented: every variable of envFlags is in docs/cli.md.
func TestEnvTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range envFlags {
		if !strings.Contains(string(doc), "`"+e.Var+"`") {
			t.Errorf("docs/cli.md does not list %s", e.Var)
		}
	}
}

func TestCompletionValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "prices", "--gpu", ""}, "MI300X"},
		{[]string{"__complete", "prices", "--cloud", "aws,"}, "aws,azure"},
		{[]string{"__complete", "prices", "--output", ""}, "csv"},
		{[]string{"__complete", "catalog", "refresh", "--policy", ""}, "yaml"},
		{[]string{"__complete", "completion", ""}, "bash"},
	} {
		var out, errOut bytes.Buffer
		run(context.Background(), tc.args, &out, &errOut)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: got %q, want %q", tc.args, out.String(), tc.want)
		}
	}
	var _ = cobra.ShellCompDirectiveNoFileComp
}
