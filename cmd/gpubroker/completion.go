package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/pricing"
)

// registerCompletions gives shell completion (`gpubroker completion bash`,
// zsh, fish, powershell: cobra's own command) the values of the common
// flags on every command that has them: --gpu (the canonical models),
// --cloud, --output (what that command accepts, read from its help text)
// and --policy / -f (YAML files).
func registerCompletions(root *cobra.Command) {
	var gpus []string
	for _, m := range pricing.GPUModels() {
		gpus = append(gpus, string(m))
	}
	var clouds []string
	for _, c := range pricing.Clouds() {
		clouds = append(clouds, string(c))
	}
	fixed := func(vals []string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
			// Comma-separated lists complete their last element.
			head := ""
			if i := strings.LastIndexByte(prefix, ','); i >= 0 {
				head = prefix[:i+1]
			}
			var out []string
			for _, v := range vals {
				out = append(out, head+v)
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		}
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if fl := c.Flags().Lookup("gpu"); fl != nil {
			_ = c.RegisterFlagCompletionFunc("gpu", fixed(gpus))
		}
		if fl := c.Flags().Lookup("cloud"); fl != nil {
			_ = c.RegisterFlagCompletionFunc("cloud", fixed(clouds))
		}
		if fl := c.Flags().Lookup("output"); fl != nil {
			_ = c.RegisterFlagCompletionFunc("output", fixed(outputFormats(fl.Usage)))
		}
		for _, name := range []string{"policy", "file"} {
			if fl := c.Flags().Lookup(name); fl != nil && strings.Contains(fl.Usage, "policy") {
				_ = c.MarkFlagFilename(name, "yaml", "yml")
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// outputFormats reads the formats a command's --output accepts from its
// usage line ("output format: table, json or csv").
func outputFormats(usage string) []string {
	var out []string
	for _, f := range []string{"table", "json", "csv", "text", "svg", "png"} {
		if strings.Contains(usage, f) {
			out = append(out, f)
		}
	}
	return out
}
