//go:build !agentonly

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/apiv1"
)

// apiFlags are how a command reaches a broker's API. The token never comes
// from a flag (it would show in ps and shell history): GPUBROKER_TOKEN or
// --token-file.
type apiFlags struct {
	url       string
	tokenFile string
	timeout   time.Duration
}

func (f *apiFlags) register(cmd *cobra.Command) {
	def := os.Getenv("GPUBROKER_URL")
	if def == "" {
		def = "http://127.0.0.1:8080"
	}
	cmd.PersistentFlags().StringVar(&f.url, "broker", def, "broker URL (default from GPUBROKER_URL)")
	cmd.PersistentFlags().StringVar(&f.tokenFile, "token-file", "", "file holding an admin token (default: GPUBROKER_TOKEN)")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", 30*time.Second, "per-request timeout")
}

func (f *apiFlags) client() (*apiv1.Client, error) {
	if !strings.HasPrefix(f.url, "http://") && !strings.HasPrefix(f.url, "https://") {
		return nil, usageErr(fmt.Errorf("--broker %q: want an http:// or https:// URL", f.url))
	}
	if f.timeout <= 0 {
		return nil, usageErr(fmt.Errorf("--timeout %s: want a positive duration", f.timeout))
	}
	tok := os.Getenv("GPUBROKER_TOKEN")
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, usageErr(fmt.Errorf("--token-file: %w", err))
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok == "" {
		return nil, usageErr(errors.New("no admin token: set GPUBROKER_TOKEN or --token-file"))
	}
	return apiv1.NewClient(f.url, tok, &http.Client{Timeout: f.timeout}), nil
}

// apiErr turns an API error into an exit code: the broker refusing the
// request's content is a usage error, anything else a failure.
func apiErr(err error) error {
	switch apiv1.StatusOf(err) {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusConflict:
		return usageErr(err)
	}
	return failErr(err)
}

func newTokenCmd() *cobra.Command {
	var af apiFlags
	cmd := &cobra.Command{
		Use:   "token",
		Short: "List, create and revoke the broker's API tokens",
		Long: `Manage the broker's bearer tokens through its API (an admin token is needed).

Kinds: admin (every route), bootstrap (registers new instances only; goes into
cloud-init), registration (registers one instance, once, before it expires),
agent (issued by registration; listed and revoked here too).

Rotate the admin token without touching the database:
  gpubroker token create --kind admin --name ops-2027   # prints the new token once
  GPUBROKER_TOKEN=<new> gpubroker token revoke <old id>  # ids from "token list"
A revoked token stops working on the replica that revoked it at once and on
every other replica within 2 s (they poll the revocation log).`,
	}
	af.register(cmd)

	var kind, subject, output string
	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usageErr(fmt.Errorf("--output %q: want table or json", output))
			}
			c, err := af.client()
			if err != nil {
				return err
			}
			ts, err := c.ListTokens(cmd.Context(), apiv1.TokensQuery{Kind: kind, Subject: subject})
			if err != nil {
				return apiErr(err)
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(apiv1.List[apiv1.Token]{Items: ts})
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tSUBJECT\tCREATED\tEXPIRES")
			for _, t := range ts {
				exp := "never"
				if !t.ExpiresAt.IsZero() {
					exp = t.ExpiresAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Kind, t.Subject, t.CreatedAt.UTC().Format(time.RFC3339), exp)
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&kind, "kind", "", "only this kind: admin, bootstrap, registration or agent")
	list.Flags().StringVar(&subject, "subject", "", "only this name or instance id")
	list.Flags().StringVarP(&output, "output", "o", "table", "table or json")

	var in apiv1.TokenInput
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token; its secret is printed once, on stdout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ttl < 0 || ttl%time.Second != 0 {
				return usageErr(fmt.Errorf("--ttl %s: want a non-negative whole number of seconds (e.g. 1h)", ttl))
			}
			in.TTLSeconds = int64(ttl / time.Second)
			c, err := af.client()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), in)
			if err != nil {
				return apiErr(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), t.Secret)
			fmt.Fprintf(cmd.ErrOrStderr(), "created %s token %s for %s (shown only now; store it safely)\n", t.Kind, t.ID, t.Subject)
			return nil
		},
	}
	create.Flags().StringVar(&in.Kind, "kind", "", "admin, bootstrap or registration (required)")
	create.Flags().StringVar(&in.Name, "name", "", "name of an admin or bootstrap token")
	create.Flags().StringVar(&in.InstanceID, "instance", "", "instance id a registration token is bound to")
	create.Flags().DurationVar(&ttl, "ttl", 0, "expiry (registration tokens: default 1h; others: none)")
	_ = create.MarkFlagRequired("kind")

	revoke := &cobra.Command{
		Use:   "revoke ID...",
		Short: "Revoke tokens by the ids \"token list\" shows",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c, err := af.client()
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := c.RevokeToken(cmd.Context(), id); err != nil {
					return apiErr(fmt.Errorf("revoking %s: %w", id, err))
				}
				fmt.Fprintf(cmd.OutOrStdout(), "revoked %s\n", id)
			}
			return nil
		},
	}
	cmd.AddCommand(list, create, revoke)
	return cmd
}
