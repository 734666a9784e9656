package broker

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/store"
)

// FleetSetup turns the fleet reconciler on in `gpubroker serve`: the leader
// runs a pass every Interval (and at once after a pause or resume); every
// replica answers the fleet routes.
type FleetSetup struct {
	Options fleet.Options
	// Interval between passes (default 10s).
	Interval time.Duration
	// Computes are the clouds to manage.
	Computes map[pricing.Cloud]providers.Compute
	// Tokens mints the registration tokens that go into user data; nil
	// uses StoreMinter (bootstrap tokens in the store).
	Tokens fleet.TokenMinter
}

// fleetParts is the wired fleet of one broker process.
type fleetParts struct {
	loop *fleet.Loop
	api  httpapi.Fleet
}

func newFleet(ctx context.Context, cfg *Config, b *store.Broker, cat *catalogHolder, policyData []byte,
	metrics *httpapi.Metrics, elector *Elector, log *slog.Logger) (*fleetParts, error) {
	fs := cfg.Fleet
	fst, err := b.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	var pol *policy.Policy
	if policyData != nil {
		if pol, err = policy.Parse(cfg.PolicyPath, policyData); err != nil {
			return nil, fmt.Errorf("fleet: %w", err)
		}
	}
	fm, err := fleet.NewMetrics(metrics.Registerer())
	if err != nil {
		return nil, fmt.Errorf("fleet metrics: %w", err)
	}
	tokens := fs.Tokens
	if tokens == nil {
		tokens = &StoreMinter{Broker: b, Fleet: fst}
	}
	rec := &fleet.Reconciler{Store: fst, Computes: fs.Computes, Agents: b,
		Plans:  &fleet.SolverSource{Catalog: cat.Load, Policy: func() *policy.Policy { return pol }, Now: cfg.Now},
		Tokens: tokens, Metrics: fm, Log: log.With("part", "fleet"), Now: cfg.Now, Options: fs.Options}
	loop := &fleet.Loop{Reconciler: rec, Leading: elector.Leading, Lease: LeaseName, Holder: cfg.ReplicaID, Interval: fs.Interval}
	loop.Init()
	svc := &fleet.Service{Store: fst, Agents: b, Reconciler: rec, Now: cfg.Now, Kick: loop.Kick}
	return &fleetParts{loop: loop, api: fleetAPI{svc}}, nil
}

// fleetAPI adapts fleet.Service to the API's interface.
type fleetAPI struct{ s *fleet.Service }

func (f fleetAPI) Status(ctx context.Context) (any, error) { return f.s.Status(ctx) }

func (f fleetAPI) Diff(ctx context.Context) (any, error) {
	r, err := f.s.Diff(ctx)
	if errors.Is(err, fleet.ErrNoPlan) {
		return nil, fmt.Errorf("%w: %v", httpapi.ErrNoPolicy, err)
	}
	return r, err
}

func (f fleetAPI) SetPaused(ctx context.Context, paused bool, by string) (any, error) {
	return f.s.SetPaused(ctx, paused, by)
}

// StoreMinter mints registration tokens as bootstrap tokens in the store.
// The token of a launch is HMAC-SHA256(key, client token) under a random
// key kept in the fleet settings, so a retried launch renders the same user
// data, and only its hash is stored as a token. (Per-launch one-time
// tokens bound to the instance replace it when the foundation's tokens
// land; it implements the same fleet.TokenMinter.)
type StoreMinter struct {
	Broker *store.Broker
	Fleet  *store.Fleet
}

// Mint implements fleet.TokenMinter.
func (m *StoreMinter) Mint(ctx context.Context, r fleet.MintRequest) (string, error) {
	key, err := m.Fleet.FleetSecret(ctx, "registration-token-key", func() (string, error) {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		return hex.EncodeToString(b[:]), nil
	})
	if err != nil {
		return "", err
	}
	k, err := hex.DecodeString(key)
	if err != nil {
		return "", fmt.Errorf("fleet registration key is damaged: %w", err)
	}
	h := hmac.New(sha256.New, k)
	h.Write([]byte(r.ClientToken))
	tok := "gpb_" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
	err = m.Broker.AddToken(ctx, store.TokenRecord{Hash: httpapi.HashToken(tok), Kind: store.TokenBootstrap, Subject: r.Slot, CreatedAt: time.Now().UTC()})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return "", err
	}
	return tok, nil
}
