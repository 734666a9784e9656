package broker

import (
	"context"
	"errors"
	"fmt"
	"github.com/gpubroker/gpubroker/apiv1"
	"log/slog"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/broker/config"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/report"
	"github.com/gpubroker/gpubroker/store"
)

// ReportSources is where a report's inputs come from: the store (instances,
// events, price history, job runs), the catalog, and the current plan with
// its policy (budgets and teams).
type ReportSources struct {
	Broker  *store.Broker
	Store   *store.Store
	Catalog func() *pricing.Catalog
	// Plan returns the current plan; nil plan (and nil error) when there is
	// none.
	Plan   func(ctx context.Context) (*apiv1.Plan, error)
	Policy *policy.Policy
	// RefreshExpected says a scheduled price refresh is configured.
	RefreshExpected bool
	// api, when set, reads instances and events from a broker's API
	// instead of Broker (APIReportSources).
	api *apiv1.Client
}

// maxReportEvents bounds the events one report reads (pages of 1,000).
const maxReportEvents = 50_000

// GatherReport reads everything a report of period p at now needs. Parts
// that do not exist yet (no plan, no store) stay empty: the report says so
// rather than inventing figures.
func GatherReport(ctx context.Context, src ReportSources, p report.Period, now time.Time) (report.Inputs, error) {
	in := report.Inputs{Now: now, Period: p}
	teamOf := map[string]string{}
	if src.Policy != nil {
		in.Policy = src.Policy.File
		for _, w := range src.Policy.Workloads {
			teamOf[w.Name] = w.Team
		}
		for _, b := range src.Policy.Budgets {
			in.Budgets = append(in.Budgets, report.Budget{Name: b.Name, Team: b.Team, Workload: b.Workload, MonthlyUSD: b.MonthlyUSD})
		}
	}
	var cat *pricing.Catalog
	if src.Catalog != nil {
		cat = src.Catalog()
	}
	if cat != nil {
		in.Catalog = report.CatalogInfo{Source: cat.Source, ObservedAt: cat.GeneratedAt, Offers: cat.Len(), RefreshExpected: src.RefreshExpected}
	}
	if src.Plan != nil {
		plan, err := src.Plan(ctx)
		if err != nil {
			return in, fmt.Errorf("report: current plan: %w", err)
		}
		if plan != nil {
			in.PlanExpected, in.PlanOnDemand = plan.Totals.ExpectedCost, plan.Totals.OnDemandBaseline
			for _, pl := range plan.Placements {
				rp := report.Placement{Workload: pl.Workload, Team: pl.Team, Kind: pl.Kind,
					Where:    strings.TrimSpace(fmt.Sprintf("%s %s %s", pl.Cloud, placeName(pl.Zone, pl.Region), pl.InstanceType)),
					Capacity: pl.Capacity, GPU: pl.GPU, GPUs: pl.GPUs, PricePerHour: pl.PricePerHour,
					ExpectedHours: pl.ExpectedHours, DeadlineHours: pl.DeadlineHours, ExpectedCost: pl.ExpectedCost, OnDemand: pl.OnDemandBaseline}
				if rp.Team == "" {
					rp.Team = teamOf[pl.Workload]
				}
				for _, g := range pl.Groups {
					rp.Pools = append(rp.Pools, fmt.Sprintf("%s/%s/%s", g.Cloud, placeName(g.Zone, g.Region), g.InstanceType))
				}
				if len(pl.Groups) == 0 {
					rp.Pools = append(rp.Pools, fmt.Sprintf("%s/%s/%s", pl.Cloud, placeName(pl.Zone, pl.Region), pl.InstanceType))
				}
				in.Placements = append(in.Placements, rp)
			}
		}
	}
	from, _ := p.Window(now)
	// Budgets need the month to date, which may start before the window.
	since := from
	if ms := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location()); ms.Before(since) {
		since = ms
	}
	if src.Broker != nil || src.api != nil {
		listInstances := func() ([]store.InstanceRecord, error) { return src.Broker.ListInstances(ctx, "", "") }
		listEvents := func(afterID int64) ([]store.EventRecord, error) {
			return src.Broker.ListEvents(ctx, store.EventFilter{Since: since, AfterID: afterID, Limit: 1000})
		}
		if src.api != nil {
			listInstances = func() ([]store.InstanceRecord, error) { return apiInstances(ctx, src.api) }
			listEvents = func(afterID int64) ([]store.EventRecord, error) { return apiEvents(ctx, src.api, since, afterID) }
		}
		insts, err := listInstances()
		if err != nil {
			return in, fmt.Errorf("report: instances: %w", err)
		}
		// Billing lives (start, end, price) are the ledger's, so reports and
		// the ledger count the same hours.
		for i, u := range usages(insts, cat, teamOf) {
			r := insts[i]
			in.Instances = append(in.Instances, report.Instance{ID: u.Instance, Workload: u.Workload, Team: u.Team, Cloud: u.Cloud,
				Region: u.Region, Zone: u.Zone, InstanceType: u.InstanceType, Capacity: u.Capacity, GPU: r.GPU, GPUs: r.GPUCount,
				Start: u.Start, End: u.End, PricePerHour: u.Price, OnDemandPerHour: u.OnDemand, LastHeartbeat: r.LastHeartbeat, State: r.State})
		}
		var afterID int64
		for len(in.Events) < maxReportEvents {
			evs, err := listEvents(afterID)
			if err != nil {
				return in, fmt.Errorf("report: events: %w", err)
			}
			for _, e := range evs {
				in.Events = append(in.Events, report.Event{At: e.At, Kind: e.Kind, Instance: e.Instance, Workload: e.Workload,
					Pool: eventPool(e, insts), Message: e.Message})
				afterID = max(afterID, e.ID)
			}
			if len(evs) < 1000 {
				break
			}
		}
		if src.Broker != nil {
			// The ledger's rows, once it has any, replace the estimate.
			rows, err := src.Broker.ListSpend(ctx, since, time.Time{})
			if err != nil {
				return in, fmt.Errorf("report: spend: %w", err)
			}
			if len(rows) > 0 {
				in.Spend = make([]report.SpendRow, len(rows))
				for i, r := range rows {
					in.Spend[i] = report.SpendRow{Day: r.Day, Workload: r.Workload, Team: r.Team, Cloud: r.Cloud, Cost: r.Cost, OnDemand: r.OnDemand}
				}
			}
		}
		var runs []store.JobRun
		if src.Broker != nil {
			if runs, err = src.Broker.ListJobRuns(ctx, "refresh"); err != nil {
				return in, fmt.Errorf("report: refresh runs: %w", err)
			}
		}
		for _, r := range runs {
			if r.FinishedAt.IsZero() {
				continue
			}
			if r.Error == "" && r.FinishedAt.After(in.Catalog.LastRefresh) {
				in.Catalog.LastRefresh = r.FinishedAt
			}
		}
		// The newest finished run decides whether the last refresh failed.
		var newest store.JobRun
		for _, r := range runs {
			if !r.FinishedAt.IsZero() && r.FinishedAt.After(newest.FinishedAt) {
				newest = r
			}
		}
		in.Catalog.LastRefreshError = newest.Error
	}
	if src.Store != nil && cat != nil {
		for _, pl := range in.Placements {
			for _, pool := range pl.Pools {
				for _, o := range offersInPool(cat, pool) {
					pts, err := src.Store.PriceHistory(ctx, o.Key(), from.Add(-7*24*time.Hour))
					if err != nil {
						return in, fmt.Errorf("report: price history: %w", err)
					}
					for _, pt := range pts {
						if pt.Capacity != pricing.Spot {
							continue
						}
						in.Prices = append(in.Prices, report.PricePoint{Cloud: string(o.Cloud), Region: o.Region,
							Zone: placeName(o.Zone, o.Region), InstanceType: o.InstanceType, GPU: string(o.GPU), At: pt.ObservedAt, Spot: pt.Price})
					}
				}
			}
		}
	}
	return in, nil
}

