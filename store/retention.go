package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Retention says how long the ever-growing tables keep their rows. A zero
// duration keeps rows for ever.
type Retention struct {
	// PriceHistory is how long price points are kept. The newest point of
	// each offer and capacity type is kept however old it is, so an offer's
	// history never loses its current price.
	PriceHistory time.Duration
	// Events is how long broker events are kept. An agent report older than
	// this can no longer be recognised as a repeat by its Idempotency-Key,
	// so keep events longer than any agent spools reports.
	Events time.Duration
	// Agents is how long an agent's instance record (broker_instances) is
	// kept after its last sign of life (last heartbeat, or registration
	// when it never sent one): the instance is long gone by then.
	Agents time.Duration
	// LaunchIntents is how long retired launch intents are kept. The
	// intent of each slot id's highest generation is kept however old it
	// is: a slot id that comes back continues from it, so no client token
	// is ever sent twice (docs/fleet.md).
	LaunchIntents time.Duration
}

// PruneResult says what one Prune removed.
type PruneResult struct {
	PricePoints   int64
	Events        int64
	Agents        int64
	LaunchIntents int64
	// Shortfall rows are kept ShortfallKeep, whatever the retention.
	Shortfall int64
}

// pruneBatch bounds the rows one DELETE removes, so pruning a large backlog
// never holds a long lock that heartbeats and saves would queue behind.
const pruneBatch = 5000

// Prune deletes price points, events, agent records and retired launch
// intents older than r allows at now, and services' shortfall older than
// ShortfallKeep, in batches of pruneBatch rows, each its own transaction.
func (s *Store) Prune(ctx context.Context, r Retention, now time.Time) (PruneResult, error) {
	var res PruneResult
	steps := []struct {
		keep time.Duration
		what string // "pruning <what> <cut>"
		// q deletes up to LIMIT rows older than the cut.
		q   string
		out *int64
	}{
		// The newest point of each (offer, capacity) survives: ids are
		// assigned in insertion order and SaveOffers only appends newer
		// points, so the largest id is the newest.
		{r.PriceHistory, "price history older than", `DELETE FROM price_points WHERE id IN (
			SELECT id FROM price_points WHERE observed_at < ? AND id NOT IN (
				SELECT MAX(id) FROM price_points GROUP BY offer_key, capacity)
			ORDER BY id LIMIT ?)`, &res.PricePoints},
		{r.Events, "events older than", `DELETE FROM broker_events WHERE id IN (
			SELECT id FROM broker_events WHERE at < ? ORDER BY id LIMIT ?)`, &res.Events},
		{r.Agents, "agents silent since before", `DELETE FROM broker_instances WHERE id IN (
			SELECT id FROM broker_instances WHERE COALESCE(last_heartbeat, registered_at) < ? ORDER BY id LIMIT ?)`, &res.Agents},
		// The highest generation of each slot id survives (see Retention).
		{r.LaunchIntents, "launch intents retired before", `DELETE FROM fleet_launch_intents WHERE token IN (
			SELECT i.token FROM fleet_launch_intents i WHERE i.state = 'retired' AND i.updated_at < ?
			AND i.generation < (SELECT MAX(j.generation) FROM fleet_launch_intents j WHERE j.slot_id = i.slot_id)
			ORDER BY i.token LIMIT ?)`, &res.LaunchIntents},
		// No availability window is longer (policy: availability.window).
		{ShortfallKeep, "services' shortfall older than", `DELETE FROM fleet_service_shortfall WHERE (workload, at) IN (
			SELECT workload, at FROM fleet_service_shortfall WHERE at < ? ORDER BY at LIMIT ?)`, &res.Shortfall},
	}
	for _, st := range steps {
		if st.keep <= 0 {
			continue
		}
		cut := now.Add(-st.keep).UTC()
		n, err := s.pruneBatches(ctx, st.q, cut)
		*st.out = n
		if err != nil {
			return res, fmt.Errorf("pruning %s %s: %w", st.what, cut.Format(time.RFC3339), err)
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
