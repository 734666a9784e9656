package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// storeProgress reads the progress jobs reported through their agents
// (POST /api/v1/agents/{id}/progress) for the live training stage.
type storeProgress struct{ b *store.Broker }

func (p storeProgress) JobProgress(ctx context.Context, workload string) (fleet.JobProgress, bool, error) {
	r, err := p.b.JobProgress(ctx, workload)
	if errors.Is(err, store.ErrNotFound) {
		return fleet.JobProgress{}, false, nil
	}
	if err != nil {
		return fleet.JobProgress{}, false, err
	}
	return fleet.JobProgress{Done: r.Done, At: r.ReportedAt}, true, nil
}

// speedRatios is each instance type's measured speed (agents' benchmarks,
// MeasuredSpeeds) against its spec-sheet speed, which the fleet's plan
// assumes: the training stage scales a job's estimated progress by it.
// The table is re-read at most every refresh.
type speedRatios struct {
	b       *store.Broker
	catalog func() *pricing.Catalog
	now     func() time.Time
	log     *slog.Logger
	refresh time.Duration

	mu    sync.Mutex
	table optimizer.SpeedTable
	at    time.Time
}

func (s *speedRatios) Ratio(cloud pricing.Cloud, instanceType string) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.at.IsZero() || now.Sub(s.at) >= s.refresh {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		t, err := MeasuredSpeeds(ctx, s.b, now)
		cancel()
		if err != nil {
			s.log.Warn("training stage: measured speeds unavailable; estimating progress at spec speed", "err", err)
		}
		s.table, s.at = t, now
	}
	cat := s.catalog()
	if cat == nil {
		return 1
	}
	for _, o := range cat.Offers() {
		if o.Cloud != cloud || o.InstanceType != instanceType {
			continue
		}
		measured, ok1 := s.table.RelativeSpeed(&o, o.GPU)
		spec, ok2 := optimizer.DefaultSpeeds().RelativeSpeed(&o, o.GPU)
		if ok1 && ok2 && spec > 0 {
			return measured / spec
		}
		break
	}
	return 1
}
