package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// SchemaVersion is the schema this binary writes, one number for every
// table. Bump it whenever a model changes or a table is added.
//
//	1: offers, price_points
//	2: the broker's tables (workloads, instances, events, benchmarks,
//	   tokens, leases, job runs) under the same version, and plans
//	3: tokens expire (expires_at): one-time registration tokens
//	4: report_alerts (the Slack reports' alert state)
//	5: the token revocation log (broker_token_revocations)
//	6: the spend ledger (spend_ledger)
//	7: the fleet's slots, launch intents, instances and settings
//	8: the jobs' reported progress (job_progress)
//	9: requests to replace a fleet instance (fleet_replace_requests)
//	10: inference services' time below target (fleet_service_shortfall)
const SchemaVersion = 10

// ErrSchemaTooNew is returned by Open when the database was migrated by a
// newer gpubroker; an older binary must not write to it.
var ErrSchemaTooNew = errors.New("database schema is newer than this gpubroker")

// models are every table AutoMigrate manages, in creation order. Every
// table is migrated here, in one transaction under the migration lock, and
// recorded by the one schema version: no table is created elsewhere.
var models = []any{&offerRow{}, &pricePointRow{},
	&workloadRow{}, &instanceRow{}, &eventRow{}, &benchmarkRow{}, &tokenRow{}, &leaseRow{}, &jobRunRow{},
	&planRow{}, &alertRow{}, &tokenRevocationRow{}, &spendRow{},
	&slotRow{}, &intentRow{}, &fleetInstanceRow{}, &fleetSettingRow{},
	&progressRow{}, &replaceRow{}, &shortfallRow{}}

// schemaRow is the single row of schema_version.
type schemaRow struct {
	ID         int `gorm:"primaryKey;autoIncrement:false"`
	Version    int `gorm:"not null"`
	MigratedAt time.Time
}

func (schemaRow) TableName() string { return "schema_version" }

// migrationLockID is the PostgreSQL advisory lock that serialises
// migrations when several replicas start at once ("gpub" in ASCII).
const migrationLockID = 0x67707562

// migrate brings every table to SchemaVersion in one transaction. On
// PostgreSQL the transaction first takes an advisory lock, so replicas
// starting together migrate one after the other; on SQLite the immediate
// transaction holds the database's write lock from its first statement,
// which serialises processes the same way.
func (s *Store) migrate(ctx context.Context) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if s.dialect == Postgres {
			if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", migrationLockID).Error; err != nil {
				return fmt.Errorf("taking the migration lock: %w", err)
			}
		}
		if err := tx.AutoMigrate(&schemaRow{}); err != nil {
			return err
		}
		var cur schemaRow
		if err := tx.Limit(1).Find(&cur, "id = ?", 1).Error; err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		if cur.Version > SchemaVersion {
			return fmt.Errorf("%w: database is at version %d, this binary knows %d; upgrade gpubroker", ErrSchemaTooNew, cur.Version, SchemaVersion)
		}
		if err := tx.AutoMigrate(models...); err != nil {
			return err
		}
		if cur.Version == SchemaVersion {
			return nil
		}
		row := schemaRow{ID: 1, Version: SchemaVersion, MigratedAt: time.Now().UTC()}
		return tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error
	})
}

// SchemaVersion returns the version recorded in the database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var cur schemaRow
	if err := s.db.WithContext(ctx).Limit(1).Find(&cur, "id = ?", 1).Error; err != nil {
		return 0, fmt.Errorf("reading the schema version: %w", err)
	}
	return cur.Version, nil
}
