package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// jobRunRow records one background job run. The unique (job, slot) index is
// what guarantees a scheduled run happens once even if two replicas both
// believe they lead for a moment.
type jobRunRow struct {
	ID         int64     `gorm:"primaryKey;autoIncrement"`
	Job        string    `gorm:"size:64;uniqueIndex:idx_job_slot"`
	Slot       time.Time `gorm:"uniqueIndex:idx_job_slot"`
	Holder     string    `gorm:"size:128"`
	Epoch      int64
	StartedAt  time.Time
	FinishedAt *time.Time
	Error      string
}

func (jobRunRow) TableName() string { return "broker_job_runs" }

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
		row := jobRunRow{Job: job, Slot: slotKey(slot), Holder: holder, Epoch: epoch, StartedAt: now}
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

// slotKey is the slot as both databases store it: PostgreSQL keeps
// microseconds, so two slots that differ only below a microsecond would be
// one slot there and two on SQLite. Truncating here makes them one on both,
// and makes the caller's slots collide only when they are truly the same.
func slotKey(slot time.Time) time.Time { return slot.UTC().Truncate(time.Microsecond) }

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
