package store

import (
	"testing"
	"time"
)

// TestShortfall: a service's ticks below target are stored once per tick
// (a second replica charging the same tick changes nothing), read back
// oldest first from a time on, and pruned once older than any window.
func TestShortfall(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		b, err := s.Broker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := b.Fleet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		recs := []ShortfallRecord{
			{Workload: "chat", At: t0.Add(2 * time.Minute), Seconds: 60},
			{Workload: "chat", At: t0, Seconds: 30},
			{Workload: "embed", At: t0, Seconds: 60},
			{Workload: "chat", At: t0.Add(-100 * 24 * time.Hour), Seconds: 60},
		}
		if err := f.RecordShortfall(ctx, recs); err != nil {
			t.Fatal(err)
		}
		// The same tick again, as a deposed leader would charge it.
		if err := f.RecordShortfall(ctx, []ShortfallRecord{{Workload: "chat", At: t0, Seconds: 60}}); err != nil {
			t.Fatal(err)
		}
		got, err := f.Shortfall(ctx, "chat", t0.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !got[0].At.Equal(t0) || got[0].Seconds != 30 || !got[1].At.Equal(t0.Add(2*time.Minute)) || got[1].Seconds != 60 {
			t.Fatalf("chat's shortfall since an hour before: %+v; want 30 s at t0 (the first record of the tick) and 60 s two minutes later", got)
		}
		for _, bad := range [][]ShortfallRecord{{{Workload: "", At: t0, Seconds: 1}}, {{Workload: "x", At: t0, Seconds: 0}}, {{Workload: "x", At: t0, Seconds: -1}}} {
			if err := f.RecordShortfall(ctx, bad); err == nil {
				t.Errorf("RecordShortfall(%+v) accepted", bad)
			}
		}
		res, err := s.Prune(ctx, Retention{}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if res.Shortfall != 1 {
			t.Errorf("pruned %d shortfall rows, want the one 100 days old", res.Shortfall)
		}
		if all, _ := f.Shortfall(ctx, "chat", time.Time{}); len(all) != 2 {
			t.Errorf("chat's rows after pruning: %+v", all)
		}
		if e, _ := f.Shortfall(ctx, "embed", time.Time{}); len(e) != 1 {
			t.Errorf("embed's rows: %+v", e)
		}
	})
}
