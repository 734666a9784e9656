package broker

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// TestLedgerPass seeds two instances with known catalog prices and checks
// the ledger's rows, the spend view, the metrics and that each budget level
// is recorded once however often the job runs.
func TestLedgerPass(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			b := openBroker(t, be.dsn(t))
			ctx := context.Background()
			now := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
			cat := pricing.NewCatalog([]pricing.Offer{
				{Cloud: "aws", Region: "us-east-1", Zone: "use1-az4", InstanceType: "g4dn.xlarge", GPU: "T4", GPUCount: 1, OnDemandPrice: 0.526, SpotPrice: 0.2, ObservedAt: now},
				{Cloud: "azure", Region: "eastus", InstanceType: "Standard_NC4as_T4_v3", GPU: "T4", GPUCount: 1, OnDemandPrice: 0.526, SpotPrice: 0.1, ObservedAt: now},
			}, now, "test")
			// 10h of AWS spot at $0.20 = $2.00 (on-demand $5.26), still running.
			run := store.InstanceRecord{ID: "i-aws", Cloud: "aws", Region: "us-east-1", Zone: "use1-az4", InstanceType: "g4dn.xlarge", Capacity: "spot", Workload: "chat", State: store.StateRunning}
			if _, err := b.RegisterAgent(ctx, run, "h-aws-token-0000000000", now.Add(-10*time.Hour)); err != nil {
				t.Fatal(err)
			}
			// Azure on-demand, registered 13:00 yesterday, drained after 90.5 min: billed 91 min.
			done := store.InstanceRecord{ID: "vm-az", Cloud: "azure", Region: "eastus", InstanceType: "Standard_NC4as_T4_v3", Capacity: "on-demand", Workload: "batch", State: store.StateRunning}
			start := now.Add(-23 * time.Hour)
			if _, err := b.RegisterAgent(ctx, done, "h-az-token-00000000000", start); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Heartbeats(ctx, []store.HeartbeatUpdate{{Instance: "vm-az", At: start.Add(90*time.Minute + 30*time.Second)}}); err != nil {
				t.Fatal(err)
			}
			if err := markDrained(ctx, b, "vm-az"); err != nil {
				t.Fatal(err)
			}
			pol := &policy.Policy{Workloads: []policy.Workload{{Name: "chat", Team: "product"}, {Name: "batch", Team: "research"}},
				Budgets: []policy.Budget{{Name: "product", Team: "product", MonthlyUSD: 3}, {Name: "research", Team: "research", MonthlyUSD: 100, Action: policy.BudgetSpotOnly}}}
			reg := prometheus.NewRegistry()
			src := LedgerSources{Broker: b, Catalog: func() *pricing.Catalog { return cat }, Policy: pol, Metrics: NewLedgerMetrics(reg)}
			for i := range 3 {
				if err := RunLedger(ctx, src, now.Add(time.Duration(i)*time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			v, err := SpendView(ctx, b, apiv1.SpendQuery{Since: now.AddDate(0, 0, -3), Until: now.AddDate(0, 0, 1), By: "cloud"})
			if err != nil {
				t.Fatal(err)
			}
			// aws 10h × 0.2 = 2.00 (+2 s of the later passes ≈ 0.0001);
			// azure 91 min × 0.526 = 0.80.
			want := map[string]float64{"aws": 2.0, "azure": 0.80}
			for _, l := range v.Lines {
				if math.Abs(l.Cost-want[l.Key]) > 0.006 {
					t.Errorf("%s: $%.4f, want $%.2f", l.Key, l.Cost, want[l.Key])
				}
			}
			if len(v.Lines) != 2 || math.Abs(v.Savings-(5.26-2.0)) > 0.01 {
				t.Errorf("spend view %+v", v)
			}
			if got := testutil.ToFloat64(src.Metrics.spend.WithLabelValues("aws", "spot")); math.Abs(got-2) > 0.01 {
				t.Errorf("spend metric %v", got)
			}
			// product: $2 of $3 = 66% → the 50% level, once.
			evs, err := b.ListEvents(ctx, store.EventFilter{Kind: "budget_alert"})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != 1 || evs[0].IdempotencyKey != "budget/product/2026-11/50" {
				t.Fatalf("budget events %+v, want one at 50%%", evs)
			}
			var data struct{ Action string }
			_ = json.Unmarshal(evs[0].Data, &data)
			if data.Action != "alert" {
				t.Errorf("action %q", data.Action)
			}
			bs, err := withSpend(ctx, b, cat, pol, apiv1.Budgets{Budgets: []apiv1.BudgetStatus{{Name: "product", Team: "product", MonthlyUSD: 3},
				{Name: "research", Team: "research", MonthlyUSD: 100}}}, now)
			if err != nil {
				t.Fatal(err)
			}
			p := bs.Budgets[0]
			// burn $0.20/h × 252h left in November + $2 spent.
			if math.Abs(p.SpentUSD-2) > 0.01 || p.BurnPerHourUSD != 0.2 || math.Abs(p.ForecastUSD-(2+0.2*252)) > 0.02 || bs.Budgets[1].Action != "spot-only" {
				t.Errorf("budgets %+v", bs.Budgets)
			}
		})
	}
}

// markDrained reports a completed drain the way the API does.
func markDrained(ctx context.Context, b *store.Broker, id string) error {
	_, _, err := b.RecordReport(ctx, store.Report{Event: store.EventRecord{At: time.Now(), Kind: "drained", Instance: id,
		IdempotencyKey: "drain-" + id}, State: store.StateDrained})
	return err
}

func TestSpendRoute(t *testing.T) {
	cfg := Config{DSN: filepath.Join(t.TempDir(), "b.db"), PolicyPath: "../examples/fleet.yaml", Plan: OptimizerPlan, NoRefresh: true}
	r := startDaemon(t, cfg)
	tok := tokenRE.FindString(r.out.String())
	code, body := request(t, "GET", r.url+"/api/v1/spend?by=team", tok, "")
	if code != 200 || !strings.Contains(string(body), `"by":"team"`) {
		t.Fatalf("spend: %d %s", code, body)
	}
	for _, q := range []string{"by=region", "since=yesterday", "since=2026-11-10&until=2026-11-01", "foo=1"} {
		if code, body := request(t, "GET", r.url+"/api/v1/spend?"+q, tok, ""); code != 400 {
			t.Errorf("%s: %d %s, want 400", q, code, body)
		}
	}
	code, body = request(t, "GET", r.url+"/api/v1/budgets", tok, "")
	if code != 200 || !strings.Contains(string(body), `"forecast_usd"`) || !strings.Contains(string(body), `"action":"alert"`) {
		t.Fatalf("budgets: %d %s", code, body)
	}
}
