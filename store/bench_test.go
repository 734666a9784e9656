package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// BenchmarkSaveOffers saves one region of 1,000 offers, as a large AWS
// region refresh would: first with every spot price changed (1,000 points),
// then unchanged (no points).
func BenchmarkSaveOffers(b *testing.B) {
	for _, changed := range []bool{true, false} {
		b.Run(fmt.Sprintf("sqlite/1000-offers/changed=%v", changed), func(b *testing.B) {
			s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			offers := make([]pricing.Offer, 1000)
			for i := range offers {
				offers[i] = offer("us-east-1", fmt.Sprintf("us-east-1%c", 'a'+i%6), fmt.Sprintf("p%d.48xlarge", i), 98.32, 30, time.Time{})
			}
			at := t0
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				at = at.Add(time.Hour)
				if changed {
					for j := range offers {
						offers[j].SpotPrice = 30 + float64(i%7)
					}
				}
				if _, err := s.SaveOffers(b.Context(), pricing.AWS, "us-east-1", offers, at); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHeartbeats measures the broker's hottest write on SQLite with
// the chosen synchronous=FULL against NORMAL: one heartbeat per
// transaction (each commit pays its own fsync under FULL) and a group
// commit of 256 heartbeats (one fsync shared by all of them).
func BenchmarkHeartbeats(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, batch := range []int{1, 256} {
			b.Run(fmt.Sprintf("sqlite/synchronous=%s/batch=%d", sync, batch), func(b *testing.B) {
				saved := sqlitePragmas
				sqlitePragmas = append(append([]string(nil), saved[:len(saved)-1]...), "synchronous("+sync+")")
				defer func() { sqlitePragmas = saved }()
				s, err := Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), nil)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				br, _ := s.Broker(b.Context())
				ups := make([]HeartbeatUpdate, batch)
				for i := range ups {
					id := fmt.Sprintf("i-%04d", i)
					if _, err := br.RegisterAgent(b.Context(), InstanceRecord{ID: id, Cloud: "aws"}, "h"+id, t0); err != nil {
						b.Fatal(err)
					}
					ups[i] = HeartbeatUpdate{Instance: id, Load1: 1, Telemetry: []byte(`[{"index":0,"util_gpu_pct":50}]`)}
				}
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					for j := range ups {
						ups[j].At = t0.Add(time.Duration(i) * time.Second)
					}
					if _, err := br.Heartbeats(b.Context(), ups); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch)/1e3, "µs/heartbeat")
			})
		}
	}
}
