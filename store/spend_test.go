package store

import (
	"testing"
	"time"
)

func TestSpendUpsertAndList(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			b, err := open(t).Broker(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			d1 := time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC)
			d2 := d1.Add(24 * time.Hour)
			e := []SpendEntry{
				{Day: d1, Instance: "i-1", Workload: "w", Team: "t", Cloud: "aws", Capacity: "spot", Seconds: 3600, Cost: 4, OnDemand: 10},
				{Day: d2, Instance: "i-1", Workload: "w", Team: "t", Cloud: "aws", Capacity: "spot", Seconds: 1800, Cost: 2, OnDemand: 5},
			}
			if err := b.UpsertSpend(t.Context(), e); err != nil {
				t.Fatal(err)
			}
			// The running day grows: the same (instance, day) is replaced.
			e[1].Seconds, e[1].Cost, e[1].OnDemand = 7200, 8, 20
			if err := b.UpsertSpend(t.Context(), e[1:]); err != nil {
				t.Fatal(err)
			}
			got, err := b.ListSpend(t.Context(), d1, time.Time{})
			if err != nil || len(got) != 2 {
				t.Fatalf("list = %+v, %v", got, err)
			}
			if got[1].Cost != 8 || got[1].Seconds != 7200 || !got[1].Day.Equal(d2) {
				t.Errorf("upsert did not replace: %+v", got[1])
			}
			if got, _ := b.ListSpend(t.Context(), d2, time.Time{}); len(got) != 1 {
				t.Errorf("since d2: %+v", got)
			}
			if got, _ := b.ListSpend(t.Context(), d1, d2); len(got) != 1 || got[0].Cost != 4 {
				t.Errorf("[d1, d2): %+v", got)
			}
		})
	}
}