func placeName(zone, region string) string {
	if zone != "" {
		return zone
	}
	return region
}

// instancePrice finds the instance's hourly price and the on-demand price
// of its shape in the catalog: the offer in its zone, else in its region.
func instancePrice(cat *pricing.Catalog, r store.InstanceRecord) (price, onDemand float64) {
	var best *pricing.Offer
	for _, o := range cat.Query(pricing.Query{Clouds: []pricing.Cloud{pricing.Cloud(r.Cloud)}}) {
		if o.InstanceType != r.InstanceType || o.Region != r.Region && o.Zone != r.Zone {
			continue
		}
		o := o
		if best == nil || o.Zone == r.Zone && best.Zone != r.Zone {
			best = &o
		}
	}
	if best == nil {
		return 0, 0
	}
	od, _ := best.Price(pricing.OnDemand)
	if r.Capacity == string(pricing.Spot) {
		if sp, ok := best.Price(pricing.Spot); ok {
			return sp, od
		}
	}
	return od, od
}

func offersInPool(cat *pricing.Catalog, pool string) []pricing.Offer {
	parts := strings.SplitN(pool, "/", 3)
	if len(parts) != 3 {
		return nil
	}
	var out []pricing.Offer
	for _, o := range cat.Query(pricing.Query{Clouds: []pricing.Cloud{pricing.Cloud(parts[0])}}) {
		if o.InstanceType == parts[2] && placeName(o.Zone, o.Region) == parts[1] {
			out = append(out, o)
		}
	}
	return out
}

