package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// envFlag ties one environment variable to the flags it sets. A flag given
// on the command line wins over the variable; the variable wins over the
// flag's default. docs/cli.md lists the same table; TestEnvTableDocumented
// keeps the two in step.
type envFlag struct {
	Var   string
	Flags []string
	Means string
}

// envFlags are the environment variables for the common flags. The agent
// reads GPUBROKER_AGENT_<FLAG> for each of its flags (docs/agent.md).
var envFlags = []envFlag{
	{"GPUBROKER_DB", []string{"db"}, "store: a SQLite path, sqlite://PATH or postgres://..."},
	{"GPUBROKER_ENDPOINT", []string{"endpoint", "broker"}, "broker base URL for commands that talk to a running broker (report --endpoint, token --broker)"},
	{"GPUBROKER_TOKEN", []string{"token"}, "the broker's admin token for report --endpoint (token reads it directly)"},
	{"GPUBROKER_POLICY", []string{"file", "policy"}, "policy file for plan, policy check, serve and catalog refresh (-f)"},
	{"GPUBROKER_OUTPUT", []string{"output"}, "output format: table, json or csv where offered (-o)"},
	{"GPUBROKER_CLOUD", []string{"cloud"}, "clouds (comma-separated) for prices and catalog refresh"},
	{"GPUBROKER_REGION", []string{"region"}, "region globs (comma-separated) for prices and catalog refresh"},
	{"GPUBROKER_GPU", []string{"gpu"}, "GPU models (comma-separated) for prices and catalog refresh"},
	{"GPUBROKER_CONFIG", []string{"config"}, "broker config file for serve"},
	{"GPUBROKER_LOG_LEVEL", []string{"log-level"}, "log level: debug, info, warn or error"},
}

// applyEnv sets the flags of cmd that were not given on the command line
// from their environment variables. lookup is os.LookupEnv outside tests.
func applyEnv(cmd *cobra.Command, lookup func(string) (string, bool)) error {
	if cmd.Name() == "agent" || (cmd.Parent() != nil && cmd.Parent().Name() == "agent") {
		return nil // the agent has its own GPUBROKER_AGENT_* variables
	}
	for _, e := range envFlags {
		v, ok := lookup(e.Var)
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		for _, name := range e.Flags {
			fl := cmd.Flags().Lookup(name)
			if fl == nil || fl.Changed {
				continue
			}
			if err := cmd.Flags().Set(name, strings.TrimSpace(v)); err != nil {
				return fmt.Errorf("%s=%q (for --%s): %w", e.Var, v, name, err)
			}
		}
	}
	return nil
}

func applyOSEnv(cmd *cobra.Command, _ []string) error {
	if err := applyEnv(cmd, os.LookupEnv); err != nil {
		return usageErr(err)
	}
	return nil
}
