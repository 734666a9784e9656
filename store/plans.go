package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// PlanRecord is a plan as the leader stored it, so that every replica
// serves the same plan (and the fleet controller reads the same one). The
// plan and budgets are stored as the JSON the API serves; the store does not
// interpret them.
type PlanRecord struct {
	// Name says which plan: CurrentPlan for the loaded policy's.
	Name string
	// Policy is the policy file the plan was made from.
	Policy  string
	Plan    json.RawMessage
	Budgets json.RawMessage
	CostUSD float64
	// CatalogAt is the catalog's GeneratedAt when the plan was made.
	CatalogAt time.Time
	PlannedAt time.Time
	// Holder and Epoch are the leader that stored it.
	Holder string
	Epoch  int64
}

// CurrentPlan names the plan of the policy the broker was started with.
const CurrentPlan = "current"

// ErrNotLeader is returned by SavePlan when the caller no longer holds the
// lease it claims: a deposed leader must not overwrite its successor's plan.
var ErrNotLeader = errors.New("not the leader")

type planRow struct {
	Name      string `gorm:"primaryKey;size:64"`
	Policy    string `gorm:"size:1024"`
	Plan      string
	Budgets   string
	CostUSD   float64
	CatalogAt time.Time
	PlannedAt time.Time
	Holder    string `gorm:"size:128"`
	Epoch     int64
}

func (planRow) TableName() string { return "broker_plans" }

// SavePlan stores p under p.Name, replacing the previous plan of that name.
// When leaseName is not empty, the write happens only if p.Holder holds that
// lease with p.Epoch and it has not expired at now; otherwise ErrNotLeader.
func (b *Broker) SavePlan(ctx context.Context, leaseName string, p PlanRecord, now time.Time) error {
	row := planRow{Name: p.Name, Policy: p.Policy, Plan: string(p.Plan), Budgets: string(p.Budgets), CostUSD: p.CostUSD,
		CatalogAt: p.CatalogAt.UTC(), PlannedAt: p.PlannedAt.UTC(), Holder: p.Holder, Epoch: p.Epoch}
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if leaseName != "" {
			var n int64
			err := tx.Model(&leaseRow{}).Where("name = ? AND holder = ? AND epoch = ? AND expires > ?", leaseName, p.Holder, p.Epoch, now).
				Count(&n).Error
			if err != nil {
				return err
			}
			if n == 0 {
				return ErrNotLeader
			}
		}
		return tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error
	})
	if err != nil {
		return fmt.Errorf("storing plan %q: %w", p.Name, err)
	}
	return nil
}

// LoadPlan returns the stored plan name, or ErrNotFound.
func (b *Broker) LoadPlan(ctx context.Context, name string) (PlanRecord, error) {
	var row planRow
	if err := b.db.WithContext(ctx).Limit(1).Find(&row, "name = ?", name).Error; err != nil {
		return PlanRecord{}, fmt.Errorf("reading plan %q: %w", name, err)
	}
	if row.Name == "" {
		return PlanRecord{}, fmt.Errorf("plan %q: %w", name, ErrNotFound)
	}
	return PlanRecord{Name: row.Name, Policy: row.Policy, Plan: rawOrNil(row.Plan), Budgets: rawOrNil(row.Budgets),
		CostUSD: row.CostUSD, CatalogAt: row.CatalogAt.UTC(), PlannedAt: row.PlannedAt.UTC(), Holder: row.Holder,
		Epoch: row.Epoch}, nil
}