func eventPool(e store.EventRecord, insts []store.InstanceRecord) string {
	for _, i := range insts {
		if i.ID == e.Instance {
			return fmt.Sprintf("%s/%s/%s/%s", i.Cloud, placeName(i.Zone, i.Region), i.InstanceType, i.Capacity)
		}
	}
	return ""
}

// ReportThresholds turns the configuration's alert thresholds into the
// report package's.
func ReportThresholds(a config.AlertsConfig) report.Thresholds {
	return report.Thresholds{PriceMove: a.PriceMove, SilentAgent: a.SilentAgent, StormCount: a.StormCount,
		StormWindow: a.StormWindow, FailingReplacements: a.FailingReplacements, BudgetLevels: a.BudgetLevels}
}

// ReportJobs are the leader's scheduled reports and the alert check. Each
// (job, slot) is claimed in the store before it runs, so a report slot is
// sent once even across leader changes. A failure to post is logged and
// recorded as the run's error; it never stops the broker.
func ReportJobs(cfg config.ReportsConfig, src ReportSources, sender *report.Sender, now func() time.Time, log *slog.Logger) []Job {
	th := ReportThresholds(cfg.Alerts)
	var jobs []Job
	for i, s := range cfg.Schedules {
		s := s
		jobs = append(jobs, Job{Name: fmt.Sprintf("report-%s-%d", s.Period, i), Schedule: cfg.CronSpec(s.Cron),
			Run: func(ctx context.Context) error {
				p, _ := report.ParsePeriod(s.Period)
				in, err := GatherReport(ctx, src, p, now())
				if err != nil {
					return err
				}
				in.Thresholds, in.DashboardURL = th, cfg.DashboardURL
				if s.Team != "" {
					in = report.ForTeam(in, s.Team)
				}
				r := report.Build(in)
				msg := report.Blocks(r)
				if msg.Image, err = report.SpendChart(r); err != nil {
					log.Warn("report chart failed; sending without it", "err", err)
				}
				if !sender.Configured() {
					log.Info("report built; no Slack destination configured, not sent", "report", r.Title(), "spend", r.Spend.Total)
					return nil
				}
				if err := sender.Send(ctx, s.Channel, msg); err != nil {
					log.Error("report not sent", "report", r.Title(), "channel", s.Channel, "err", err)
					return err
				}
				log.Info("report sent", "report", r.Title(), "channel", s.Channel)
				return nil
			}})
	}
	if cfg.Alerts.Enabled {
		jobs = append(jobs, Job{Name: "alerts", Schedule: cfg.CronSpec(cfg.Alerts.Schedule), Run: func(ctx context.Context) error {
			return RunAlerts(ctx, cfg, src, sender, now(), log)
		}})
	}
	return jobs
}

// RunAlerts evaluates the alert conditions once and sends those that are
// new. An alert that fails to send is cleared again so the next run retries
// it.
func RunAlerts(ctx context.Context, cfg config.ReportsConfig, src ReportSources, sender *report.Sender, now time.Time, log *slog.Logger) error {
	if src.Broker == nil {
		return errors.New("alerts: no store")
	}
	in, err := GatherReport(ctx, src, report.Day, now)
	if err != nil {
		return err
	}
	in.Thresholds = ReportThresholds(cfg.Alerts)
	fresh, err := report.Dedupe(ctx, src.Broker, report.Evaluate(in), now)
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range fresh {
		ch := AlertChannel(cfg.Alerts, a)
		if !sender.Configured() {
			log.Warn("alert raised; no Slack destination configured", "alert", a.Key, "title", a.Title)
			continue
		}
		if err := sender.Send(ctx, ch, report.AlertMessage(a, cfg.DashboardURL)); err != nil {
			errs = append(errs, err)
			log.Error("alert not sent; will retry", "alert", a.Key, "err", err)
			if cerr := src.Broker.ClearAlert(ctx, a.Key, now); cerr != nil {
				errs = append(errs, cerr)
			}
			continue
		}
		log.Info("alert sent", "alert", a.Key, "channel", ch)
	}
	return errors.Join(errs...)
}

// AlertChannel routes an alert: its team's channel, else its kind's, else
// the default alert channel.
func AlertChannel(a config.AlertsConfig, al report.Alert) string {
	if ch := a.Teams[al.Team]; al.Team != "" && ch != "" {
		return ch
	}
	if ch := a.Kinds[string(al.Kind)]; ch != "" {
		return ch
	}
	return a.Channel
}

