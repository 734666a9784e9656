//go:build agentonly

package main

import "github.com/spf13/cobra"

// addCommands registers only the agent: `go build -tags agentonly` builds a
// small gpubroker for GPU VMs that answers `gpubroker agent ...` exactly as
// the full binary does, without linking the cloud SDKs, database drivers and
// broker (docs/agent.md, "A slim build").
func addCommands(root *cobra.Command) {
	root.AddCommand(newAgentCmd())
}
