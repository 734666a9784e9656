package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

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

// JobRun is one recorded run of a background job.
type JobRun struct {
	Job        string
	Slot       time.Time
	Holder     string
	Epoch      int64
	StartedAt  time.Time
	FinishedAt time.Time
	Error      string
}

// ClaimJobRun records that holder starts job for the scheduled slot, but
// only if holder still holds the lease leaseName with epoch and it has not
// expired at now, and nobody has claimed that slot. It reports whether the
// claim succeeded; a false result means "do not run".
func (b *Broker) ClaimJobRun(ctx context.Context, leaseName, job string, slot time.Time, holder string, epoch int64, now time.Time) (int64, bool, error) {
	var id int64
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		err := tx.Model(&leaseRow{}).Where("name = ? AND holder = ? AND epoch = ? AND expires > ?", leaseName, holder, epoch, now).
			Count(&n).Error
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		row := jobRunRow{Job: job, Slot: slot.UTC(), Holder: holder, Epoch: epoch, StartedAt: now}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 1 {
			id = row.ID
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("claiming %s run at %s: %w", job, slot.Format(time.RFC3339), err)
	}
	return id, id != 0, nil
}

// FinishJobRun records the end of a claimed run.
func (b *Broker) FinishJobRun(ctx context.Context, id int64, now time.Time, runErr error) error {
	msg := ""
	if runErr != nil {
		msg = runErr.Error()
	}
	err := b.db.WithContext(ctx).Model(&jobRunRow{}).Where("id = ?", id).
		Updates(map[string]any{"finished_at": now, "error": msg}).Error
	if err != nil {
		return fmt.Errorf("finishing job run %d: %w", id, err)
	}
	return nil
}

// ListJobRuns returns the recorded runs of job ("" for all), oldest first.
func (b *Broker) ListJobRuns(ctx context.Context, job string) ([]JobRun, error) {
	q := b.db.WithContext(ctx).Order("id")
	if job != "" {
		q = q.Where("job = ?", job)
	}
	var rows []jobRunRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing job runs: %w", err)
	}
	out := make([]JobRun, len(rows))
	for i, r := range rows {
		out[i] = JobRun{Job: r.Job, Slot: r.Slot.UTC(), Holder: r.Holder, Epoch: r.Epoch, StartedAt: r.StartedAt.UTC(),
			FinishedAt: tval(r.FinishedAt), Error: r.Error}
	}
	return out, nil
}
