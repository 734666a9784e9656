package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAlertsActivateOnceClearAndReturn(t *testing.T) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) {
			b, err := open(t).Broker(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
			// Eight replicas race to activate one condition: exactly one wins.
			var wins atomic.Int32
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, err := b.ActivateAlert(t.Context(), "storm/aws/use1-az1/p5.48xlarge/spot", "preemption_storm", now)
					if err != nil {
						t.Error(err)
					}
					if ok {
						wins.Add(1)
					}
				}()
			}
			wg.Wait()
			if wins.Load() != 1 {
				t.Fatalf("%d replicas activated the alert, want 1", wins.Load())
			}
			if ok, _ := b.ActivateAlert(t.Context(), "storm/aws/use1-az1/p5.48xlarge/spot", "preemption_storm", now); ok {
				t.Error("an active alert activated again")
			}
			keys, err := b.ActiveAlerts(t.Context())
			if err != nil || len(keys) != 1 {
				t.Fatalf("active = %v, %v", keys, err)
			}
			if err := b.ClearAlert(t.Context(), keys[0], now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			if keys, _ := b.ActiveAlerts(t.Context()); len(keys) != 0 {
				t.Errorf("cleared alert still active: %v", keys)
			}
			if ok, err := b.ActivateAlert(t.Context(), "storm/aws/use1-az1/p5.48xlarge/spot", "preemption_storm", now.Add(2*time.Hour)); !ok || err != nil {
				t.Errorf("returning condition not activated: %v %v", ok, err)
			}
		})
	}
}
