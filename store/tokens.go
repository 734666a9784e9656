package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// TokenRecord is an API token as stored: only its SHA-256 hash.
type TokenRecord struct {
	// Hash is the hex SHA-256 of the token.
	Hash string
	// Kind is "admin", "agent" or "bootstrap".
	Kind string
	// Subject is the instance an agent token reports for; the name of an
	// admin token.
	Subject   string
	CreatedAt time.Time
}

// Token kinds.
const (
	TokenAdmin = "admin"
	TokenAgent = "agent"
	// TokenBootstrap may only register agents (it goes into cloud-init).
	TokenBootstrap = "bootstrap"
)

type tokenRow struct {
	Hash      string `gorm:"primaryKey;size:64"`
	Kind      string `gorm:"size:16"`
	Subject   string `gorm:"size:256;index"`
	CreatedAt time.Time
}

func (tokenRow) TableName() string { return "broker_tokens" }

// AddToken stores a token hash.
func (b *Broker) AddToken(ctx context.Context, t TokenRecord) error {
	row := tokenRow(t)
	if err := b.db.WithContext(ctx).Create(&row).Error; err != nil {
		if isUniqueViolation(err) {
			return fmt.Errorf("token: %w", ErrConflict)
		}
		return fmt.Errorf("storing token: %w", err)
	}
	return nil
}

// LookupToken finds a token by its hash; ErrNotFound when unknown.
func (b *Broker) LookupToken(ctx context.Context, hash string) (TokenRecord, error) {
	var row tokenRow
	err := b.db.WithContext(ctx).Limit(1).Find(&row, "hash = ?", hash).Error
	if err != nil {
		return TokenRecord{}, fmt.Errorf("looking up token: %w", err)
	}
	if row.Hash == "" {
		return TokenRecord{}, fmt.Errorf("token: %w", ErrNotFound)
	}
	return TokenRecord{Hash: row.Hash, Kind: row.Kind, Subject: row.Subject, CreatedAt: row.CreatedAt.UTC()}, nil
}

// CountTokens counts tokens of one kind.
func (b *Broker) CountTokens(ctx context.Context, kind string) (int64, error) {
	var n int64
	if err := b.db.WithContext(ctx).Model(&tokenRow{}).Where("kind = ?", kind).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("counting tokens: %w", err)
	}
	return n, nil
}

// EnsureFirstAdminToken stores hash as an admin token only when no admin
// token exists yet, and reports whether it did. The check and insert run in
// one transaction so two replicas starting together create one.
func (b *Broker) EnsureFirstAdminToken(ctx context.Context, hash, name string, now time.Time) (bool, error) {
	created := false
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// A fixed-name lease row serialises first start across replicas.
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&leaseRow{Name: "first-admin-token"}).Error; err != nil {
			return err
		}
		var l leaseRow
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).First(&l, "name = ?", "first-admin-token").Error; err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&tokenRow{}).Where("kind = ?", TokenAdmin).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		created = true
		return tx.Create(&tokenRow{Hash: hash, Kind: TokenAdmin, Subject: name, CreatedAt: now}).Error
	})
	if err != nil {
		return false, fmt.Errorf("creating the first admin token: %w", err)
	}
	return created, nil
}
