package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// SpendEntry is one instance's spend on one UTC day, as the ledger job
// computed it (fleet/ledger): billed seconds × the price of its pool, and the
// on-demand cost of the same time.
type SpendEntry struct {
	Day       time.Time
	Instance  string
	Workload  string
	Team      string
	Cloud     string
	Capacity  string
	Seconds   float64
	Cost      float64
	OnDemand  float64
	UpdatedAt time.Time
}

type spendRow struct {
	Instance  string    `gorm:"primaryKey;size:256"`
	Day       time.Time `gorm:"primaryKey;index"`
	Workload  string    `gorm:"size:128;index"`
	Team      string    `gorm:"size:128"`
	Cloud     string    `gorm:"size:16"`
	Capacity  string    `gorm:"size:16"`
	Seconds   float64
	Cost      float64
	OnDemand  float64
	UpdatedAt time.Time
}

func (spendRow) TableName() string { return "spend_ledger" }

// UpsertSpend writes entries, replacing what the ledger wrote before for
// the same instance and day (a running instance's day grows until it ends).
// All entries are written in one transaction, or none.
func (b *Broker) UpsertSpend(ctx context.Context, entries []SpendEntry) error {
	if len(entries) == 0 {
		return nil
	}
	rows := make([]spendRow, len(entries))
	for i, e := range entries {
		rows[i] = spendRow{Instance: e.Instance, Day: e.Day.UTC(), Workload: e.Workload, Team: e.Team, Cloud: e.Cloud,
			Capacity: e.Capacity, Seconds: e.Seconds, Cost: e.Cost, OnDemand: e.OnDemand, UpdatedAt: e.UpdatedAt.UTC()}
	}
	err := b.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "instance"}, {Name: "day"}},
		DoUpdates: clause.AssignmentColumns([]string{"workload", "team", "cloud", "capacity", "seconds", "cost", "on_demand", "updated_at"}),
	}).CreateInBatches(rows, 500).Error
	if err != nil {
		return fmt.Errorf("store: saving spend: %w", err)
	}
	return nil
}

// ListSpend returns the entries of days in [since, until), oldest first.
func (b *Broker) ListSpend(ctx context.Context, since, until time.Time) ([]SpendEntry, error) {
	var rows []spendRow
	q := b.db.WithContext(ctx).Where("day >= ?", since.UTC().Truncate(24*time.Hour))
	if !until.IsZero() {
		q = q.Where("day < ?", until.UTC())
	}
	if err := q.Order("day, instance").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: reading spend: %w", err)
	}
	out := make([]SpendEntry, len(rows))
	for i, r := range rows {
		out[i] = SpendEntry{Day: r.Day.UTC(), Instance: r.Instance, Workload: r.Workload, Team: r.Team, Cloud: r.Cloud,
			Capacity: r.Capacity, Seconds: r.Seconds, Cost: r.Cost, OnDemand: r.OnDemand, UpdatedAt: r.UpdatedAt.UTC()}
	}
	return out, nil
}
