package store

import (
	"context"
	"fmt"
	"math"
	"time"

	"gorm.io/gorm/clause"
)

// ShortfallRecord is time an inference service spent below its target,
// charged at one decision tick of the live hedging stage: the error budget
// of the service's availability goal (docs/fleet.md) is its goal's share
// of the window less these. Kept in the store, a new leader continues the
// budget where the old one left it.
type ShortfallRecord struct {
	Workload string
	// At is the start of the tick the shortfall was charged at, on the
	// wall clock's tick grid (a multiple of the tick since the Unix
	// epoch), so two replicas charging the same tick write the same row.
	At time.Time
	// Seconds below target charged there (the ticks since the service's
	// decision before, when passes are slower than the tick).
	Seconds float64
}

// shortfallRow is one charged tick of one service.
type shortfallRow struct {
	Workload string    `gorm:"primaryKey;size:128"`
	At       time.Time `gorm:"primaryKey"`
	Seconds  float64
}

func (shortfallRow) TableName() string { return "fleet_service_shortfall" }

// ShortfallKeep is how long shortfall rows are kept (Prune): the longest
// availability window a policy may give (policy.MaxAvailabilityWindow; a
// fleet test holds the two equal, the store does not import the policy).
const ShortfallKeep = 90 * 24 * time.Hour

// RecordShortfall stores ticks below target. A tick already stored keeps
// its first record: a deposed leader still planning, or a pass retried
// after a lost answer, charges it once.
func (s *Fleet) RecordShortfall(ctx context.Context, recs []ShortfallRecord) error {
	if len(recs) == 0 {
		return nil
	}
	rows := make([]shortfallRow, 0, len(recs))
	for _, r := range recs {
		if r.Workload == "" || !(r.Seconds > 0) || math.IsInf(r.Seconds, 0) {
			return fmt.Errorf("recording shortfall: bad record %q at %s: %v s", r.Workload, r.At.UTC().Format(time.RFC3339), r.Seconds)
		}
		rows = append(rows, shortfallRow{Workload: r.Workload, At: r.At.UTC(), Seconds: r.Seconds})
	}
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 500).Error
	if err != nil {
		return fmt.Errorf("recording shortfall of %d ticks: %w", len(rows), err)
	}
	return nil
}

// Shortfall returns a service's records at or after since, oldest first.
func (s *Fleet) Shortfall(ctx context.Context, workload string, since time.Time) ([]ShortfallRecord, error) {
	var rows []shortfallRow
	err := s.db.WithContext(ctx).Where("workload = ? AND at >= ?", workload, since.UTC()).Order("at").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("reading the shortfall of %s: %w", workload, err)
	}
	out := make([]ShortfallRecord, len(rows))
	for i, r := range rows {
		out[i] = ShortfallRecord{Workload: r.Workload, At: r.At.UTC(), Seconds: r.Seconds}
	}
	return out, nil
}
