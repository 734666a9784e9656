package broker

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/store"
)

// TestBudgetReached: a budget's action applies from 100% of this month's
// ledger spend, only to the workloads it covers, only for its own action,
// and not from last month's spend.
func TestBudgetReached(t *testing.T) {
	ctx := t.Context()
	b := openBroker(t, filepath.Join(t.TempDir(), "s.db"))
	day := func(m time.Month, d int) time.Time { return time.Date(2026, m, d, 0, 0, 0, 0, time.UTC) }
	if err := b.UpsertSpend(ctx, []store.SpendEntry{
		{Day: day(11, 30), Instance: "old", Workload: "batch", Team: "ml", Cost: 5000}, // last month
		{Day: day(12, 2), Instance: "a", Workload: "chat", Team: "ml", Cost: 60},
		{Day: day(12, 3), Instance: "b", Workload: "chat", Team: "ml", Cost: 45},
		{Day: day(12, 3), Instance: "c", Workload: "batch", Team: "ml", Cost: 10},
	}); err != nil {
		t.Fatal(err)
	}
	pol := &policy.Policy{
		Workloads: []policy.Workload{{Name: "chat", Team: "ml"}, {Name: "batch", Team: "ml"}, {Name: "web", Team: "web"}},
		Budgets: []policy.Budget{
			{Name: "chat", Workload: "chat", MonthlyUSD: 100, Action: policy.BudgetSpotOnly},
			{Name: "team:ml", Team: "ml", MonthlyUSD: 500, Action: policy.BudgetStopScaling},
			{Name: "batch", Workload: "batch", MonthlyUSD: 100, Action: policy.BudgetSpotOnly},
		},
	}
	now := time.Date(2026, 12, 15, 10, 0, 0, 0, time.UTC)
	log := slog.New(slog.DiscardHandler)
	cases := []struct {
		workload, action string
		want             bool
	}{
		{"chat", policy.BudgetSpotOnly, true},     // 105 of 100
		{"batch", policy.BudgetSpotOnly, false},   // 10 of 100; November's 5000 does not count
		{"chat", policy.BudgetStopScaling, false}, // team ml: 115 of 500
		{"web", policy.BudgetSpotOnly, false},     // no budget covers it
	}
	for _, c := range cases {
		w := *pol.Workload(c.workload)
		if got := budgetReached(ctx, b, pol, w, now, c.action, log); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.workload, c.action, got, c.want)
		}
	}
	if budgetReached(ctx, b, nil, pol.Workloads[0], now, policy.BudgetSpotOnly, log) {
		t.Error("no policy: reached")
	}
}
