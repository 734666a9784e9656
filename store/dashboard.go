package store

import (
	"context"
	"fmt"
	"time"
)

// Paged reads for the web dashboard. They bound every answer, so a page
// stays light with tens of thousands of instances and events.

// RecentEvents returns events matching f (Since, Kind, Instance, Workload),
// newest first, with an id below beforeID when beforeID > 0. f.Limit is
// capped at 1000 (default 100).
func (b *Broker) RecentEvents(ctx context.Context, f EventFilter, beforeID int64) ([]EventRecord, error) {
	q := b.db.WithContext(ctx).Order("id DESC")
	if f.Kind != "" {
		q = q.Where("kind = ?", f.Kind)
	}
	if f.Instance != "" {
		q = q.Where("instance = ?", f.Instance)
	}
	if f.Workload != "" {
		q = q.Where("workload = ?", f.Workload)
	}
	if !f.Since.IsZero() {
		q = q.Where("at >= ?", f.Since)
	}
	if beforeID > 0 {
		q = q.Where("id < ?", beforeID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	var rows []eventRow
	if err := q.Limit(min(limit, 1000)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing recent events: %w", err)
	}
	out := make([]EventRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// EventKinds returns the distinct event kinds recorded, sorted.
func (b *Broker) EventKinds(ctx context.Context) ([]string, error) {
	var kinds []string
	if err := b.db.WithContext(ctx).Model(&eventRow{}).Distinct("kind").Order("kind").Pluck("kind", &kinds).Error; err != nil {
		return nil, fmt.Errorf("listing event kinds: %w", err)
	}
	return kinds, nil
}

// PageInstances returns one page of instances ordered by workload then id,
// optionally of one workload, and how many match in all.
func (b *Broker) PageInstances(ctx context.Context, workload string, offset, limit int) ([]InstanceRecord, int64, error) {
	q := b.db.WithContext(ctx).Model(&instanceRow{})
	if workload != "" {
		q = q.Where("workload = ?", workload)
	}
	var total int64
	if err := q.Count(&total).Error; err != nil {
		return nil, 0, fmt.Errorf("counting instances: %w", err)
	}
	if limit <= 0 {
		limit = 100
	}
	var rows []instanceRow
	if err := q.Order("workload, id").Offset(max(offset, 0)).Limit(min(limit, 1000)).Find(&rows).Error; err != nil {
		return nil, 0, fmt.Errorf("listing instances: %w", err)
	}
	out := make([]InstanceRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, total, nil
}

// GPUCount is how many instances and GPUs of one cloud and capacity type
// run.
type GPUCount struct {
	Cloud     string `gorm:"column:cloud"`
	Capacity  string `gorm:"column:capacity"`
	Instances int64  `gorm:"column:instances"`
	GPUs      int64  `gorm:"column:gpus"`
}

// ActiveGPUs counts the GPUs of instances that sent a heartbeat since
// activeSince and are not drained, by cloud and capacity type.
func (b *Broker) ActiveGPUs(ctx context.Context, activeSince time.Time) ([]GPUCount, error) {
	var out []GPUCount
	err := b.db.WithContext(ctx).Model(&instanceRow{}).
		Select("cloud, capacity, COUNT(*) AS instances, COALESCE(SUM(gpu_count), 0) AS gpus").
		Where("last_heartbeat >= ? AND state <> ?", activeSince, StateDrained).
		Group("cloud, capacity").Order("cloud, capacity").Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("counting active GPUs: %w", err)
	}
	return out, nil
}
