package notice_test

import (
	"context"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent/notice"
)

func TestBackoffBounds(t *testing.T) {
	b := notice.Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	prevHi := time.Duration(0)
	for i := range 40 {
		d := b.Next()
		hi := min(100*time.Millisecond<<min(i, 20), time.Second)
		if d < hi/2 || d > hi {
			t.Fatalf("attempt %d: %v outside [%v, %v]", i, d, hi/2, hi)
		}
		if hi < prevHi {
			t.Fatalf("ceiling shrank")
		}
		prevHi = hi
	}
	b.Reset()
	if d := b.Next(); d > 100*time.Millisecond {
		t.Fatalf("after Reset: %v", d)
	}
	var zero notice.Backoff
	if d := zero.Next(); d < 100*time.Millisecond || d > 200*time.Millisecond {
		t.Fatalf("zero value: %v, want 100..200ms", d)
	}
}

func TestSeenIsBounded(t *testing.T) {
	s := notice.NewSeen(2)
	if !s.Add("a") || s.Add("a") || !s.Add("b") {
		t.Fatal("first adds")
	}
	s.Add("c") // evicts a
	if s.Add("b") || s.Add("c") {
		t.Fatal("recent IDs forgotten")
	}
	if !s.Add("a") {
		t.Fatal("oldest ID kept beyond the bound")
	}
}

func TestKinds(t *testing.T) {
	for k, want := range map[notice.Kind]bool{notice.KindPreempt: true, notice.KindTerminate: true, notice.KindStop: true,
		notice.KindHibernate: true, notice.KindRebalance: false, notice.KindMaintenance: false} {
		if k.Terminal() != want {
			t.Errorf("%s.Terminal() = %v", k, !want)
		}
	}
}

func TestRawJSON(t *testing.T) {
	if got := string(notice.RawJSON([]byte(`{"a":1}`))); got != `{"a":1}` {
		t.Errorf("json kept: %s", got)
	}
	if got := string(notice.RawJSON([]byte("TRUE"))); got != `"TRUE"` {
		t.Errorf("text quoted: %s", got)
	}
}

func TestSleepAndEmitStopOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if notice.Sleep(ctx, time.Hour) {
		t.Fatal("Sleep returned true on a cancelled context")
	}
	if notice.Emit(ctx, make(chan notice.Notice), notice.Notice{}) {
		t.Fatal("Emit sent on a cancelled context with no reader")
	}
}
