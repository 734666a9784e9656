//go:build !agentonly

package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/policy"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with policy files",
	}
	cmd.AddCommand(newPolicyCheckCmd())
	return cmd
}

func newPolicyCheckCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "check -f FILE",
		Short: "Validate a policy file without planning",
		Long: `Parse and validate a policy file. On success print a summary and exit 0;
otherwise print every problem, one per line as file:line:col: message, and exit 2.`,
		Example: "  gpubroker policy check -f examples/fleet.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErr(errors.New("policy check: -f FILE is required"))
			}
			p, err := loadPolicy(cmd.InOrStdin(), file)
			if err != nil {
				var list policy.ErrorList
				if errors.As(err, &list) {
					for _, e := range list {
						fmt.Fprintln(cmd.ErrOrStderr(), e)
					}
					return usageErr(fmt.Errorf("%s: %d error(s)", file, len(list)))
				}
				return usageErr(err)
			}
			return writePolicySummary(cmd.OutOrStdout(), p)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "policy file (YAML); - reads standard input")
	return cmd
}

// writePolicySummary prints one paragraph describing a valid policy.
func writePolicySummary(w io.Writer, p *policy.Policy) error {
	_, err := fmt.Fprintf(w, "%s: OK. %s\n", p.File, policy.Summary(p))
	return err
}
