//go:build !agentonly

package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpubroker/gpubroker/apiv1"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpubroker/gpubroker/broker"
	"github.com/gpubroker/gpubroker/broker/config"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/report"
)

func newReportCmd() *cobra.Command {
	var (
		file, db, output, period, configPath, channel, team, endpoint, token string
		send                                                                 bool
	)
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Build the spend, savings and fleet report; print it or send it to Slack",
		Long: `Build the report gpubroker sends to Slack: spend and savings against all-on-demand by
cloud, team and workload, the top placements, preemptions, replacements and drains, jobs at
risk of missing their deadline, budget burn and forecast, notable spot price moves of the pools
the plan uses, and catalog freshness. It reads the broker's store (--db) and plans the policy
(-f) the way 'plan' does.

Without --send the report is printed (text, json, or the Block Kit JSON Slack would get), so
you can see it before wiring Slack. With --send it goes to Slack through the webhook or bot
token named in the broker configuration (--config; secrets only from env or files, see
docs/reports.md).`,
		Example: `  gpubroker report -f examples/fleet.yaml --db ~/.local/share/gpubroker/gpubroker.db
  gpubroker report -f fleet.yaml --period week --output blocks
  gpubroker report -f fleet.yaml --period month --send --config serve.yaml --channel '#gpu-costs'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := report.ParsePeriod(period)
			if err != nil {
				return usageErr(fmt.Errorf("--period: %w", err))
			}
			switch output {
			case "text", "json", "blocks", "html":
			default:
				return usageErr(fmt.Errorf("--output %q: want text, json, blocks or html", output))
			}
			if team != "" {
				if err := checkName("--team", team); err != nil {
					return usageErr(err)
				}
			}
			var rcfg config.ReportsConfig
			if configPath != "" {
				data, err := os.ReadFile(configPath)
				if err != nil {
					return usageErr(fmt.Errorf("--config: %w", err))
				}
				cfg, err := config.ParseConfig(configPath, data)
				if err != nil {
					return usageErr(err)
				}
				rcfg = cfg.Reports
				if db == "" && endpoint == "" {
					db = cfg.DB
				}
			}
			if send && channel == "" && len(rcfg.Schedules) > 0 {
				channel = rcfg.Schedules[0].Channel
			}
			if endpoint != "" && (file != "" || db != "") {
				return usageErr(errors.New("--endpoint reads the broker's own plan and store; leave out -f and --db"))
			}
			if endpoint == "" && file == "" && db == "" {
				// The environment names a broker only when nothing local was asked for.
				endpoint = os.Getenv("GPUBROKER_ENDPOINT")
			}
			if token == "" {
				token = os.Getenv("GPUBROKER_TOKEN")
			}
			var pol *policy.Policy
			if file != "" {
				if pol, err = loadPolicyForCmd(cmd.ErrOrStderr(), file); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			now := time.Now().UTC().Truncate(time.Second)
			if endpoint != "" {
				u, perr := url.Parse(endpoint)
				if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					return usageErr(fmt.Errorf("--endpoint %q: want the broker's URL, e.g. http://127.0.0.1:8080", endpoint))
				}
				src, err := broker.APIReportSources(ctx, apiv1.NewClient(endpoint, token, nil))
				if err != nil {
					return failErr(err)
				}
				return finishReport(ctx, cmd, src, p, now, rcfg, team, send, channel, output)
			}
			cat, st, err := pricesCatalog(ctx, db)
			if err != nil {
				return failErr(err)
			}
			src := broker.ReportSources{Catalog: func() *pricing.Catalog { return cat }, Policy: pol, RefreshExpected: st != nil}
			if st != nil {
				defer st.Close()
				b, err := st.Broker(ctx)
				if err != nil {
					return failErr(err)
				}
				src.Broker, src.Store = b, st
			}
			if pol != nil {
				src.Plan = func(context.Context) (*apiv1.Plan, error) {
					plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: pol, Speeds: optimizer.DefaultSpeeds(), Now: now})
					if errors.Is(err, optimizer.ErrInfeasible) {
						fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v; the report has no placements\n", err)
						return nil, nil
					}
					if err != nil {
						return nil, err
					}
					ap, err := broker.APIPlan(plan)
					return &ap, err
				}
			}
			return finishReport(ctx, cmd, src, p, now, rcfg, team, send, channel, output)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "policy file: placements, budgets and teams come from its plan")
	f.StringVar(&db, "db", "", "store to read instances, events and price history from (default: the user data directory's, if it exists)")
	f.StringVar(&period, "period", "day", "period: day (last 24h), week (last 7 days) or month (calendar month to date)")
	f.StringVarP(&output, "output", "o", "text", "output: text, json, blocks (the Slack Block Kit payload) or html (a preview of the Slack message)")
	f.BoolVar(&send, "send", false, "send the report to Slack (needs --config with a reports.slack section)")
	f.StringVar(&configPath, "config", "", "broker configuration file (reports section: Slack secrets, dashboard URL, thresholds)")
	f.StringVar(&channel, "channel", "", "Slack channel for --send with a bot token (default: the first scheduled report's channel)")
	f.StringVar(&team, "team", "", "limit the report to one team's workloads")
	f.StringVar(&endpoint, "endpoint", "", "read from a running broker's API instead of a store (env GPUBROKER_ENDPOINT); no price moves or refresh status that way")
	f.StringVar(&token, "token", "", "the broker's admin token for --endpoint (env GPUBROKER_TOKEN)")
	return cmd
}

func finishReport(ctx context.Context, cmd *cobra.Command, src broker.ReportSources, p report.Period, now time.Time,
	rcfg config.ReportsConfig, team string, send bool, channel, output string) error {
	in, err := broker.GatherReport(ctx, src, p, now)
	if err != nil {
		return failErr(err)
	}
	in.Thresholds, in.DashboardURL = broker.ReportThresholds(rcfg.Alerts), rcfg.DashboardURL
	if team != "" {
		in = report.ForTeam(in, team)
	}
	r := report.Build(in)
	if send {
		return sendReport(ctx, cmd.ErrOrStderr(), rcfg, channel, r)
	}
	return printReport(cmd.OutOrStdout(), r, output)
}

func loadPolicyForCmd(stderr io.Writer, file string) (*policy.Policy, error) {
	p, err := policy.Load(file)
	if err != nil {
		var list policy.ErrorList
		if errors.As(err, &list) {
			for _, e := range list {
				fmt.Fprintln(stderr, e)
			}
			return nil, usageErr(fmt.Errorf("%s: %d error(s)", file, len(list)))
		}
		return nil, usageErr(err)
	}
	return p, nil
}

func checkName(flag, s string) error {
	if len(s) > 128 {
		return fmt.Errorf("%s: at most 128 characters", flag)
	}
	for _, c := range s {
		if c < 0x20 || c == 0x7f || c == 0xfffd {
			return fmt.Errorf("%s %q: control or invalid characters", flag, s)
		}
	}
	return nil
}

func printReport(w io.Writer, r report.Report, output string) error {
	switch output {
	case "json":
		return report.JSON(w, r)
	case "blocks":
		return report.WriteBlocks(w, report.Blocks(r))
	case "html":
		m := report.Blocks(r)
		img, err := report.SpendChart(r)
		if err != nil {
			return failErr(err)
		}
		m.Image = img
		_, err = io.WriteString(w, report.PreviewHTML(m))
		return err
	}
	return report.Text(w, r)
}

func sendReport(ctx context.Context, stderr io.Writer, cfg config.ReportsConfig, channel string, r report.Report) error {
	hook, token, err := cfg.Slack.Secrets()
	if err != nil {
		return usageErr(err)
	}
	s := &report.Sender{WebhookURL: hook, BotToken: token, APIURL: cfg.Slack.APIURL,
		Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if !s.Configured() {
		return usageErr(errors.New("--send: no Slack destination; set reports.slack.webhook_url_env/_file or bot_token_env/_file in --config (docs/reports.md)"))
	}
	msg := report.Blocks(r)
	if msg.Image, err = report.SpendChart(r); err != nil {
		return failErr(err)
	}
	if err := s.Send(ctx, channel, msg); err != nil {
		return failErr(err)
	}
	fmt.Fprintf(stderr, "sent %s\n", r.Title())
	return nil
}
