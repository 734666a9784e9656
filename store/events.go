package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// EventRecord is one thing that happened (launched, preemption notice,
// drained, ...).
type EventRecord struct {
	ID       int64
	At       time.Time
	Kind     string
	Instance string
	Workload string
	Message  string
	Data     json.RawMessage
	// IdempotencyKey makes a report recorded once however often it is
	// delivered; unique per instance.
	IdempotencyKey string
}

// EventFilter selects events; zero fields do not filter.
type EventFilter struct {
	Kind     string
	Instance string
	Workload string
	Since    time.Time
	// AfterID returns events with a larger ID (for paging).
	AfterID int64
	// Limit caps the result (default 100, at most 1000).
	Limit int
}

type eventRow struct {
	ID       int64     `gorm:"primaryKey;autoIncrement"`
	At       time.Time `gorm:"index"`
	Kind     string    `gorm:"size:32;index"`
	Instance string    `gorm:"size:256;index;uniqueIndex:idx_event_idem"`
	Workload string    `gorm:"size:128"`
	Message  string
	Data     string
	// IdemKey is NULL for events without a key, so the unique index only
	// binds keyed reports.
	IdemKey *string `gorm:"size:256;uniqueIndex:idx_event_idem"`
}

func (eventRow) TableName() string { return "broker_events" }

func addEvent(tx *gorm.DB, ev EventRecord) (EventRecord, error) {
	row := eventRow{At: ev.At, Kind: ev.Kind, Instance: ev.Instance, Workload: ev.Workload, Message: ev.Message,
		Data: string(ev.Data)}
	if ev.IdempotencyKey != "" {
		k := ev.IdempotencyKey
		row.IdemKey = &k
	}
	if err := tx.Create(&row).Error; err != nil {
		return EventRecord{}, err
	}
	return row.record(), nil
}

func (r eventRow) record() EventRecord {
	e := EventRecord{ID: r.ID, At: r.At.UTC(), Kind: r.Kind, Instance: r.Instance, Workload: r.Workload,
		Message: r.Message, Data: rawOrNil(r.Data)}
	if r.IdemKey != nil {
		e.IdempotencyKey = *r.IdemKey
	}
	return e
}

// AddEvent records an event and returns it with its ID.
func (b *Broker) AddEvent(ctx context.Context, ev EventRecord) (EventRecord, error) {
	out, err := addEvent(b.db.WithContext(ctx), ev)
	if err != nil {
		return EventRecord{}, fmt.Errorf("recording event %s: %w", ev.Kind, err)
	}
	return out, nil
}

// ListEvents returns events matching f, oldest first.
func (b *Broker) ListEvents(ctx context.Context, f EventFilter) ([]EventRecord, error) {
	q := b.db.WithContext(ctx).Order("id")
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
	if f.AfterID > 0 {
		q = q.Where("id > ?", f.AfterID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var rows []eventRow
	if err := q.Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	out := make([]EventRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// CountEvents counts every event.
func (b *Broker) CountEvents(ctx context.Context) (int64, error) {
	var n int64
	if err := b.db.WithContext(ctx).Model(&eventRow{}).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("counting events: %w", err)
	}
	return n, nil
}
