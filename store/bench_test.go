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
