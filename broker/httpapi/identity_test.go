package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// TestBootstrapTakeoverRefused: a VM holding the fleet-wide bootstrap
// token cannot register as an instance that already exists, so it can
// neither revoke that instance's token nor report for it.
func TestBootstrapTakeoverRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		admin := apiv1.NewClient(e.srv.URL, e.admin, e.srv.Client())
		boot, err := admin.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenBootstrap, Name: "cloud-init"})
		if err != nil {
			t.Fatal(err)
		}
		bc := admin.WithToken(boot.Secret)
		victim, err := bc.Register(ctx, apiv1.RegisterRequest{Hostname: "gpu-1", Cloud: "aws", InstanceID: "i-victim", AgentVersion: "v1.0.0"})
		if err != nil {
			t.Fatalf("first registration with the bootstrap token: %v", err)
		}
		_, err = bc.Register(ctx, apiv1.RegisterRequest{Hostname: "evil", Cloud: "aws", InstanceID: "i-victim", AgentVersion: "v1.0.0"})
		var ae *apiv1.Error
		if !asAPIError(err, &ae) || ae.Status != http.StatusForbidden || ae.Code != apiv1.CodeForbidden {
			t.Fatalf("takeover with the bootstrap token: %v, want 403", err)
		}
		// The victim's own token still works and the record is unchanged.
		if _, err := admin.WithToken(victim.Token).Heartbeat(ctx, "i-victim", apiv1.Heartbeat{Time: time.Now(), Cloud: "aws"}); err != nil {
			t.Fatalf("victim's heartbeat after the attempt: %v", err)
		}
		if inst, err := admin.GetInstance(ctx, "i-victim"); err != nil || inst.Hostname != "gpu-1" {
			t.Fatalf("victim record: %+v %v", inst, err)
		}
		// A bootstrap token reports for nobody.
		if _, err := bc.ReportNotice(ctx, "i-victim", "", apiv1.NoticeReport{Kind: "preempt", ID: "x"}); apiv1.StatusOf(err) != http.StatusForbidden {
			t.Fatalf("notice with the bootstrap token: %v", err)
		}

		// A registration token minted for i-victim re-registers it, once.
		reg, err := admin.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenRegistration, InstanceID: "i-victim", TTLSeconds: 600})
		if err != nil || reg.Subject != "i-victim" || reg.ExpiresAt.IsZero() {
			t.Fatalf("registration token: %+v %v", reg, err)
		}
		rc := admin.WithToken(reg.Secret)
		if _, err := rc.Register(ctx, apiv1.RegisterRequest{Hostname: "gpu-1", Cloud: "aws", InstanceID: "i-other", AgentVersion: "v1"}); apiv1.StatusOf(err) != http.StatusForbidden {
			t.Fatalf("registration token for another instance: %v", err)
		}
		again, err := rc.Register(ctx, apiv1.RegisterRequest{Hostname: "gpu-1b", Cloud: "aws", InstanceID: "i-victim", AgentVersion: "v1.0.1+dirty"})
		if err != nil {
			t.Fatalf("re-registration with its registration token: %v", err)
		}
		if _, err := rc.Register(ctx, apiv1.RegisterRequest{Hostname: "gpu-1", Cloud: "aws", InstanceID: "i-victim", AgentVersion: "v1"}); apiv1.StatusOf(err) != http.StatusUnauthorized {
			t.Fatalf("second use of a one-time registration token: %v", err)
		}
		// The old agent token died with the re-registration.
		if _, err := admin.WithToken(victim.Token).Heartbeat(ctx, "i-victim", apiv1.Heartbeat{Time: time.Now()}); apiv1.StatusOf(err) != http.StatusUnauthorized {
			t.Fatalf("old agent token after re-registration: %v", err)
		}
		if _, err := admin.WithToken(again.Token).Heartbeat(ctx, "i-victim", apiv1.Heartbeat{Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
		// Mint from Go, as the fleet controller does.
		tok, _, err := e.broker.MintRegistrationToken(ctx, "i-launched", time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := admin.WithToken(tok).Register(ctx, apiv1.RegisterRequest{Cloud: "gcp", InstanceID: "i-launched", AgentVersion: "(devel)"}); err != nil {
			t.Fatalf("minted registration token: %v", err)
		}
	})
}

func asAPIError(err error, target **apiv1.Error) bool {
	e, ok := err.(*apiv1.Error)
	if ok {
		*target = e
	}
	return ok
}

