//go:build !agentonly

package main

import "github.com/spf13/cobra"

// addCommands registers every subcommand. A build with -tags agentonly
// registers only the agent (commands_agent.go), which keeps the cloud SDKs,
// the database drivers and the HTTP server out of the in-VM binary.
func addCommands(root *cobra.Command) {
	root.AddCommand(
		newPricesCmd(),
		newPolicyCmd(),
		newSimulateCmd(),
		newCatalogCmd(cloudSources()),
		newServeCmd(cloudSources()),
		newAgentCmd(),
		newPlanCmd(),
		newTokenCmd(),
		newFleetCmd(),
		newReportCmd(),
	)
}
