package store

import (
	"errors"
	"testing"
	"time"
)

// TestRegistrationTokens: a registration token registers its own instance
// once; a bootstrap token registers only new instances, never takes over
// an existing one; tokens are listed and revoked, the last admin kept.
func TestRegistrationTokens(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		b, err := s.Broker(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
		inst := func(id string) InstanceRecord { return InstanceRecord{ID: id, Cloud: "aws", Region: "us-east-1"} }

		tok, rec, err := b.MintRegistrationToken(ctx, "i-1", time.Hour, t0)
		if err != nil || rec.Kind != TokenRegistration || rec.Subject != "i-1" || HashToken(tok) != rec.Hash {
			t.Fatalf("mint: %+v %v", rec, err)
		}
		got, err := b.LookupToken(ctx, rec.Hash)
		if err != nil || !got.ExpiresAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("lookup: %+v %v", got, err)
		}
		if _, err := b.RegisterAgentAs(ctx, inst("i-2"), "agent-h0", t0, got); !errors.Is(err, ErrTakeover) {
			t.Fatalf("registration token used for another instance: %v", err)
		}
		if _, err := b.RegisterAgentAs(ctx, inst("i-1"), "agent-h1", t0.Add(time.Minute), got); err != nil {
			t.Fatalf("register with its token: %v", err)
		}
		if _, err := b.RegisterAgentAs(ctx, inst("i-1"), "agent-h2", t0.Add(2*time.Minute), got); !errors.Is(err, ErrTokenSpent) {
			t.Fatalf("second use of a one-time token: %v", err)
		}
		if _, err := b.LookupToken(ctx, rec.Hash); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a used registration token is still stored: %v", err)
		}

		_, old, _ := b.MintRegistrationToken(ctx, "i-3", time.Minute, t0)
		if _, err := b.RegisterAgentAs(ctx, inst("i-3"), "agent-h3", t0.Add(time.Minute), old); !errors.Is(err, ErrTokenSpent) {
			t.Fatalf("expired token: %v", err)
		}

		// Unbound (minted before the cloud assigned the id): one new
		// instance, once; never an existing one.
		_, unbound, err := b.MintRegistrationToken(ctx, "", time.Hour, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.RegisterAgentAs(ctx, inst("i-1"), "agent-u0", t0, unbound); !errors.Is(err, ErrTakeover) {
			t.Fatalf("unbound token taking over i-1: %v", err)
		}
		// The refused attempt rolled back: the token is still there.
		if _, err := b.RegisterAgentAs(ctx, inst("i-aws-new"), "agent-u1", t0, unbound); err != nil {
			t.Fatalf("unbound token, new instance: %v", err)
		}
		if _, err := b.RegisterAgentAs(ctx, inst("i-aws-other"), "agent-u2", t0, unbound); !errors.Is(err, ErrTokenSpent) {
			t.Fatalf("unbound token used twice: %v", err)
		}

		boot := TokenRecord{Hash: HashToken("boot"), Kind: TokenBootstrap, Subject: "cloud-init", CreatedAt: t0}
		if err := b.AddToken(ctx, boot); err != nil {
			t.Fatal(err)
		}
		if _, err := b.RegisterAgentAs(ctx, inst("i-new"), "agent-h4", t0, boot); err != nil {
			t.Fatalf("bootstrap, new instance: %v", err)
		}
		for _, id := range []string{"i-1", "i-new"} {
			if _, err := b.RegisterAgentAs(ctx, inst(id), "agent-evil-"+id, t0, boot); !errors.Is(err, ErrTakeover) {
				t.Fatalf("bootstrap takeover of %s: %v", id, err)
			}
		}
		if got, err := b.LookupToken(ctx, "agent-h1"); err != nil || got.Subject != "i-1" {
			t.Fatalf("i-1's own agent token after the takeover attempt: %+v %v", got, err)
		}

		if err := b.AddToken(ctx, TokenRecord{Hash: HashToken("admin-1"), Kind: TokenAdmin, Subject: "ops", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		list, err := b.ListTokens(ctx, "", "")
		if err != nil || len(list) != 6 { // i-3's expired registration, boot, 3 agents, admin
			t.Fatalf("list: %d %v", len(list), err)
		}
		agents, _ := b.ListTokens(ctx, TokenAgent, "i-1")
		if len(agents) != 1 || agents[0].Hash != "agent-h1" {
			t.Fatalf("agent tokens of i-1: %+v", agents)
		}
		if _, err := b.RevokeToken(ctx, TokenID(HashToken("admin-1"))); !errors.Is(err, ErrLastAdmin) {
			t.Fatalf("revoking the last admin: %v", err)
		}
		if err := b.AddToken(ctx, TokenRecord{Hash: HashToken("admin-2"), Kind: TokenAdmin, Subject: "ops-2027", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if r, err := b.RevokeToken(ctx, TokenID(HashToken("admin-1"))); err != nil || r.Subject != "ops" {
			t.Fatalf("rotating the admin token: %+v %v", r, err)
		}
		if _, err := b.LookupToken(ctx, HashToken("admin-1")); !errors.Is(err, ErrNotFound) {
			t.Fatal("revoked admin token still stored")
		}
		for _, id := range []string{"0123456789abcdef", "xyz", "'; DROP TABLE broker_tokens; --"} {
			if _, err := b.RevokeToken(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("revoke %q: %v", id, err)
			}
		}
	})
}
