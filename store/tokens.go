package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// TokenRecord is an API token as stored: only its SHA-256 hash.
type TokenRecord struct {
	// Hash is the hex SHA-256 of the token.
	Hash string
	// Kind is one of the Token* kinds.
	Kind string
	// Subject is the instance an agent or registration token is bound to;
	// the name of an admin or bootstrap token.
	Subject   string
	CreatedAt time.Time
	// ExpiresAt is zero for tokens that do not expire.
	ExpiresAt time.Time
}

// ID is the token's public identifier: the first 16 hex digits of its
// hash. It names the token in lists and revocations without revealing it.
func (t TokenRecord) ID() string { return TokenID(t.Hash) }

// TokenID is the public identifier of the token with hash.
func TokenID(hash string) string {
	if len(hash) < tokenIDLen {
		return hash
	}
	return hash[:tokenIDLen]
}

const tokenIDLen = 16

// Expired reports whether t has expired at now.
func (t TokenRecord) Expired(now time.Time) bool {
	return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt)
}

// Token kinds.
const (
	TokenAdmin = "admin"
	TokenAgent = "agent"
	// TokenBootstrap may only register instances the broker does not know
	// yet (it goes into cloud-init); it never takes over an existing one.
	TokenBootstrap = "bootstrap"
	// TokenRegistration registers one instance, once: RegisterAgentAs
	// consumes it. The fleet controller mints one per launch.
	TokenRegistration = "registration"
	// RegisterVerified is not a stored kind: RegisterAgentAs treats a
	// bootstrap token whose caller also proved the instance's identity
	// with the cloud's signed document like an admin (it may re-register
	// that instance, which is its own).
	RegisterVerified = "bootstrap+identity"
)

// Errors of registration and token management.
var (
	// ErrTakeover: a bootstrap token tried to register an instance that is
	// already registered, or a registration token bound to another
	// instance was used.
	ErrTakeover = errors.New("registering as another existing instance is not allowed")
	// ErrTokenSpent: the registration token was already used or expired.
	ErrTokenSpent = errors.New("registration token already used or expired")
	// ErrLastAdmin: revoking the only admin token would lock everyone out.
	ErrLastAdmin = errors.New("the last admin token cannot be revoked")
)

const tokenPrefix = "gpb_"

// NewToken returns a fresh random bearer token (256 bits, "gpb_" + 43
// base64url characters; the prefix lets secret scanners find leaked ones)
// and the hash to store. Only the hash is ever persisted.
func NewToken() (token, hash string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, HashToken(token), nil
}

// HashToken is the stored form of a token: hex SHA-256. Tokens are random
// 256-bit values, so a plain hash (no salt, no KDF) cannot be brute-forced.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

type tokenRow struct {
	Hash      string `gorm:"primaryKey;size:64"`
	Kind      string `gorm:"size:16"`
	Subject   string `gorm:"size:256;index"`
	CreatedAt time.Time
	ExpiresAt *time.Time
}

func (tokenRow) TableName() string { return "broker_tokens" }

func toTokenRow(t TokenRecord) tokenRow {
	row := tokenRow{Hash: t.Hash, Kind: t.Kind, Subject: t.Subject, CreatedAt: t.CreatedAt.UTC()}
	if !t.ExpiresAt.IsZero() {
		e := t.ExpiresAt.UTC()
		row.ExpiresAt = &e
	}
	return row
}

func (r tokenRow) record() TokenRecord {
	return TokenRecord{Hash: r.Hash, Kind: r.Kind, Subject: r.Subject, CreatedAt: r.CreatedAt.UTC(), ExpiresAt: tval(r.ExpiresAt)}
}

// AddToken stores a token hash.
func (b *Broker) AddToken(ctx context.Context, t TokenRecord) error {
	if err := checkText("token", t.Hash, t.Kind, t.Subject); err != nil {
		return err
	}
	row := toTokenRow(t)
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
	return row.record(), nil
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

// MintRegistrationToken creates a one-time token that registers exactly
// instanceID before now+ttl, and returns the token (shown once; only its
// hash is stored). The fleet controller calls it for every launch and puts
// the token into the instance's user data. Where the cloud assigns the id
// only at launch (EC2 i-…), instanceID may be "": the token then registers
// one instance the broker does not know yet, once (pair it with the
// signed instance identity to bind it to the instance).
func (b *Broker) MintRegistrationToken(ctx context.Context, instanceID string, ttl time.Duration, now time.Time) (string, TokenRecord, error) {
	if ttl <= 0 {
		return "", TokenRecord{}, fmt.Errorf("minting a registration token: a positive ttl is required")
	}
	tok, hash, err := NewToken()
	if err != nil {
		return "", TokenRecord{}, fmt.Errorf("minting a registration token: %w", err)
	}
	rec := TokenRecord{Hash: hash, Kind: TokenRegistration, Subject: instanceID, CreatedAt: now.UTC(), ExpiresAt: now.Add(ttl).UTC()}
	if err := b.AddToken(ctx, rec); err != nil {
		return "", TokenRecord{}, err
	}
	return tok, rec, nil
}

// ListTokens lists stored tokens, oldest first; kind and subject filter
// when not empty.
func (b *Broker) ListTokens(ctx context.Context, kind, subject string) ([]TokenRecord, error) {
	q := b.db.WithContext(ctx).Model(&tokenRow{}).Order("created_at, hash")
	if kind != "" {
		q = q.Where("kind = ?", kind)
	}
	if subject != "" {
		q = q.Where("subject = ?", subject)
	}
	var rows []tokenRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing tokens: %w", err)
	}
	out := make([]TokenRecord, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.record())
	}
	return out, nil
}

