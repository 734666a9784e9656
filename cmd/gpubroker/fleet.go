//go:build !agentonly

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/fleet"
)

type fleetOptions struct {
	api    apiFlags
	output string
}

func newFleetCmd() *cobra.Command {
	var o fleetOptions
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Show and steer the broker's fleet: status, diff, pause, resume, replace",
		Long: `Talk to a running broker (gpubroker serve) about the instances it manages.
The broker address comes from --broker or $GPUBROKER_URL, the admin token from
--token-file or $GPUBROKER_TOKEN. See docs/fleet.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.api.register(cmd)
	cmd.PersistentFlags().StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	cmd.AddCommand(
		&cobra.Command{Use: "status", Short: "Slots and instances by workload: cloud, zone, type, capacity, state, age, $/h, agent health",
			Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error { return o.status(cmd) }},
		&cobra.Command{Use: "diff", Short: "What the next reconcile pass would do (like terraform plan); changes nothing",
			Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error { return o.diff(cmd) }},
		&cobra.Command{Use: "pause", Short: "Kill switch: stop launching and terminating until resume",
			Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error { return o.pause(cmd, true) }},
		&cobra.Command{Use: "resume", Short: "Turn the kill switch off",
			Args: cobra.NoArgs, RunE: func(cmd *cobra.Command, _ []string) error { return o.pause(cmd, false) }},
		o.replaceCmd(),
	)
	return cmd
}

func (o *fleetOptions) replaceCmd() *cobra.Command {
	var reason string
	cmd := &cobra.Command{Use: "replace INSTANCE", Short: "Replace one of the fleet's instances (a slow host): a new one is launched for its slot, then it is terminated",
		Long: `Ask the broker's leader to replace an instance of the fleet (the INSTANCE column of
gpubroker fleet status), for example one flagged slow_host by its benchmark. The next
reconcile pass that acts (not in dry-run, not while paused) launches a replacement for
its slot in the plan's pool and terminates it. See docs/fleet.md, "Replacing a host".`,
		Args: cobra.ExactArgs(1), RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			q, err := c.ReplaceFleetInstance(cmd.Context(), args[0], reason)
			if err != nil {
				return apiErr(err)
			}
			if o.output == "json" {
				return writeJSONOut(cmd.OutOrStdout(), q)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Replacement of %s requested (by %s at %s): the leader's next acting pass launches its replacement and terminates it.\n",
				q.Instance, q.By, q.At.Format(time.RFC3339))
			return nil
		}}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded in the fleet's events; at most 500 characters)")
	return cmd
}

func (o *fleetOptions) client() (*apiv1.Client, error) {
	if o.output != "table" && o.output != "json" {
		return nil, usageErr(fmt.Errorf("--output %q: want table or json", o.output))
	}
	return o.api.client()
}

func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (o *fleetOptions) status(cmd *cobra.Command) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	st, err := c.FleetStatus(cmd.Context())
	if err != nil {
		return apiErr(err)
	}
	if o.output == "json" {
		return writeJSONOut(cmd.OutOrStdout(), st)
	}
	return renderFleetStatus(cmd.OutOrStdout(), st)
}

