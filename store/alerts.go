package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// alertRow remembers one alert condition of the Slack reports, so that it
// is sent once while it holds and again only after it cleared.
type alertRow struct {
	Key       string `gorm:"primaryKey;size:255"`
	Kind      string `gorm:"size:64"`
	Active    bool   `gorm:"index"`
	FiredAt   time.Time
	ClearedAt *time.Time
	// Fired counts activations, for the record.
	Fired int
}

func (alertRow) TableName() string { return "report_alerts" }

// ActiveAlerts returns the keys of the alert conditions recorded as active.
func (b *Broker) ActiveAlerts(ctx context.Context) ([]string, error) {
	var keys []string
	if err := b.db.WithContext(ctx).Model(&alertRow{}).Where("active = ?", true).Order("key").Pluck("key", &keys).Error; err != nil {
		return nil, fmt.Errorf("store: active alerts: %w", err)
	}
	return keys, nil
}

// ActivateAlert records the condition key as active. It returns true only
// to the one caller that made it active (a fresh or returning condition), so
// concurrent replicas never both send it.
func (b *Broker) ActivateAlert(ctx context.Context, key, kind string, now time.Time) (bool, error) {
	fresh := false
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&alertRow{}).Where("key = ? AND active = ?", key, false).
			Updates(map[string]any{"active": true, "fired_at": now.UTC(), "cleared_at": nil, "fired": gorm.Expr("fired + 1")})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 1 {
			fresh = true
			return nil
		}
		res = tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&alertRow{Key: key, Kind: kind, Active: true, FiredAt: now.UTC(), Fired: 1})
		if res.Error != nil {
			return res.Error
		}
		fresh = res.RowsAffected == 1
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: activate alert: %w", err)
	}
	return fresh, nil
}

// ClearAlert records that the condition key no longer holds.
func (b *Broker) ClearAlert(ctx context.Context, key string, now time.Time) error {
	t := now.UTC()
	err := b.db.WithContext(ctx).Model(&alertRow{}).Where("key = ? AND active = ?", key, true).
		Updates(map[string]any{"active": false, "cleared_at": &t}).Error
	if err != nil {
		return fmt.Errorf("store: clear alert: %w", err)
	}
	return nil
}
