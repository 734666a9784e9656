package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ReplaceRequest asks the fleet's leader to replace one instance (a host
// benchmarked far below its type's median, one a user distrusts): its next
// pass launches a replacement for the instance's slot, terminates the
// instance and forgets the request (FleetChanges.DoneReplacements).
type ReplaceRequest struct {
	Instance string
	Reason   string
	By       string
	At       time.Time
}

type replaceRow struct {
	Instance string `gorm:"primaryKey;size:256"`
	Reason   string `gorm:"size:512"`
	By       string `gorm:"size:128"`
	At       time.Time
}

func (replaceRow) TableName() string { return "fleet_replace_requests" }

// RequestReplace records r (a repeat replaces the earlier request) and a
// fleet.replace_requested event, in one transaction.
func (s *Fleet) RequestReplace(ctx context.Context, r ReplaceRequest) error {
	if err := checkText("replace request", r.Instance, r.Reason, r.By); err != nil {
		return err
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		row := replaceRow{Instance: r.Instance, Reason: r.Reason, By: r.By, At: r.At.UTC()}
		if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error; err != nil {
			return err
		}
		_, err := addEvent(tx, EventRecord{At: r.At.UTC(), Kind: "fleet.replace_requested", Instance: r.Instance,
			Message: "replacement requested by " + r.By + ": " + r.Reason})
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the replacement of %s: %w", r.Instance, err)
	}
	return nil
}

// ReplaceRequests lists the pending requests, oldest first.
func (s *Fleet) ReplaceRequests(ctx context.Context) ([]ReplaceRequest, error) {
	var rows []replaceRow
	if err := s.db.WithContext(ctx).Order("at, instance").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("reading replacement requests: %w", err)
	}
	out := make([]ReplaceRequest, len(rows))
	for i, r := range rows {
		out[i] = ReplaceRequest{Instance: r.Instance, Reason: r.Reason, By: r.By, At: r.At.UTC()}
	}
	return out, nil
}
