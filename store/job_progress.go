package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ProgressRecord is the latest progress a job reported through one of its
// agents (docs/agent.md, "Progress"): the live training stage reads it to
// know how much work is left.
type ProgressRecord struct {
	Workload string
	// Instance is the instance whose agent forwarded the report.
	Instance string
	// Done is the fraction of the job's work done, 0 to 1.
	Done float64
	// Step is the job's own step counter (0 when not given) and ETA its
	// own estimate of the time to finish (0 when not given).
	Step int64
	ETA  time.Duration
	// ReportedAt is when the job measured it (the agent's clock);
	// UpdatedAt when the broker stored it.
	ReportedAt time.Time
	UpdatedAt  time.Time
}

// progressRow is one workload's latest progress.
type progressRow struct {
	Workload   string `gorm:"primaryKey;size:128"`
	Instance   string `gorm:"size:128"`
	Done       float64
	Step       int64
	ETASeconds float64
	ReportedAt time.Time
	UpdatedAt  time.Time
}

func (progressRow) TableName() string { return "job_progress" }

func (r progressRow) record() ProgressRecord {
	return ProgressRecord{Workload: r.Workload, Instance: r.Instance, Done: r.Done, Step: r.Step,
		ETA: time.Duration(r.ETASeconds * float64(time.Second)), ReportedAt: r.ReportedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// RecordProgress stores a job's progress report unless a newer one is
// already stored: reports are ordered by ReportedAt, so a retried or
// late report changes nothing (stored is false) and progress may go down
// when a job restarts from a checkpoint.
func (b *Broker) RecordProgress(ctx context.Context, p ProgressRecord, now time.Time) (stored bool, err error) {
	if p.Workload == "" {
		return false, fmt.Errorf("recording progress: no workload")
	}
	if p.Done < 0 || p.Done > 1 {
		return false, fmt.Errorf("recording progress of %s: done %v is not between 0 and 1", p.Workload, p.Done)
	}
	row := progressRow{Workload: p.Workload, Instance: p.Instance, Done: p.Done, Step: p.Step, ETASeconds: p.ETA.Seconds(),
		ReportedAt: p.ReportedAt.UTC(), UpdatedAt: now.UTC()}
	// One statement: insert, or update only when this report is newer,
	// so two replicas storing reports at once keep the newest.
	res := b.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "workload"}},
		DoUpdates: clause.AssignmentColumns([]string{"instance", "done", "step", "eta_seconds", "reported_at", "updated_at"}),
		Where:     clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "job_progress.reported_at < excluded.reported_at"}}},
	}).Create(&row)
	err = res.Error
	stored = res.RowsAffected > 0
	if err != nil {
		return false, fmt.Errorf("recording progress of %s: %w", p.Workload, err)
	}
	return stored, nil
}

// JobProgress returns the latest progress of a workload; ErrNotFound when
// it never reported any.
func (b *Broker) JobProgress(ctx context.Context, workload string) (ProgressRecord, error) {
	var row progressRow
	err := b.db.WithContext(ctx).First(&row, "workload = ?", workload).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ProgressRecord{}, fmt.Errorf("progress of %q: %w", workload, ErrNotFound)
	}
	if err != nil {
		return ProgressRecord{}, fmt.Errorf("reading progress of %q: %w", workload, err)
	}
	return row.record(), nil
}
