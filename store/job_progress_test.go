package store

import (
	"errors"
	"testing"
	"time"
)

func TestJobProgress(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		b, err := s.Broker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.JobProgress(ctx, "train"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("progress before any report: %v, want ErrNotFound", err)
		}
		rep := ProgressRecord{Workload: "train", Instance: "i-1", Done: 0.42, Step: 4200, ETA: 90 * time.Minute, ReportedAt: t0}
		for _, tc := range []struct {
			name   string
			rec    ProgressRecord
			stored bool
			want   float64
		}{
			{"first report", rep, true, 0.42},
			{"the same report again (retry)", rep, false, 0.42},
			{"an older report arriving late", ProgressRecord{Workload: "train", Instance: "i-1", Done: 0.40, ReportedAt: t0.Add(-time.Minute)}, false, 0.42},
			{"a newer report", ProgressRecord{Workload: "train", Instance: "i-1", Done: 0.5, ReportedAt: t0.Add(time.Minute)}, true, 0.5},
			{"lower after a restart from a checkpoint", ProgressRecord{Workload: "train", Instance: "i-2", Done: 0.45, ReportedAt: t0.Add(2 * time.Minute)}, true, 0.45},
		} {
			stored, err := b.RecordProgress(ctx, tc.rec, t0.Add(time.Hour))
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if stored != tc.stored {
				t.Errorf("%s: stored = %v, want %v", tc.name, stored, tc.stored)
			}
			got, err := b.JobProgress(ctx, "train")
			if err != nil {
				t.Fatal(err)
			}
			if got.Done != tc.want {
				t.Errorf("%s: done = %v, want %v", tc.name, got.Done, tc.want)
			}
		}
		got, _ := b.JobProgress(ctx, "train")
		if got.Instance != "i-2" || !got.ReportedAt.Equal(t0.Add(2*time.Minute)) || got.Step != 0 || got.ETA != 0 {
			t.Errorf("stored %+v", got)
		}
		for _, bad := range []ProgressRecord{{Workload: "", Done: 0.1, ReportedAt: t0}, {Workload: "x", Done: 1.5, ReportedAt: t0}, {Workload: "x", Done: -0.1, ReportedAt: t0}} {
			if _, err := b.RecordProgress(ctx, bad, t0); err == nil {
				t.Errorf("RecordProgress(%+v) accepted", bad)
			}
		}
		// The first report's step and ETA round-trip.
		if _, err := b.RecordProgress(ctx, ProgressRecord{Workload: "eval", Done: 1, Step: 7, ETA: 30 * time.Second, ReportedAt: t0}, t0); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.JobProgress(ctx, "eval"); got.Step != 7 || got.ETA != 30*time.Second || got.Done != 1 {
			t.Errorf("eval progress %+v", got)
		}
	})
}