// reportJobs wires the configured reports into the daemon: Slack secrets
// read once at start (a missing one is a startup error), the current plan
// from the planner, the policy's budgets and teams.
func reportJobs(cfg Config, st *store.Store, b *store.Broker, cat func() *pricing.Catalog, planner *policyPlanner, policyData []byte) ([]Job, error) {
	hook, token, err := cfg.Reports.Slack.Secrets()
	if err != nil {
		return nil, err
	}
	sender := &report.Sender{WebhookURL: hook, BotToken: token, APIURL: cfg.Reports.Slack.APIURL, HTTP: cfg.SlackHTTP, Log: cfg.Logger}
	src := ReportSources{Broker: b, Store: st, Catalog: cat, RefreshExpected: !cfg.NoRefresh}
	if policyData != nil {
		if pol, err := policy.Parse(cfg.PolicyPath, policyData); err == nil {
			src.Policy = pol
		}
	}
	if planner != nil && policyData != nil {
		src.Plan = func(ctx context.Context) (*apiv1.Plan, error) {
			plan, err := planner.Current(ctx)
			if err != nil {
				return nil, err
			}
			return &plan, nil
		}
	}
	return ReportJobs(cfg.Reports, src, sender, cfg.Now, cfg.Logger), nil
}

// APIReportSources reads a report's inputs from a running broker through its
// API (gpubroker report --endpoint): the stored plan, budgets, instances,
// events and the broker's offers. The API has no price history or job runs,
// so a report read this way has no price moves and no refresh status.
func APIReportSources(ctx context.Context, c *apiv1.Client) (ReportSources, error) {
	offers, err := c.Offers(ctx, apiv1.OffersQuery{})
	if err != nil {
		return ReportSources{}, fmt.Errorf("report: offers from the broker: %w", err)
	}
	var po []pricing.Offer
	for _, o := range offers.Offers {
		po = append(po, pricing.Offer{Cloud: pricing.Cloud(o.Cloud), Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
			GPU: pricing.GPUModel(o.GPU), GPUCount: o.GPUCount, GPUMemoryGiB: o.GPUMemoryGiB, VCPUs: o.VCPUs, MemoryGiB: o.MemoryGiB,
			OnDemandPrice: o.OnDemandPrice, SpotPrice: o.SpotPrice, ObservedAt: o.ObservedAt, Source: o.Source})
	}
	cat := pricing.NewCatalog(po, offers.GeneratedAt, offers.Source)
	src := ReportSources{Catalog: func() *pricing.Catalog { return cat }, api: c}
	src.Plan = func(ctx context.Context) (*apiv1.Plan, error) {
		p, err := c.Plan(ctx)
		var ae *apiv1.Error
		if errors.As(err, &ae) && ae.Status == 404 {
			return nil, nil // the broker has no policy: no placements
		}
		if err != nil {
			return nil, err
		}
		return &p, nil
	}
	b, err := c.Budgets(ctx)
	var ae *apiv1.Error
	if err != nil && !(errors.As(err, &ae) && ae.Status == 404) {
		return ReportSources{}, fmt.Errorf("report: budgets from the broker: %w", err)
	}
	pol := &policy.Policy{File: b.Policy}
	for _, bs := range b.Budgets {
		pol.Budgets = append(pol.Budgets, policy.Budget{Name: bs.Name, Team: bs.Team, Workload: bs.Workload, MonthlyUSD: bs.MonthlyUSD})
	}
	src.Policy = pol
	return src, nil
}

// apiInstances and apiEvents read the broker's records through its API as
// the store's record types, so GatherReport treats both sources alike.
func apiInstances(ctx context.Context, c *apiv1.Client) ([]store.InstanceRecord, error) {
	insts, err := c.ListInstances(ctx, apiv1.InstancesQuery{})
	if err != nil {
		return nil, err
	}
	out := make([]store.InstanceRecord, len(insts))
	for i, r := range insts {
		out[i] = store.InstanceRecord{ID: r.ID, Cloud: r.Cloud, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType,
			GPU: r.GPU, GPUCount: r.GPUCount, Capacity: r.Capacity, Workload: r.Workload, State: r.State,
			RegisteredAt: r.RegisteredAt, LastHeartbeat: r.LastHeartbeat}
	}
	return out, nil
}

func apiEvents(ctx context.Context, c *apiv1.Client, since time.Time, afterID int64) ([]store.EventRecord, error) {
	evs, err := c.ListEvents(ctx, apiv1.EventsQuery{Since: since, AfterID: afterID, Limit: 1000})
	if err != nil {
		return nil, err
	}
	out := make([]store.EventRecord, len(evs))
	for i, e := range evs {
		out[i] = store.EventRecord{ID: e.ID, At: e.At, Kind: e.Kind, Instance: e.Instance, Workload: e.Workload, Message: e.Message}
	}
	return out, nil
}
