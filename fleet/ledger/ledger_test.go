package ledger

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 20, 22, 0, 0, 0, time.UTC)

func TestBilledSeconds(t *testing.T) {
	for _, c := range []struct {
		cloud string
		d     time.Duration
		want  float64
	}{
		{"aws", 30 * time.Second, 60}, // one-minute minimum
		{"aws", 90 * time.Second, 90},
		{"gcp", 61 * time.Second, 61},
		{"azure", 61 * time.Second, 120}, // per started minute
		{"azure", 60 * time.Second, 60},
		{"aws", 0, 0},
		{"aws", -time.Second, 0},
	} {
		if got := BilledSeconds(c.cloud, t0, t0.Add(c.d)); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.cloud, c.d, got, c.want)
		}
	}
}

func TestEntriesSplitPerDay(t *testing.T) {
	// 22:00 to 02:30 next day on AWS at $4/h spot, $10/h on-demand.
	u := Usage{Instance: "i-1", Workload: "w", Team: "t", Cloud: "aws", Capacity: "spot", Start: t0, End: t0.Add(4*time.Hour + 30*time.Minute), Price: 4, OnDemand: 10}
	es := Entries(u, t0.Add(48*time.Hour))
	if len(es) != 2 {
		t.Fatalf("%d entries, want 2: %+v", len(es), es)
	}
	if es[0].Seconds != 2*3600 || es[1].Seconds != 2.5*3600 {
		t.Errorf("seconds %v %v", es[0].Seconds, es[1].Seconds)
	}
	if math.Abs(es[0].Cost-8) > 1e-9 || math.Abs(es[1].Cost-10) > 1e-9 || math.Abs(es[1].OnDemand-25) > 1e-9 {
		t.Errorf("costs %+v", es)
	}
	if !es[1].Day.Equal(t0.Truncate(24 * time.Hour).Add(24 * time.Hour)) {
		t.Errorf("day %v", es[1].Day)
	}
	// Running: up to until only.
	u.End = time.Time{}
	if es := Entries(u, t0.Add(time.Hour)); len(es) != 1 || es[0].Seconds != 3600 {
		t.Errorf("running: %+v", es)
	}
	// Unknown price: nothing.
	u.Price = 0
	if es := Entries(u, t0.Add(time.Hour)); es != nil {
		t.Errorf("unpriced: %+v", es)
	}
	// Missing on-demand price: no saving.
	u = Usage{Cloud: "gcp", Start: t0, End: t0.Add(time.Hour), Price: 3}
	if es := Entries(u, t0.Add(time.Hour)); es[0].OnDemand != es[0].Cost {
		t.Errorf("saving from a missing on-demand price: %+v", es)
	}
	// Azure: 90 s billed as 2 minutes, spread over the two days it spans.
	u = Usage{Cloud: "azure", Start: t0.Truncate(24 * time.Hour).Add(24*time.Hour - 45*time.Second), Price: 3600}
	u.End = u.Start.Add(90 * time.Second)
	es = Entries(u, u.End)
	if len(es) != 2 || math.Abs(es[0].Seconds+es[1].Seconds-120) > 1e-9 || math.Abs(es[0].Cost+es[1].Cost-120) > 1e-9 {
		t.Errorf("azure split: %+v", es)
	}
}

func TestBudgetStatus(t *testing.T) {
	now := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC) // 11 days (264h) left
	entries := []Entry{
		{Day: time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC), Workload: "a", Team: "research", Cost: 600},
		{Day: time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC), Workload: "b", Team: "research", Cost: 250},
		{Day: time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC), Workload: "a", Team: "research", Cost: 9999}, // last month
		{Day: time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC), Workload: "c", Team: "product", Cost: 1},
	}
	running := []Usage{{Workload: "a", Team: "research", Price: 2}, {Workload: "c", Team: "product", Price: 7}, {Workload: "a", Team: "research", Price: 5, End: now}}
	st := BudgetStatus(Budget{Name: "r", Team: "research", MonthlyUSD: 1000}, entries, running, now, nil)
	if st.Spent != 850 || st.BurnPerHour != 2 || st.Forecast != 850+2*264 || st.Level != 0.8 {
		t.Errorf("status %+v", st)
	}
	if math.Abs(st.ForecastPct-137.8) > 1e-9 {
		t.Errorf("forecast %% %v", st.ForecastPct)
	}
	st = BudgetStatus(Budget{Name: "w", Workload: "c", MonthlyUSD: 100}, entries, running, now, []float64{0.01})
	if st.Spent != 1 || st.Level != 0.01 {
		t.Errorf("workload budget %+v", st)
	}
}
