package store

// This file holds what the fleet tables share: the lease fence every
// reconciler write passes, and the one transaction that applies a batch of
// fleet changes. The tables themselves are fleet_slots.go,
// fleet_intents.go, fleet_instances.go and fleet_settings.go.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrFenced means the writer no longer holds the leader lease (or its epoch
// moved on): a deposed leader's write is refused, so two leaders can never
// both record a launch.
var ErrFenced = errors.New("fenced: this replica no longer holds the leader lease")

// Fence identifies the lease term a write belongs to. The zero Fence
// disables the check (single-process tests and tools only).
type Fence struct {
	Lease  string
	Holder string
	Epoch  int64
	Now    time.Time
}

func checkFence(tx *gorm.DB, f Fence) error {
	if f.Lease == "" {
		return nil
	}
	var n int64
	err := tx.Model(&leaseRow{}).Where("name = ? AND holder = ? AND epoch = ? AND expires > ?", f.Lease, f.Holder, f.Epoch, f.Now).
		Count(&n).Error
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w (lease %s, epoch %d)", ErrFenced, f.Lease, f.Epoch)
	}
	return nil
}

// Fleet is the fleet reconciler's persistence: slots, launch intents, the
// instances seen in the clouds, settings. It shares the broker's
// connection pool and its events table.
type Fleet struct {
	db *gorm.DB
}

// Fleet returns the fleet tables' store. Open migrated them with every
// other table, under the one schema version.
func (b *Broker) Fleet(_ context.Context) (*Fleet, error) {
	return &Fleet{db: b.db}, nil
}

// FleetChanges is one batch of fleet writes, applied atomically.
type FleetChanges struct {
	Slots       []SlotRecord
	DeleteSlots []string
	Intents     []IntentRecord
	Instances   []FleetInstanceRecord
	// DeleteInstances forgets instances (gone from the cloud's listing) and
	// retires their launched intents.
	DeleteInstances []string
	// DoneReplacements forgets the replacement requests of these
	// instances (replaced, or no longer in the fleet).
	DoneReplacements []string
	Events           []EventRecord
}

// Empty reports whether there is nothing to write.
func (c *FleetChanges) Empty() bool {
	return len(c.Slots)+len(c.DeleteSlots)+len(c.Intents)+len(c.Instances)+len(c.DeleteInstances)+len(c.DoneReplacements)+len(c.Events) == 0
}

// batch is the rows per INSERT: under PostgreSQL's 65535 bind parameters
// with the widest row.
const batch = 500

// Apply writes c in one transaction after checking the fence; ErrFenced
// (wrapped) when the lease term is over, and then nothing is written.
func (s *Fleet) Apply(ctx context.Context, f Fence, c FleetChanges) error {
	if c.Empty() {
		return nil
	}
	now := f.Now
	if now.IsZero() {
		now = time.Now()
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := checkFence(tx, f); err != nil {
			return err
		}
		if len(c.Slots) > 0 {
			rows := make([]slotRow, len(c.Slots))
			for i, r := range c.Slots {
				rows[i] = slotToRow(r)
			}
			if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(rows, batch).Error; err != nil {
				return fmt.Errorf("slots: %w", err)
			}
		}
		if len(c.DeleteSlots) > 0 {
			if err := tx.Where("id IN ?", c.DeleteSlots).Delete(&slotRow{}).Error; err != nil {
				return fmt.Errorf("deleting slots: %w", err)
			}
		}
		if len(c.Intents) > 0 {
			rows := make([]intentRow, len(c.Intents))
			for i, r := range c.Intents {
				rows[i] = intentToRow(r)
			}
			if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(rows, batch).Error; err != nil {
				if isUniqueViolation(err) {
					return fmt.Errorf("launch intents: %w", ErrConflict)
				}
				return fmt.Errorf("launch intents: %w", err)
			}
		}
		if len(c.Instances) > 0 {
			rows := make([]fleetInstanceRow, len(c.Instances))
			for i, r := range c.Instances {
				rows[i] = fleetInstanceToRow(r)
			}
			if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(rows, batch).Error; err != nil {
				return fmt.Errorf("fleet instances: %w", err)
			}
		}
		if len(c.DeleteInstances) > 0 {
			for i := 0; i < len(c.DeleteInstances); i += batch {
				ids := c.DeleteInstances[i:min(i+batch, len(c.DeleteInstances))]
				if err := tx.Where("id IN ?", ids).Delete(&fleetInstanceRow{}).Error; err != nil {
					return fmt.Errorf("deleting fleet instances: %w", err)
				}
				// Their launched intents retire: nothing needs them any more.
				if err := tx.Model(&intentRow{}).Where("instance_id IN ? AND state = ?", ids, IntentLaunched).
					Updates(map[string]any{"state": IntentRetired, "updated_at": now.UTC()}).Error; err != nil {
					return fmt.Errorf("retiring launch intents: %w", err)
				}
			}
		}
		if len(c.DoneReplacements) > 0 {
			if err := tx.Where("instance IN ?", c.DoneReplacements).Delete(&replaceRow{}).Error; err != nil {
				return fmt.Errorf("replacement requests: %w", err)
			}
		}
		if len(c.Events) > 0 {
			rows := make([]eventRow, len(c.Events))
			for i, ev := range c.Events {
				rows[i] = eventRow{At: ev.At, Kind: ev.Kind, Instance: ev.Instance, Workload: ev.Workload, Message: ev.Message, Data: string(ev.Data)}
			}
			if err := tx.CreateInBatches(rows, batch).Error; err != nil {
				return fmt.Errorf("events: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("recording fleet changes: %w", err)
	}
	return nil
}

// FleetState is everything the reconciler reads at the start of a pass.
type FleetState struct {
	Slots     []SlotRecord
	Intents   []IntentRecord
	Instances []FleetInstanceRecord
}

// Load reads the slots, the launch intents still unresolved (open or
// failed: launched ones are settled, their instance is recorded) and the
// recorded instances.
func (s *Fleet) Load(ctx context.Context) (FleetState, error) {
	var st FleetState
	db := s.db.WithContext(ctx)
	var slots []slotRow
	if err := db.Order("id").Find(&slots).Error; err != nil {
		return st, fmt.Errorf("reading slots: %w", err)
	}
	var intents []intentRow
	if err := db.Where("state IN ?", []string{IntentOpen, IntentFailed}).Order("token").Find(&intents).Error; err != nil {
		return st, fmt.Errorf("reading launch intents: %w", err)
	}
	var insts []fleetInstanceRow
	if err := db.Order("id").Find(&insts).Error; err != nil {
		return st, fmt.Errorf("reading fleet instances: %w", err)
	}
	st.Slots = make([]SlotRecord, len(slots))
	for i, r := range slots {
		st.Slots[i] = r.record()
	}
	st.Intents = make([]IntentRecord, len(intents))
	for i, r := range intents {
		st.Intents[i] = r.record()
	}
	st.Instances = make([]FleetInstanceRecord, len(insts))
	for i, r := range insts {
		st.Instances[i] = r.record()
	}
	return st, nil
}

func tptr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
