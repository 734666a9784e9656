package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Retention says how long the two ever-growing tables keep their rows. A
// zero duration keeps rows for ever.
type Retention struct {
	// PriceHistory is how long price points are kept. The newest point of
	// each offer and capacity type is kept however old it is, so an offer's
	// history never loses its current price.
	PriceHistory time.Duration
	// Events is how long broker events are kept. An agent report older than
	// this can no longer be recognised as a repeat by its Idempotency-Key,
	// so keep events longer than any agent spools reports.
	Events time.Duration
}

// PruneResult says what one Prune removed.
type PruneResult struct {
	PricePoints int64
	Events      int64
}

// pruneBatch bounds the rows one DELETE removes, so pruning a large backlog
// never holds a long lock that heartbeats and saves would queue behind.
const pruneBatch = 5000

// Prune deletes price points and events older than r allows at now, in
// batches of pruneBatch rows, each its own transaction.
func (s *Store) Prune(ctx context.Context, r Retention, now time.Time) (PruneResult, error) {
	var res PruneResult
	if r.PriceHistory > 0 {
		cut := now.Add(-r.PriceHistory).UTC()
		// The newest point of each (offer, capacity) survives: ids are
		// assigned in insertion order and SaveOffers only appends newer
		// points, so the largest id is the newest.
		n, err := s.pruneBatches(ctx, `DELETE FROM price_points WHERE id IN (
			SELECT id FROM price_points WHERE observed_at < ? AND id NOT IN (
				SELECT MAX(id) FROM price_points GROUP BY offer_key, capacity)
			ORDER BY id LIMIT ?)`, cut)
		res.PricePoints = n
		if err != nil {
			return res, fmt.Errorf("pruning price history older than %s: %w", cut.Format(time.RFC3339), err)
		}
	}
	if r.Events > 0 {
		cut := now.Add(-r.Events).UTC()
		n, err := s.pruneBatches(ctx, `DELETE FROM broker_events WHERE id IN (
			SELECT id FROM broker_events WHERE at < ? ORDER BY id LIMIT ?)`, cut)
		res.Events = n
		if err != nil {
			return res, fmt.Errorf("pruning events older than %s: %w", cut.Format(time.RFC3339), err)
		}
	}
	return res, nil
}

func (s *Store) pruneBatches(ctx context.Context, q string, cut time.Time) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			r := tx.Exec(q, cut, pruneBatch)
			n = r.RowsAffected
			return r.Error
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}
