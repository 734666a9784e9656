//go:build !agentonly

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/store"
)

type fleetOptions struct {
	broker    string
	tokenFile string
	output    string
	timeout   time.Duration
}

func newFleetCmd() *cobra.Command {
	var o fleetOptions
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Show and steer the broker's fleet: status, diff, pause, resume",
		Long: `Talk to a running broker (gpubroker serve) about the instances it manages.
The broker address comes from --broker or $GPUBROKER_URL, the admin token from
--token-file or $GPUBROKER_TOKEN. See docs/fleet.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.broker, "broker", "", "broker base URL (default $GPUBROKER_URL, else http://127.0.0.1:8080)")
	pf.StringVar(&o.tokenFile, "token-file", "", "file holding an admin token (default $GPUBROKER_TOKEN)")
	pf.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	pf.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the broker")
	cmd.AddCommand(
		&cobra.Command{Use: "status", Short: "Slots and instances by workload: cloud, zone, type, capacity, state, age, $/h, agent health",
			Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error { return o.status(cmd) }},
		&cobra.Command{Use: "diff", Short: "What the next reconcile pass would do (like terraform plan); changes nothing",
			Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error { return o.diff(cmd) }},
		&cobra.Command{Use: "pause", Short: "Kill switch: stop launching and terminating until resume",
			Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error { return o.pause(cmd, true) }},
		&cobra.Command{Use: "resume", Short: "Turn the kill switch off",
			Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error { return o.pause(cmd, false) }},
	)
	return cmd
}

func (o *fleetOptions) check() error {
	if o.output != "table" && o.output != "json" {
		return usageErr(fmt.Errorf("--output %q: want table or json", o.output))
	}
	return nil
}

// call sends one request to the broker and decodes its JSON answer into v
// (raw receives the body as sent, for --output json).
func (o *fleetOptions) call(ctx context.Context, method, path string, v any) ([]byte, error) {
	base := o.broker
	if base == "" {
		base = os.Getenv("GPUBROKER_URL")
	}
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	token := os.Getenv("GPUBROKER_TOKEN")
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return nil, usageErr(fmt.Errorf("--token-file: %w", err))
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return nil, usageErr(errors.New("no admin token: set --token-file or $GPUBROKER_TOKEN (gpubroker serve prints one on first start)"))
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--broker %q: %w", base, err))
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, failErr(fmt.Errorf("reaching the broker at %s: %w", base, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, failErr(fmt.Errorf("reading the broker's answer: %w", err))
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return nil, failErr(fmt.Errorf("broker answered %d: %s", resp.StatusCode, msg))
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return nil, failErr(fmt.Errorf("decoding the broker's answer: %w", err))
		}
	}
	return body, nil
}

func writeRaw(w io.Writer, body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (o *fleetOptions) status(cmd *cobra.Command) error {
	if err := o.check(); err != nil {
		return err
	}
	var st fleet.Status
	body, err := o.call(cmd.Context(), http.MethodGet, "/api/v1/fleet", &st)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeRaw(cmd.OutOrStdout(), body)
	}
	return renderFleetStatus(cmd.OutOrStdout(), st)
}

func renderFleetStatus(w io.Writer, st fleet.Status) error {
	mode := string(st.Mode)
	if st.Paused {
		mode += ", PAUSED"
		if st.PausedBy != "" {
			mode += " by " + st.PausedBy
		}
	}
	fmt.Fprintf(w, "Fleet (%s): %d slots", mode, len(st.Slots))
	for _, s := range fleet.States {
		if n := st.ByState[s]; n > 0 {
			fmt.Fprintf(w, ", %d %s", n, s)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tSLOT\tCLOUD\tZONE\tINSTANCE TYPE\tCAPACITY\tSTATE\tAGE\t$/H\tAGENT\tINSTANCE")
	for _, s := range st.Slots {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.4f\t%s\t%s\n", s.Workload, s.ID, s.Cloud, dash(s.Zone), s.InstanceType, s.Capacity,
			s.State, age(s.AgeSeconds), s.PricePerHour, s.Agent, dash(s.InstanceID))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Orphans) > 0 {
		fmt.Fprintf(w, "\nOrphans (broker-tagged, no slot; terminated after the grace period):\n")
		for _, in := range st.Orphans {
			fmt.Fprintf(w, "  %s %s/%s %s since %s\n", in.ID, in.Cloud, in.Zone, in.InstanceType, in.OrphanSince.Format(time.RFC3339))
		}
	}
	if len(st.Blocked) > 0 {
		fmt.Fprintf(w, "\nBlocked pools (unavailable-offerings cache):\n")
		for _, b := range st.Blocked {
			fmt.Fprintf(w, "  %s/%s %s %s until %s: %s\n", b.Pool.Cloud, b.Pool.Zone, b.Pool.InstanceType, b.Pool.Capacity, b.Until.Format(time.RFC3339), b.Reason)
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func age(sec float64) string {
	d := time.Duration(sec * float64(time.Second))
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func (o *fleetOptions) diff(cmd *cobra.Command) error {
	if err := o.check(); err != nil {
		return err
	}
	var rep fleet.Report
	body, err := o.call(cmd.Context(), http.MethodGet, "/api/v1/fleet/diff", &rep)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeRaw(cmd.OutOrStdout(), body)
	}
	return renderFleetDiff(cmd.OutOrStdout(), rep)
}

// renderFleetDiff prints a pass's actions the way terraform plan does.
func renderFleetDiff(w io.Writer, rep fleet.Report) error {
	mode := string(rep.Mode)
	if rep.Paused {
		mode += ", paused: nothing would be carried out"
	}
	fmt.Fprintf(w, "Next reconcile pass (%s), %d slots, %d instances listed:\n\n", mode, rep.Slots, rep.Instances)
	counts := map[string]int{}
	for _, a := range rep.Actions {
		sign := map[string]string{"launch": "+", "retry": "+", "terminate": "-", "adopt": "~", "block": "!", "orphan": "?", "wait": "."}[a.Kind]
		if sign == "" {
			sign = " "
		}
		counts[a.Kind]++
		what := strings.TrimSpace(a.Slot + " " + a.Instance)
		where := ""
		if a.Zone != "" {
			where = fmt.Sprintf(" in %s/%s %s %s", a.Cloud, a.Zone, a.InstanceType, a.Capacity)
		}
		fmt.Fprintf(w, "  %s %s %s%s", sign, a.Kind, what, where)
		if a.Reason != "" {
			fmt.Fprintf(w, " (%s)", a.Reason)
		}
		fmt.Fprintln(w)
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "  ! %s\n", e)
	}
	if len(rep.Actions) == 0 {
		fmt.Fprintln(w, "  No changes. The fleet matches the plan.")
	}
	fmt.Fprintf(w, "\nPlan: %d to launch, %d to terminate, %d to adopt, %d waiting.\n",
		counts["launch"]+counts["retry"], counts["terminate"], counts["adopt"], counts["wait"])
	return nil
}

func (o *fleetOptions) pause(cmd *cobra.Command, paused bool) error {
	if err := o.check(); err != nil {
		return err
	}
	path := "/api/v1/fleet/resume"
	if paused {
		path = "/api/v1/fleet/pause"
	}
	var p store.FleetPause
	body, err := o.call(cmd.Context(), http.MethodPost, path, &p)
	if err != nil {
		return err
	}
	if o.output == "json" {
		return writeRaw(cmd.OutOrStdout(), body)
	}
	if p.Paused {
		fmt.Fprintf(cmd.OutOrStdout(), "Fleet paused (by %s at %s): nothing is launched or terminated until `gpubroker fleet resume`.\n", p.By, p.At.Format(time.RFC3339))
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "Fleet resumed (by %s at %s).\n", p.By, p.At.Format(time.RFC3339))
	}
	return nil
}
