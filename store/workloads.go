package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// WorkloadRecord is a workload registered through the API. Spec is the
// workload's definition as JSON, opaque to the store.
type WorkloadRecord struct {
	Name      string
	Team      string
	Kind      string
	Spec      json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
}

type workloadRow struct {
	Name      string `gorm:"primaryKey;size:128"`
	Team      string `gorm:"size:128"`
	Kind      string `gorm:"size:32"`
	Spec      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (workloadRow) TableName() string { return "broker_workloads" }

func (r workloadRow) record() WorkloadRecord {
	return WorkloadRecord{Name: r.Name, Team: r.Team, Kind: r.Kind, Spec: rawOrNil(r.Spec),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// CreateWorkload stores a new workload; ErrConflict when the name is taken.
func (b *Broker) CreateWorkload(ctx context.Context, w WorkloadRecord, now time.Time) (WorkloadRecord, error) {
	if err := checkText("workload", w.Name, w.Team, w.Kind, string(w.Spec)); err != nil {
		return WorkloadRecord{}, err
	}
	row := workloadRow{Name: w.Name, Team: w.Team, Kind: w.Kind, Spec: string(w.Spec), CreatedAt: now, UpdatedAt: now}
	if err := b.db.WithContext(ctx).Create(&row).Error; err != nil {
		if isUniqueViolation(err) {
			return WorkloadRecord{}, fmt.Errorf("workload %q: %w", w.Name, ErrConflict)
		}
		return WorkloadRecord{}, fmt.Errorf("creating workload %q: %w", w.Name, err)
	}
	return row.record(), nil
}

// UpdateWorkload replaces a workload's fields; ErrNotFound when absent.
func (b *Broker) UpdateWorkload(ctx context.Context, w WorkloadRecord, now time.Time) (WorkloadRecord, error) {
	if err := checkText("workload", w.Name, w.Team, w.Kind, string(w.Spec)); err != nil {
		return WorkloadRecord{}, err
	}
	var out WorkloadRecord
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&workloadRow{}).Where("name = ?", w.Name).
			Updates(map[string]any{"team": w.Team, "kind": w.Kind, "spec": string(w.Spec), "updated_at": now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrNotFound
		}
		var row workloadRow
		if err := tx.First(&row, "name = ?", w.Name).Error; err != nil {
			return err
		}
		out = row.record()
		return nil
	})
	if err != nil {
		return WorkloadRecord{}, fmt.Errorf("updating workload %q: %w", w.Name, err)
	}
	return out, nil
}

// GetWorkload returns one workload or ErrNotFound.
func (b *Broker) GetWorkload(ctx context.Context, name string) (WorkloadRecord, error) {
	var row workloadRow
	err := b.db.WithContext(ctx).First(&row, "name = ?", name).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return WorkloadRecord{}, fmt.Errorf("workload %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return WorkloadRecord{}, fmt.Errorf("reading workload %q: %w", name, err)
	}
	return row.record(), nil
}

// ListWorkloads returns every workload by name.
func (b *Broker) ListWorkloads(ctx context.Context) ([]WorkloadRecord, error) {
	var rows []workloadRow
	if err := b.db.WithContext(ctx).Order("name").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing workloads: %w", err)
	}
	out := make([]WorkloadRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// DeleteWorkload removes a workload; ErrNotFound when absent.
func (b *Broker) DeleteWorkload(ctx context.Context, name string) error {
	res := b.db.WithContext(ctx).Delete(&workloadRow{}, "name = ?", name)
	if res.Error != nil {
		return fmt.Errorf("deleting workload %q: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("workload %q: %w", name, ErrNotFound)
	}
	return nil
}
