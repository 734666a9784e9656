package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// fleetSettingRow is one fleet setting that any replica may change (the
// kill switch), read by the leader every pass.
type fleetSettingRow struct {
	Name      string `gorm:"primaryKey;size:64"`
	Value     string `gorm:"size:256"`
	UpdatedBy string `gorm:"size:128"`
	UpdatedAt time.Time
}

func (fleetSettingRow) TableName() string { return "fleet_settings" }

// FleetPause is the kill switch's state.
type FleetPause struct {
	Paused bool
	By     string
	At     time.Time
}

const settingPaused = "paused"

// SetPaused turns the kill switch on or off and records an event, in one
// transaction.
func (s *Fleet) SetPaused(ctx context.Context, paused bool, by string, now time.Time) error {
	v := "false"
	kind := "fleet.resumed"
	if paused {
		v, kind = "true", "fleet.paused"
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := fleetSettingRow{Name: settingPaused, Value: v, UpdatedBy: by, UpdatedAt: now.UTC()}
		if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error; err != nil {
			return err
		}
		_, err := addEvent(tx, EventRecord{At: now.UTC(), Kind: kind, Message: "fleet " + map[bool]string{true: "paused", false: "resumed"}[paused] + " by " + by})
		return err
	})
	if err != nil {
		return fmt.Errorf("setting the fleet kill switch: %w", err)
	}
	return nil
}

// Paused reads the kill switch.
func (s *Fleet) Paused(ctx context.Context) (FleetPause, error) {
	var row fleetSettingRow
	if err := s.db.WithContext(ctx).Limit(1).Find(&row, "name = ?", settingPaused).Error; err != nil {
		return FleetPause{}, fmt.Errorf("reading the fleet kill switch: %w", err)
	}
	if row.Name == "" {
		return FleetPause{}, nil
	}
	return FleetPause{Paused: row.Value == "true", By: row.UpdatedBy, At: row.UpdatedAt.UTC()}, nil
}

// FleetSecret returns the secret named name, creating it with gen on first
// use; two replicas racing on the first use agree on one value.
func (s *Fleet) FleetSecret(ctx context.Context, name string, gen func() (string, error)) (string, error) {
	key := "secret:" + name
	var row fleetSettingRow
	if err := s.db.WithContext(ctx).Limit(1).Find(&row, "name = ?", key).Error; err != nil {
		return "", fmt.Errorf("reading fleet secret: %w", err)
	}
	if row.Name != "" {
		return row.Value, nil
	}
	v, err := gen()
	if err != nil {
		return "", err
	}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&fleetSettingRow{Name: key, Value: v, UpdatedBy: "broker", UpdatedAt: time.Now().UTC()}).Error; err != nil {
		return "", fmt.Errorf("storing fleet secret: %w", err)
	}
	if err := s.db.WithContext(ctx).First(&row, "name = ?", key).Error; err != nil {
		return "", fmt.Errorf("reading fleet secret: %w", err)
	}
	return row.Value, nil
}
