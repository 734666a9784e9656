package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

type leaseRow struct {
	Name    string `gorm:"primaryKey;size:64"`
	Holder  string `gorm:"size:128"`
	Epoch   int64
	Expires time.Time
}

func (leaseRow) TableName() string { return "broker_leases" }

// Lease is the state of a named leader lease.
type Lease struct {
	Name    string
	Holder  string
	Epoch   int64
	Expires time.Time
}

// AcquireLease takes or renews the lease name for holder until now+ttl. It
// succeeds when the lease is free, expired, or already held by holder, and
// returns the lease as it now stands; ok is false when someone else holds
// it. Each change of holder increments Epoch, which fences job runs.
//
// Expiry is compared against the caller's clock, so replicas' clocks must
// agree to well within the TTL (NTP does this).
func (b *Broker) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (Lease, bool, error) {
	var out leaseRow
	ok := false
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&leaseRow{Name: name}).Error; err != nil {
			return err
		}
		// Renewal by the holder keeps the epoch.
		res := tx.Model(&leaseRow{}).Where("name = ? AND holder = ? AND expires > ?", name, holder, now).
			Update("expires", now.Add(ttl))
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			// Take over a free or expired lease with a new epoch.
			res = tx.Model(&leaseRow{}).Where("name = ? AND (holder = '' OR expires <= ? OR holder = ?)", name, now, holder).
				Updates(map[string]any{"holder": holder, "expires": now.Add(ttl), "epoch": gorm.Expr("epoch + 1")})
			if res.Error != nil {
				return res.Error
			}
		}
		ok = res.RowsAffected == 1
		return tx.First(&out, "name = ?", name).Error
	})
	if err != nil {
		return Lease{}, false, fmt.Errorf("acquiring lease %q: %w", name, err)
	}
	return Lease{Name: out.Name, Holder: out.Holder, Epoch: out.Epoch, Expires: out.Expires.UTC()}, ok, nil
}

// ReleaseLease gives the lease up if holder has it, so another replica can
// take over at once instead of waiting for expiry.
func (b *Broker) ReleaseLease(ctx context.Context, name, holder string) error {
	err := b.db.WithContext(ctx).Model(&leaseRow{}).Where("name = ? AND holder = ?", name, holder).
		Updates(map[string]any{"holder": "", "expires": time.Unix(0, 0).UTC()}).Error
	if err != nil {
		return fmt.Errorf("releasing lease %q: %w", name, err)
	}
	return nil
}
