package fleetsim

import (
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers/fake"
)

// budgetRun is one service that wants 4 replicas all day, spot preferred,
// in three spot pools that hold 2 replicas each for 65 minutes and nothing
// for the next 65 (each pool at its own offset): hedging runs mostly on
// demand, so a month's real spend passes the plan's expected spot spend
// (which the budget must admit for the policy to be planned at all).
func budgetRun(t *testing.T, budgets string) (*Report, *Sim) {
	t.Helper()
	src := `
clouds: [aws]
workloads:
  - name: serve
    kind: inference
    gpu: {models: [V100], count: 1}
    replicas: {min: 1, max: 4}
    load: {replicas_by_hour: [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4]}
    spot: prefer
` + budgets
	flap := fake.Trace{Name: "flap", Gap: 195 * time.Second}
	for i := range 40 {
		flap.Avail = append(flap.Avail, 2*(1-i/20))
	}
	return runSim(t, Config{Policy: mustPolicy(t, src), Catalog: testCatalog(), Traces: []fake.Trace{flap}, Seed: 1, Duration: 14 * 24 * time.Hour})
}

// hoursAfter is the instance-hours of each capacity type after t.
func hoursAfter(s *Sim, t time.Time) (spot, onDemand float64) {
	end := s.cfg.Start.Add(s.cfg.Duration)
	for _, in := range s.insts {
		from, to := in.launched, in.gone
		if to.IsZero() {
			to = end
		}
		if from.Before(t) {
			from = t
		}
		if h := to.Sub(from).Hours(); h > 0 && in.pool.Capacity == pricing.Spot {
			spot += h
		} else if h > 0 {
			onDemand += h
		}
	}
	return spot, onDemand
}

func reachedAt(t *testing.T, rep *Report) time.Time {
	t.Helper()
	if len(rep.Budgets) != 1 || len(rep.Budgets[0].Months) != 1 || rep.Budgets[0].Months[0].ReachedHours <= 0 {
		t.Fatalf("want one budget, reached in its one month: %+v", rep.Budgets)
	}
	return rep.Start.Add(time.Duration(rep.Budgets[0].Months[0].ReachedHours * float64(time.Hour)))
}

func TestBudgetActions(t *testing.T) {
	free, _ := budgetRun(t, "")
	if free.Budgets != nil {
		t.Errorf("a policy without budgets reports %+v", free.Budgets)
	}
	alert, as := budgetRun(t, "budgets:\n  - {name: serving, workload: serve, monthly_usd: 3000}\n")
	stop, ss := budgetRun(t, "budgets:\n  - {name: serving, workload: serve, monthly_usd: 3000, action: stop-scaling}\n")
	spot, ps := budgetRun(t, "budgets:\n  - {workload: serve, monthly_usd: 3000, action: spot-only}\n")

	// An alert changes nothing: the same fleet, the crossing reported.
	at := reachedAt(t, alert)
	if alert.Workloads[0] != free.Workloads[0] || alert.Total.Passes != free.Total.Passes {
		t.Errorf("an alert budget changed the fleet:\n%+v\n%+v", alert.Workloads[0], free.Workloads[0])
	}
	if b := alert.Budgets[0]; b.Action != "alert" || b.Months[0].Month != "2026-01" || b.Months[0].SpentUSD != free.Workloads[0].CostUSD {
		t.Errorf("alert budget %+v; the service cost $%.2f", b, free.Workloads[0].CostUSD)
	}
	// The alert levels, as the broker's budget_alert events: 50%, 80% and
	// 100%, in order, the last when the budget was reached.
	lv := alert.Budgets[0].Months[0].Levels
	if len(lv) != 3 || lv[0].Percent != 50 || lv[1].Percent != 80 || lv[2].Percent != 100 {
		t.Fatalf("levels %+v, want 50, 80 and 100%%", lv)
	}
	if !(0 < lv[0].ReachedHours && lv[0].ReachedHours < lv[1].ReachedHours && lv[1].ReachedHours < lv[2].ReachedHours) ||
		lv[2].ReachedHours != alert.Budgets[0].Months[0].ReachedHours {
		t.Errorf("levels %+v not crossed in order, 100%% at the budget's reached_hours %.3f", lv, alert.Budgets[0].Months[0].ReachedHours)
	}
	// The three runs are the same fleet until the budget is reached.
	for _, r := range []*Report{stop, spot} {
		if got := reachedAt(t, r); !got.Equal(at) {
			t.Errorf("%s budget reached at %s, the alert budget at %s", r.Budgets[0].Action, got, at)
		}
	}
	if h := at.Sub(free.Start).Hours(); h < 24*5 || h > 24*13 {
		t.Fatalf("the budget was reached at %.1f h: the test needs it mid-run", h)
	}
	settle := at.Add(time.Hour)

	// stop-scaling: the service is held at its minimum of 1.
	_, freeOD := hoursAfter(as, settle)
	stopSpot, stopOD := hoursAfter(ss, settle)
	left := free.Start.Add(14 * 24 * time.Hour).Sub(settle).Hours()
	if stopSpot+stopOD > 1.5*left || stopSpot+stopOD < 0.9*left {
		t.Errorf("stop-scaling: %.0f instance-hours in the %.0f h after the budget was reached, want about 1 replica's", stopSpot+stopOD, left)
	}
	if stop.Workloads[0].CostUSD >= alert.Workloads[0].CostUSD || stop.Workloads[0].TimeAtTarget >= alert.Workloads[0].TimeAtTarget {
		t.Errorf("stop-scaling did not hold the service back: %+v, alert %+v", stop.Workloads[0], alert.Workloads[0])
	}

	// spot-only: no on-demand replica after the budget, spot instead.
	spotSpot, spotOD := hoursAfter(ps, settle)
	if freeOD == 0 {
		t.Fatal("without the budget the service runs nothing on demand: the test does not test spot-only")
	}
	if spotOD != 0 || spotSpot == 0 {
		t.Errorf("spot-only: %.1f on-demand and %.1f spot instance-hours after the budget was reached (alert: %.1f on demand)", spotOD, spotSpot, freeOD)
	}
	if spot.Workloads[0].CostUSD >= alert.Workloads[0].CostUSD {
		t.Errorf("spot-only cost $%.2f, alert $%.2f", spot.Workloads[0].CostUSD, alert.Workloads[0].CostUSD)
	}

	var out strings.Builder
	if err := stop.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"budget serving: $3000 a month, stop-scaling at 100%; 2026-01 $", "%, 50% at ", ", 80% at ", ", reached at "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table does not show %q:\n%s", want, out.String())
		}
	}
}
