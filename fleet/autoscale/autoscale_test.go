package autoscale

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/policy"
)

func load(v float64) *float64 { return &v }

func TestRecommend(t *testing.T) {
	base := Config{Min: 2, Max: 20, TargetUtilization: 0.7, TargetPerReplica: 50}
	cases := []struct {
		name string
		cfg  Config
		s    Sample
		want int
	}{
		{"utilisation on target", base, Sample{Ready: 4, Utilization: []float64{0.7, 0.7, 0.72, 0.68}}, 4},
		{"within tolerance keeps", base, Sample{Ready: 4, Utilization: []float64{0.75, 0.75, 0.75, 0.75}}, 4},
		// ceil(4 × 0.95/0.7) = ceil(5.43) = 6
		{"hot GPUs scale up", base, Sample{Ready: 4, Utilization: []float64{0.95, 0.95, 0.95, 0.95}}, 6},
		// load 400 over 4 replicas = 100 per replica vs 50 → ceil(4×2) = 8
		{"load wins over utilisation", base, Sample{Ready: 4, Utilization: []float64{0.7, 0.7, 0.7, 0.7}, Load: load(400)}, 8},
		// utilisation says 6, load says 3 → max is 6
		{"largest metric wins", base, Sample{Ready: 4, Utilization: []float64{0.95, 0.95, 0.95, 0.95}, Load: load(120)}, 6},
		// ceil(4 × 0.1/0.7) = 1 → clamped to min 2
		{"idle clamps to min", base, Sample{Ready: 4, Utilization: []float64{0.1, 0.1, 0.1, 0.1}, Load: load(10)}, 2},
		// 10 × 10 = 100 wanted → +max(4,10) = 20 → clamp 20
		{"clamps to max", base, Sample{Ready: 10, Load: load(5000)}, 20},
		// 2 ready, load 2000 → 80 wanted; step limited to 2+4 = 6
		{"scale-up step limited", base, Sample{Ready: 2, Load: load(2000)}, 6},
		{"no figures keeps", base, Sample{Ready: 5}, 5},
		{"no figures and below min", base, Sample{Ready: 1}, 2},
		{"nothing ready sizes from load", base, Sample{Ready: 0, Load: load(260)}, 6},
		{"utilisation off", Config{Min: 1, Max: 9, TargetPerReplica: 10}, Sample{Ready: 3, Utilization: []float64{1, 1, 1}, Load: load(30)}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Recommend(c.cfg, c.s)
			if d.Desired != c.want {
				t.Errorf("desired %d, want %d (%s)", d.Desired, c.want, d.Reason)
			}
			if d.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}

func TestStabilisation(t *testing.T) {
	a := New(Config{Min: 2, Max: 20, TargetPerReplica: 10, ScaleDownWindow: 5 * time.Minute}, 4)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	step := func(sec int, ready int, l float64) Decision {
		return a.Observe(Sample{At: t0.Add(time.Duration(sec) * time.Second), Ready: ready, Load: load(l)})
	}
	// A burst: up at once (40 → 4 per... 80 load / 4 = 20 per replica → 8).
	if d := step(0, 4, 80); d.Desired != 8 {
		t.Fatalf("burst: %d (%s)", d.Desired, d.Reason)
	}
	// Load falls right away: stay at 8 for the five-minute window.
	for sec := 15; sec < 300; sec += 15 {
		if d := step(sec, 8, 20); d.Desired != 8 {
			t.Fatalf("t=%ds: scaled down to %d inside the window (%s)", sec, d.Desired, d.Reason)
		}
	}
	// After the window the high recommendation has aged out.
	if d := step(315, 8, 20); d.Desired != 2 {
		t.Fatalf("after the window: %d, want 2 (%s)", d.Desired, d.Reason)
	}
	if !strings.Contains(step(330, 2, 20).Reason, "load per replica") {
		t.Error("reason lacks the metric")
	}
}

func TestScaleUpWindowIgnoresOneSpike(t *testing.T) {
	a := New(Config{Min: 1, Max: 20, TargetPerReplica: 10, ScaleUpWindow: time.Minute, ScaleDownWindow: time.Minute}, 2)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a.Observe(Sample{At: t0, Ready: 2, Load: load(20)})
	// One spike within the up window: the lowest recommendation (2) wins.
	if d := a.Observe(Sample{At: t0.Add(10 * time.Second), Ready: 2, Load: load(100)}); d.Desired != 2 {
		t.Fatalf("spike scaled to %d", d.Desired)
	}
	// Sustained for longer than the window: scale up.
	var d Decision
	for s := 20; s <= 80; s += 10 {
		d = a.Observe(Sample{At: t0.Add(time.Duration(s) * time.Second), Ready: 2, Load: load(100)})
	}
	if d.Desired != 6 {
		t.Fatalf("sustained load: %d, want 6 (2 + step 4)", d.Desired)
	}
}

func TestFromPolicy(t *testing.T) {
	w := policy.Workload{Kind: policy.Inference, Replicas: policy.Replicas{Min: 2, Max: 9, TargetUtilization: 0.6},
		Autoscale: policy.Autoscale{Prometheus: &policy.PrometheusMetric{URL: "http://p:9090", Query: "up", TargetPerReplica: 40}}}
	c := FromPolicy(w)
	if c.Min != 2 || c.Max != 9 || c.TargetUtilization != 0.6 || c.TargetPerReplica != 40 || c.ScaleDownWindow != DefaultScaleDownWindow {
		t.Errorf("FromPolicy = %+v", c)
	}
}

// TestReconfigure: a changed rule clamps the count into its bounds and
// forgets the old rule's history; the same rule changes nothing.
func TestReconfigure(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c := Config{Min: 1, Max: 10, TargetUtilization: 0.5, ScaleDownWindow: 5 * time.Minute}
	a := New(c, 8)
	a.Observe(Sample{At: t0, Ready: 8, Utilization: []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}})
	a.Reconfigure(c)
	if a.Current() != 8 || len(a.history) != 1 {
		t.Fatalf("same rule: current %d, history %d; want 8 and 1", a.Current(), len(a.history))
	}
	c.Max = 4
	a.Reconfigure(c)
	if a.Current() != 4 || len(a.history) != 0 {
		t.Fatalf("max 4: current %d, history %d; want 4 and 0", a.Current(), len(a.history))
	}
	c.Min, c.Max = 6, 12
	a.Reconfigure(c)
	if a.Current() != 6 {
		t.Fatalf("min 6: current %d, want 6", a.Current())
	}
}

// The reasons read as fmt would write them, joined by "; ": Recommend
// builds them in one buffer, Observe appends the stabilisation.
func TestReasonsAsFmtWritesThem(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 5))
	for i := range 3000 {
		c := Config{Min: 1 + rng.IntN(3), Max: 4 + rng.IntN(30), MaxScaleUpStep: rng.IntN(5)}
		if rng.IntN(4) > 0 {
			c.TargetUtilization = float64(rng.IntN(100)) / 99
		}
		if rng.IntN(3) == 0 {
			c.TargetPerReplica = float64(rng.IntN(200)) / 3
		}
		s := Sample{Ready: rng.IntN(12)}
		for range rng.IntN(5) {
			s.Utilization = append(s.Utilization, float64(rng.IntN(1000))/997)
		}
		if rng.IntN(2) == 0 {
			s.Load = load(float64(rng.IntN(5000)) / 7)
		}
		got := Recommend(c, s)
		// The rule as it was written with fmt.
		cd := c.withDefaults()
		var reasons []string
		desired := -1
		consider := func(name string, observed, target float64) {
			if target <= 0 || s.Ready <= 0 {
				return
			}
			d, ratio := s.Ready, observed/target
			if math.Abs(ratio-1) > cd.Tolerance {
				d = int(math.Ceil(float64(s.Ready) * ratio))
			}
			reasons = append(reasons, fmt.Sprintf("%s %.3g vs target %.3g → %d", name, observed, target, d))
			desired = max(desired, d)
		}
		if cd.TargetUtilization > 0 && len(s.Utilization) > 0 {
			sum := 0.0
			for _, u := range s.Utilization {
				sum += u
			}
			consider("GPU utilisation", sum/float64(len(s.Utilization)), cd.TargetUtilization)
		}
		if cd.TargetPerReplica > 0 && s.Load != nil {
			if s.Ready <= 0 {
				d := int(math.Ceil(*s.Load / cd.TargetPerReplica))
				reasons = append(reasons, fmt.Sprintf("load %.3g with no ready replica → %d", *s.Load, d))
				desired = max(desired, d)
			} else {
				consider("load per replica", *s.Load/float64(s.Ready), cd.TargetPerReplica)
			}
		}
		if desired < 0 {
			desired = max(s.Ready, cd.Min)
			reasons = append(reasons, "no load figures: keep")
		}
		if up := max(cd.MaxScaleUpStep, s.Ready); s.Ready > 0 && desired > s.Ready+up {
			reasons = append(reasons, fmt.Sprintf("scale up limited to +%d", up))
		}
		if want := strings.Join(reasons, "; "); got.Reason != want {
			t.Fatalf("case %d (%+v, %+v): reason %q, want %q", i, c, s, got.Reason, want)
		}
		a := New(c, rng.IntN(20))
		s.At = time.Unix(int64(i), 0)
		d := a.Observe(s)
		want := Recommend(c, s).Reason
		if d.Desired != Recommend(c, s).Desired {
			want += fmt.Sprintf("; stabilised at %d", d.Desired)
		}
		if d.Reason != want {
			t.Fatalf("case %d: observed reason %q, want %q", i, d.Reason, want)
		}
	}
}

// One autoscaler's reasons, sample after sample (its last reason handed out
// again while it reads the same), are Recommend's with the stabilisation.
func TestObserveReasonsSampleAfterSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 7))
	c := Config{Min: 1, Max: 30, TargetUtilization: 0.6, ScaleDownWindow: 5 * time.Minute}
	a := New(c, 4)
	for i := range 2000 {
		s := Sample{At: time.Unix(int64(60*i), 0), Ready: 1 + rng.IntN(3)}
		for range s.Ready {
			s.Utilization = append(s.Utilization, float64(rng.IntN(4))/3)
		}
		r := Recommend(c, s)
		d := a.Observe(s)
		want := r.Reason
		if d.Desired != r.Desired {
			want += fmt.Sprintf("; stabilised at %d", d.Desired)
		}
		if d.Reason != want {
			t.Fatalf("sample %d: reason %q, want %q", i, d.Reason, want)
		}
	}
}