// clock is a settable time source shared by two replicas.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestRevokeOnEveryReplica: two broker replicas on one store. A token
// revoked through one stops working there at once and on the other within
// the revocation poll interval (2 s), well inside the 60 s token cache
// TTL: the replica drops it from its cache when it reads the revocation
// log. Admin rotation works the same way, without touching the database.
func TestRevokeOnEveryReplica(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.dsn(t)
			ctx := context.Background()
			clk := &clock{t: time.Now()}
			const poll = 2 * time.Second
			replica := func() (*apiv1.Client, *store.Broker) {
				st, err := store.Open(ctx, dsn, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = st.Close() })
				br, err := st.Broker(ctx)
				if err != nil {
					t.Fatal(err)
				}
				cat, _ := pricing.EmbeddedCatalog()
				api := httpapi.New(httpapi.Config{Store: br, Catalog: func() *pricing.Catalog { return cat }, Now: clk.now,
					RevocationPoll: poll}) // token cache TTL: the default minute
				srv := httptest.NewServer(api.Handler())
				t.Cleanup(srv.Close)
				return apiv1.NewClient(srv.URL, "", srv.Client()), br
			}
			r1, br := replica()
			r2, _ := replica()
			admin1, hash, _ := httpapi.NewToken()
			if _, err := br.EnsureFirstAdminToken(ctx, hash, "first", clk.now()); err != nil {
				t.Fatal(err)
			}
			a1, a2 := r1.WithToken(admin1), r2.WithToken(admin1)

			boot, err := a1.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenBootstrap, Name: "cloud-init"})
			if err != nil {
				t.Fatal(err)
			}
			// Both replicas verify (and cache) the bootstrap token.
			for i, r := range []*apiv1.Client{r1, r2} {
				if _, err := r.WithToken(boot.Secret).Register(ctx, apiv1.RegisterRequest{Cloud: "aws", InstanceID: "i-" + string(rune('a'+i)), AgentVersion: "v1"}); err != nil {
					t.Fatalf("replica %d: %v", i+1, err)
				}
			}
			list, err := a2.ListTokens(ctx, apiv1.TokensQuery{Kind: apiv1.TokenBootstrap})
			if err != nil || len(list) != 1 || list[0].ID != boot.ID {
				t.Fatalf("list on replica 2: %+v %v", list, err)
			}
			if err := a1.RevokeToken(ctx, boot.ID); err != nil {
				t.Fatal(err)
			}
			reg := func(r *apiv1.Client, id string) error {
				_, err := r.WithToken(boot.Secret).Register(ctx, apiv1.RegisterRequest{Cloud: "aws", InstanceID: id, AgentVersion: "v1"})
				return err
			}
			if err := reg(r1, "i-c"); apiv1.StatusOf(err) != http.StatusUnauthorized {
				t.Fatalf("revoked token on the revoking replica: %v", err)
			}
			clk.add(poll + time.Second)
			if err := reg(r2, "i-d"); apiv1.StatusOf(err) != http.StatusUnauthorized {
				t.Fatalf("revoked token on the other replica after the revocation poll interval: %v", err)
			}
			if err := a2.RevokeToken(ctx, boot.ID); apiv1.StatusOf(err) != http.StatusNotFound {
				t.Fatalf("revoking twice: %v", err)
			}

			// Admin rotation through the API.
			if err := a1.RevokeToken(ctx, store.TokenID(hash)); apiv1.StatusOf(err) != http.StatusConflict {
				t.Fatalf("revoking the last admin token: %v", err)
			}
			admin2, err := a2.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenAdmin, Name: "ops-2027"})
			if err != nil {
				t.Fatal(err)
			}
			if err := r2.WithToken(admin2.Secret).RevokeToken(ctx, store.TokenID(hash)); err != nil {
				t.Fatalf("revoking the old admin token with the new one: %v", err)
			}
			clk.add(poll + time.Second)
			for i, c := range []*apiv1.Client{a1, a2} {
				if _, err := c.ListTokens(ctx, apiv1.TokensQuery{}); apiv1.StatusOf(err) != http.StatusUnauthorized {
					t.Fatalf("old admin token on replica %d: %v", i+1, err)
				}
			}
			if ts, err := r1.WithToken(admin2.Secret).ListTokens(ctx, apiv1.TokensQuery{Kind: apiv1.TokenAdmin}); err != nil || len(ts) != 1 {
				t.Fatalf("new admin token on replica 1: %+v %v", ts, err)
			}
		})
	}
}
