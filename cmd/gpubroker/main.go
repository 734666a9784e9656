// Command gpubroker is the multi-cloud GPU cost broker: it lists GPU prices,
// plans placements, simulates spot policies, runs the broker daemon and the
// in-VM agent. This package only wires flags to the packages that do the work.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes shared by every subcommand.
const (
	exitOK         = 0
	exitFailure    = 1 // the job could not be done (e.g. no feasible plan)
	exitUsageError = 2 // bad flags or bad input files
)

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as the user's input being wrong (exit code 2).
func usageErr(err error) error { return &exitError{code: exitUsageError, err: err} }

// failErr marks err as the job failing (exit code 1).
func failErr(err error) error { return &exitError{code: exitFailure, err: err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI and returns the process exit code; tests call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "gpubroker:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// Flag parsing and unknown commands are usage errors.
	return exitUsageError
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "gpubroker",
		Short:         "Multi-cloud GPU cost broker and autoscaler",
		Long:          "gpubroker places GPU training jobs and inference services on the cheapest capacity across AWS, GCP and Azure that still meets their deadlines, quotas and budgets.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(),
		// Environment variables for the common flags (env.go).
		PersistentPreRunE: applyOSEnv,
	}
	root.SetVersionTemplate("gpubroker {{.Version}}\n")
	addCommands(root)
	root.AddCommand(newVersionCmd())
	registerCompletions(root)
	return root
}