// RevokeToken deletes the token whose ID (TokenID) is id and returns it.
// ErrNotFound when there is none; ErrLastAdmin when it is the only admin
// token left. Replicas that cached the token stop accepting it within
// their cache TTL (docs/api.md).
func (b *Broker) RevokeToken(ctx context.Context, id string) (TokenRecord, error) {
	if len(id) != tokenIDLen || strings.Trim(id, "0123456789abcdef") != "" {
		return TokenRecord{}, fmt.Errorf("token %q: %w", id, ErrNotFound)
	}
	var rec TokenRecord
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []tokenRow
		if err := tx.Where("hash >= ? AND hash < ?", id, id+"g").Find(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			return fmt.Errorf("token %s: %w", id, ErrNotFound)
		}
		if len(rows) > 1 {
			return fmt.Errorf("token id %s is ambiguous: %w", id, ErrConflict)
		}
		rec = rows[0].record()
		if rec.Kind == TokenAdmin {
			var n int64
			if err := tx.Model(&tokenRow{}).Where("kind = ?", TokenAdmin).Count(&n).Error; err != nil {
				return err
			}
			if n <= 1 {
				return ErrLastAdmin
			}
		}
		return revokeWhere(tx, time.Now(), "hash = ?", rec.Hash)
	})
	if err != nil {
		return TokenRecord{}, fmt.Errorf("revoking token: %w", err)
	}
	return rec, nil
}

// tokenRevocationRow logs a revoked token's hash, so replicas that cached
// the token drop it within their poll interval instead of their cache TTL.
// Rows older than RevocationLogRetention are pruned: by then no cache
// holds the token.
type tokenRevocationRow struct {
	ID        int64     `gorm:"primaryKey;autoIncrement"`
	Hash      string    `gorm:"size:64;not null"`
	RevokedAt time.Time `gorm:"not null;index"`
}

func (tokenRevocationRow) TableName() string { return "broker_token_revocations" }

// RevocationLogRetention is how long a revocation stays in the log; it
// must exceed every replica's token cache TTL.
const RevocationLogRetention = time.Hour

// revokeWhere deletes the tokens matching the condition and logs their
// hashes in the same transaction.
func revokeWhere(tx *gorm.DB, now time.Time, query string, args ...any) error {
	var hashes []string
	if err := tx.Model(&tokenRow{}).Where(query, args...).Pluck("hash", &hashes).Error; err != nil {
		return err
	}
	if len(hashes) == 0 {
		return nil
	}
	if err := tx.Where("hash IN ?", hashes).Delete(&tokenRow{}).Error; err != nil {
		return err
	}
	rows := make([]tokenRevocationRow, len(hashes))
	for i, h := range hashes {
		rows[i] = tokenRevocationRow{Hash: h, RevokedAt: now.UTC()}
	}
	if err := tx.Create(&rows).Error; err != nil {
		return err
	}
	return tx.Where("revoked_at < ?", now.Add(-RevocationLogRetention).UTC()).Delete(&tokenRevocationRow{}).Error
}

// RevokedTokensSince returns the hashes of tokens revoked after log entry
// afterID, and the last entry's id (afterID when there is none). A replica
// polls it to drop revoked tokens from its cache.
func (b *Broker) RevokedTokensSince(ctx context.Context, afterID int64) ([]string, int64, error) {
	var rows []tokenRevocationRow
	if err := b.db.WithContext(ctx).Where("id > ?", afterID).Order("id").Limit(10000).Find(&rows).Error; err != nil {
		return nil, afterID, fmt.Errorf("reading token revocations: %w", err)
	}
	hashes := make([]string, len(rows))
	for i, r := range rows {
		hashes[i] = r.Hash
		afterID = r.ID
	}
	return hashes, afterID, nil
}
