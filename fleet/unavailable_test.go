package fleet

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// TestUnavailableBackoff: blocks double when a pool fails again soon after
// its last block ends, also when it launched in between but refused again
// within the first back-off (it holds fewer instances than asked for), and
// start again from the first back-off once a launch has held that long.
func TestUnavailableBackoff(t *testing.T) {
	k := providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "g4dn.xlarge", Capacity: pricing.Spot}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	type step struct {
		at     time.Duration // from t0
		clear  bool          // a launch succeeded; else a refusal
		want   time.Duration // the block's length (refusals)
		reason string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"repeats double up to the cap", []step{
			{at: 0, want: 3 * time.Minute},
			{at: 4 * time.Minute, want: 6 * time.Minute},
			{at: 11 * time.Minute, want: 12 * time.Minute},
			{at: 24 * time.Minute, want: 24 * time.Minute},
			{at: 49 * time.Minute, want: 48 * time.Minute},
			{at: 98 * time.Minute, want: time.Hour},
		}},
		{"a quiet back-off starts over", []step{
			{at: 0, want: 3 * time.Minute},
			{at: 4 * time.Minute, want: 6 * time.Minute},
			{at: 30 * time.Minute, want: 3 * time.Minute},
		}},
		{"launch one, refuse the rest: keeps backing off", []step{
			{at: 0, want: 3 * time.Minute},
			{at: 3 * time.Minute, clear: true},
			{at: 3 * time.Minute, want: 6 * time.Minute},
			{at: 9 * time.Minute, clear: true},
			{at: 10 * time.Minute, want: 12 * time.Minute},
		}},
		{"a launch that held starts over", []step{
			{at: 0, want: 3 * time.Minute},
			{at: 4 * time.Minute, want: 6 * time.Minute},
			{at: 10 * time.Minute, clear: true},
			{at: 2 * time.Hour, want: 3 * time.Minute, reason: "preempted two hours later"},
		}},
		{"a launch unblocks at once", []step{
			{at: 0, want: 3 * time.Minute},
			{at: time.Minute, clear: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u Unavailable
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				if s.clear {
					v := u.Version()
					u.Clear(k, now)
					if u.Blocked(k, now) {
						t.Fatalf("step %d: still blocked after a launch", i)
					}
					if s.at < 3*time.Minute && u.Version() == v {
						t.Fatalf("step %d: unblocking did not change the version (plans would not see it)", i)
					}
					continue
				}
				until := u.Block(k, "capacity", now)
				if got := until.Sub(now); got != s.want {
					t.Fatalf("step %d at %s: blocked for %s, want %s %s", i, s.at, got, s.want, s.reason)
				}
				if !u.Blocked(k, now) || u.Blocked(k, until) {
					t.Fatalf("step %d: blocked %v at now, %v at its end", i, u.Blocked(k, now), u.Blocked(k, until))
				}
			}
		})
	}
}

func TestUnavailableLimit(t *testing.T) {
	k := providers.PoolKey{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "g4dn.xlarge", Capacity: pricing.Spot}
	other := k
	other.Zone = "us-east-1b"
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	u := &Unavailable{}
	v := u.Version()
	u.Limit(k, 3, t0)
	if u.Version() == v {
		t.Error("a new limit must change the version (the plan source re-plans on it)")
	}
	u.Limit(k, 5, t0.Add(time.Minute)) // a larger figure does not raise it
	u.Limit(k, 0, t0.Add(time.Minute)) // nothing learned
	fn := u.LimitFunc(t0.Add(2 * time.Minute))
	o := pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", Zone: "us-east-1a", InstanceType: "g4dn.xlarge"}
	for _, tc := range []struct {
		name string
		got  int
		want int
	}{
		{"limit", u.LimitOf(k, t0.Add(30*time.Minute)), 3},
		{"other pool", u.LimitOf(other, t0), 0},
		{"hook", fn(&o, pricing.Spot), 3},
		{"hook, on demand", fn(&o, pricing.OnDemand), 0},
		{"an hour after the last refusal", u.LimitOf(k, t0.Add(61*time.Minute)), 0},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, tc.got, tc.want)
		}
	}
	u.Limit(k, 2, t0.Add(2*time.Hour))
	if got := u.LimitOf(k, t0.Add(2*time.Hour)); got != 2 {
		t.Errorf("after the old limit expired: %d, want the new 2", got)
	}
}

// TestBlockMemoFollowsTheCache: answers through a blockMemo, refreshed by
// Gen, equal Reason's after any sequence of blocks and clears (a clear of
// a pool not blocked at now moves no Version, but moves Gen), at times
// before, at and after each block's end.
func TestBlockMemoFollowsTheCache(t *testing.T) {
	pools := []providers.PoolKey{
		{Cloud: pricing.AWS, Zone: "us-east-1a", InstanceType: "g4dn.xlarge", Capacity: pricing.Spot},
		{Cloud: pricing.AWS, Zone: "us-east-1b", InstanceType: "g4dn.xlarge", Capacity: pricing.Spot},
		{Cloud: pricing.GCP, Zone: "us-central1-a", InstanceType: "g2-standard-4", Capacity: pricing.OnDemand},
	}
	offers := make([]pricing.Offer, len(pools))
	for i, p := range pools {
		offers[i] = pricing.Offer{Cloud: p.Cloud, Region: "a-region", Zone: p.Zone, InstanceType: p.InstanceType} // (the zone names the pool)
	}
	rng := rand.New(rand.NewPCG(7, 13))
	u := &Unavailable{}
	memos, offerMemos := make([]blockMemo, len(pools)), make([]blockMemo, len(pools))
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	reasons := []string{"capacity", "quota", "preempted"}
	for step := range 5000 {
		k := rng.IntN(len(pools))
		switch rng.IntN(4) {
		case 0:
			u.Block(pools[k], reasons[rng.IntN(len(reasons))], now)
		case 1:
			u.Clear(pools[k], now)
		}
		now = now.Add(time.Duration(rng.IntN(240)) * time.Second)
		gen := u.Gen()
		for i, p := range pools {
			wr, wu, wok := u.Reason(p, now)
			gr, gu, gok := u.blockedMemo(p, &memos[i], gen, now)
			if gr != wr || !gu.Equal(wu) || gok != wok {
				t.Fatalf("step %d, pool %d: memo says (%q, %s, %v), the cache (%q, %s, %v)", step, i, gr, gu, gok, wr, wu, wok)
			}
			if got := u.offerBlocked(&offers[i], p.Capacity, &offerMemos[i], gen, now); got != wok {
				t.Fatalf("step %d, pool %d: offerBlocked says %v, the cache %v", step, i, got, wok)
			}
		}
	}
	var m blockMemo
	if _, _, ok := (*Unavailable)(nil).blockedMemo(pools[0], &m, 0, now); ok {
		t.Fatal("a nil cache blocks nothing")
	}
	if (*Unavailable)(nil).offerBlocked(&offers[0], pricing.Spot, &m, 0, now) {
		t.Fatal("a nil cache blocks no offer")
	}
}