func renderFleetStatus(w io.Writer, st apiv1.FleetStatus) error {
	mode := st.Mode
	if st.Paused {
		mode += ", PAUSED"
		if st.PausedBy != "" {
			mode += " by " + st.PausedBy
		}
	}
	fmt.Fprintf(w, "Fleet (%s): %d slots", mode, len(st.Slots))
	for _, s := range fleet.States {
		if n := st.ByState[string(s)]; n > 0 {
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
	if err := renderDecisions(w, st); err != nil {
		return err
	}
	if len(st.Orphans) > 0 {
		fmt.Fprintf(w, "\nOrphans (broker-tagged, no slot; terminated after the grace period):\n")
		for _, in := range st.Orphans {
			fmt.Fprintf(w, "  %s %s/%s %s since %s\n", in.ID, in.Cloud, in.Zone, in.InstanceType, in.OrphanSince.Format(time.RFC3339))
		}
	}
	if len(st.Replacing) > 0 {
		fmt.Fprintf(w, "\nReplacements requested (the leader's next acting pass replaces them):\n")
		for _, q := range st.Replacing {
			fmt.Fprintf(w, "  %s by %s at %s: %s\n", q.Instance, q.By, q.At.Format(time.RFC3339), q.Reason)
		}
	}
	if len(st.Blocked) > 0 {
		fmt.Fprintf(w, "\nBlocked pools (unavailable-offerings cache):\n")
		for _, b := range st.Blocked {
			fmt.Fprintf(w, "  %s/%s %s %s until %s: %s\n", b.Cloud, b.Zone, b.InstanceType, b.Capacity, b.Until.Format(time.RFC3339), b.Reason)
		}
	}
	if len(st.Limited) > 0 {
		fmt.Fprintf(w, "\nPools seen to hold fewer instances than a job asked for (no larger job is planned there):\n")
		for _, l := range st.Limited {
			fmt.Fprintf(w, "  %s/%s %s %s: at most %d until %s\n", l.Cloud, l.Zone, l.InstanceType, l.Capacity, l.Instances, l.Until.Format(time.RFC3339))
		}
	}
	return nil
}

// renderDecisions prints the live spot policies' latest decisions, which
// only the leader has.
func renderDecisions(w io.Writer, st apiv1.FleetStatus) error {
	switch {
	case st.DecisionsFrom == "":
		return nil // a broker from before decisions were served
	case st.DecisionsFrom != apiv1.DecisionsFromLeader:
		fmt.Fprintf(w, "\nLive spot decisions: %s (they live in the leader's memory; ask the leader).\n", st.DecisionsFrom)
		return nil
	case len(st.Decisions) == 0:
		fmt.Fprintln(w, "\nLive spot decisions: none yet (no deadline job or hedged service decided since this leader started).")
		return nil
	}
	fmt.Fprintln(w, "\nLive spot decisions (leader):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tSTAGE\tPOLICY\tACTION\tDONE\tTIME LEFT\tDECIDED\tREASON")
	for _, d := range st.Decisions {
		done, left := "-", "-"
		if p := d.Progress; p != nil {
			how := "est."
			if p.Reported {
				how = "reported"
			}
			done = fmt.Sprintf("%.0f%% %s", 100*p.Done, how)
			left = age(p.TimeLeftSeconds)
			if p.TimeLeftSeconds < 0 {
				left = "overdue " + age(-p.TimeLeftSeconds)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s ago\t%s\n", d.Workload, d.Stage, d.Policy, d.Action, done, left,
			age(max(0, st.At.Sub(d.At).Seconds())), dash(d.Reason))
	}
	return tw.Flush()
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
	c, err := o.client()
	if err != nil {
		return err
	}
	rep, err := c.FleetDiff(cmd.Context())
	if err != nil {
		return apiErr(err)
	}
	if o.output == "json" {
		return writeJSONOut(cmd.OutOrStdout(), rep)
	}
	return renderFleetDiff(cmd.OutOrStdout(), rep)
}

// renderFleetDiff prints a pass's actions the way terraform plan does.
func renderFleetDiff(w io.Writer, rep apiv1.FleetReport) error {
	mode := rep.Mode
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
	c, err := o.client()
	if err != nil {
		return err
	}
	p, err := c.SetFleetPaused(cmd.Context(), paused)
	if err != nil {
		return apiErr(err)
	}
	if o.output == "json" {
		return writeJSONOut(cmd.OutOrStdout(), p)
	}
	if p.Paused {
		fmt.Fprintf(cmd.OutOrStdout(), "Fleet paused (by %s at %s): nothing is launched or terminated until `gpubroker fleet resume`.\n", p.By, p.At.Format(time.RFC3339))
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "Fleet resumed (by %s at %s).\n", p.By, p.At.Format(time.RFC3339))
	}
	return nil
}
