//go:build !agentonly

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestServeConfigErrors(t *testing.T) {
	reg, _ := fakeClouds(t, 1)
	dir := t.TempDir()
	bad := filepath.Join(dir, "serve.yaml")
	_ = os.WriteFile(bad, []byte("refresh:\n  schedule: \"0 */6 * *\"\n"), 0o600)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--config", bad}, bad + `:2:13: refresh.schedule: "0 */6 * *" is not a cron schedule`},
		{[]string{"--refresh-schedule", "hourly"}, `--refresh-schedule: "hourly" is not a cron schedule`},
		{[]string{"--cloud", "ibm"}, `unknown cloud "ibm"`},
		{[]string{"--log-format", "xml"}, "want text or json"},
		{[]string{"--config", filepath.Join(dir, "none.yaml")}, "no such file"},
		{[]string{"--lease-ttl", "-5s"}, "--lease-ttl -5s: want a duration from 1s to 10m0s"},
		{[]string{"--lease-ttl", "0s"}, "--lease-ttl 0s: want a duration from 1s to 10m0s"},
		{[]string{"--lease-ttl", "2h"}, "--lease-ttl 2h0m0s: want a duration from 1s to 10m0s"},
		{[]string{"--lease-ttl", "soon"}, `invalid argument "soon" for "--lease-ttl"`},
		{[]string{"--catalog-reload", "100ms"}, "--catalog-reload 100ms: want a duration from 1s to 1h0m0s"},
		{[]string{"--shutdown-grace", "-1s"}, "--shutdown-grace -1s"},
		{[]string{"--replan-schedule", "often"}, `--replan-schedule: "often" is not a cron schedule`},
		{[]string{"--require-identity"}, "--require-identity needs --aws-identity-certs"},
		{[]string{"--aws-identity-certs", bad}, "no PEM certificate found"},
		{[]string{"--aws-identity-certs", filepath.Join(dir, "none.pem")}, "--aws-identity-certs: open"},
	}
	for _, c := range cases {
		_, errOut, code := execute(t, newServeCmd(reg), append([]string{"serve"}, c.args...)...)
		if code != exitUsageError || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

func TestServeRefreshesAndStops(t *testing.T) {
	reg, aws := fakeClouds(t, 1)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "serve.yaml")
	_ = os.WriteFile(cfgPath, []byte("refresh:\n  schedule: \"@every 1h\"\n  clouds: [aws]\n  regions: [us-east-1]\n"), 0o600)
	db := filepath.Join(dir, "g.db")
	var errb bytes.Buffer
	root := &cobra.Command{Use: "gpubroker", SilenceErrors: true, SilenceUsage: true}
	root.AddCommand(newServeCmd(reg))
	root.SetArgs([]string{"serve", "--config", cfgPath, "--db", db, "--log-format", "json", "--listen", "127.0.0.1:0"})
	root.SetErr(&errb)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for aws.Calls() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"msg":"broker started"`, `"refresh_schedule":"@every 1h"`, `"msg":"refresh finished","refreshed":1`, `"msg":"broker stopped"`} {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("logs lack %s:\n%s", s, errb.String())
		}
	}
	out, _, _ := execute(t, newPricesCmd(), "prices", "--db", db, "--cloud", "aws", "--region", "us-east-1", "--gpu", "H100")
	if !strings.Contains(out, "p5.48xlarge") || !strings.Contains(out, "Catalog: store "+db) {
		t.Errorf("prices after serve refreshed:\n%s", out)
	}
}

func TestServeBadPolicyExits2(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"serve", "--db", filepath.Join(t.TempDir(), "s.db"), "-f", "../../policy/testdata/keys.bad.yaml"}, &out, &errOut)
	if code != exitUsageError || !strings.Contains(errOut.String(), "keys.bad.yaml:") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
	if code := run(t.Context(), []string{"serve", "-f", "-"}, &out, &errOut); code != exitUsageError {
		t.Errorf("serve -f -: exit %d", code)
	}
}
