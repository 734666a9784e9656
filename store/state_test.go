package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

func mustBroker(t *testing.T, s *Store) *Broker {
	t.Helper()
	b, err := s.Broker(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOneSchemaVersionForEveryTable(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		for _, m := range models {
			if !s.db.Migrator().HasTable(m) {
				t.Errorf("Open did not create the table of %T", m)
			}
		}
		v, err := s.SchemaVersion(t.Context())
		if err != nil || v != SchemaVersion {
			t.Fatalf("schema version %d, %v; want %d", v, err, SchemaVersion)
		}
		var n int64
		if err := s.db.Table("schema_version").Count(&n).Error; err != nil || n != 1 {
			t.Fatalf("schema_version has %d rows (%v); want exactly one for every table", n, err)
		}
	})
}

// TestMigrationFromVersion1 opens a database as the first schema left it
// (offers only, version 1) and checks the broker tables arrive under the
// one version.
func TestMigrationFromVersion1(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		for _, m := range models[2:] {
			if err := s.db.Migrator().DropTable(m); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.db.Exec("UPDATE schema_version SET version = 1").Error; err != nil {
			t.Fatal(err)
		}
		if err := s.migrate(t.Context()); err != nil {
			t.Fatal(err)
		}
		b := mustBroker(t, s)
		if _, err := b.CreateWorkload(t.Context(), WorkloadRecord{Name: "w", Kind: "training"}, t0); err != nil {
			t.Fatalf("broker table after migrating from version 1: %v", err)
		}
		if v, _ := s.SchemaVersion(t.Context()); v != SchemaVersion {
			t.Fatalf("version %d after migrating, want %d", v, SchemaVersion)
		}
	})
}

func TestSQLiteSynchronousIsFull(t *testing.T) {
	s := openSQLite(t)
	var mode int
	if err := s.db.Raw("PRAGMA synchronous").Scan(&mode).Error; err != nil {
		t.Fatal(err)
	}
	if mode != 2 {
		t.Fatalf("PRAGMA synchronous = %d, want 2 (FULL): acknowledged writes must survive a power loss", mode)
	}
}

func TestSavePlanIsFencedByTheLease(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		b := mustBroker(t, s)
		ctx := t.Context()
		if _, err := b.LoadPlan(ctx, CurrentPlan); !errors.Is(err, ErrNotFound) {
			t.Fatalf("LoadPlan on an empty store = %v, want ErrNotFound", err)
		}
		l, ok, err := b.AcquireLease(ctx, "lead", "a", time.Minute, t0)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		p := PlanRecord{Name: CurrentPlan, Policy: "fleet.yaml", Plan: json.RawMessage(`{"cost":1}`),
			Budgets: json.RawMessage(`{"budgets":[]}`), CostUSD: 1, CatalogAt: t0, PlannedAt: t0, Holder: "a", Epoch: l.Epoch}
		if err := b.SavePlan(ctx, "lead", p, t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		stale := p
		stale.Holder, stale.Plan = "b", json.RawMessage(`{"cost":2}`)
		if err := b.SavePlan(ctx, "lead", stale, t0.Add(time.Second)); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("SavePlan by a non-holder = %v, want ErrNotLeader", err)
		}
		if err := b.SavePlan(ctx, "lead", p, t0.Add(2*time.Minute)); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("SavePlan after the lease expired = %v, want ErrNotLeader", err)
		}
		got, err := b.LoadPlan(ctx, CurrentPlan)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Plan) != `{"cost":1}` || got.Holder != "a" || !got.PlannedAt.Equal(t0) || got.Policy != "fleet.yaml" {
			t.Fatalf("LoadPlan = %+v", got)
		}
	})
}

// TestLeadershipSlotsOfSuccessiveEpochs: each lease epoch's leadership
// slot can be claimed; on PostgreSQL nanosecond slots of epochs 1 and 2
// used to be stored as the same microsecond.
func TestLeadershipSlotsOfSuccessiveEpochs(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		b := mustBroker(t, s)
		ctx := t.Context()
		now := t0
		for epoch := int64(1); epoch <= 3; epoch++ {
			holder := fmt.Sprintf("r%d", epoch)
			l, ok, err := b.AcquireLease(ctx, "lead", holder, time.Second, now)
			if err != nil || !ok || l.Epoch != epoch {
				t.Fatalf("epoch %d: lease %+v ok=%v err=%v", epoch, l, ok, err)
			}
			// The slot key the scheduler uses (broker.LeadershipSlot).
			slot := time.Unix(epoch, 0).UTC()
			if _, ok, err := b.ClaimJobRun(ctx, "lead", "refresh", slot, holder, epoch, now); err != nil || !ok {
				t.Fatalf("epoch %d: claiming its leadership slot = %v, %v; want claimed", epoch, ok, err)
			}
			if _, ok, _ := b.ClaimJobRun(ctx, "lead", "refresh", slot, holder, epoch, now); ok {
				t.Fatalf("epoch %d: the same slot was claimed twice", epoch)
			}
			now = now.Add(2 * time.Second) // the lease expires; the next replica takes over
		}
		// Slots that differ below a microsecond are one slot on both stores.
		l, _, _ := b.AcquireLease(ctx, "lead", "r9", time.Minute, now)
		a := t0.Add(time.Hour)
		if _, ok, _ := b.ClaimJobRun(ctx, "lead", "x", a, "r9", l.Epoch, now); !ok {
			t.Fatal("first claim failed")
		}
		if _, ok, _ := b.ClaimJobRun(ctx, "lead", "x", a.Add(time.Nanosecond), "r9", l.Epoch, now); ok {
			t.Fatal("a slot 1 ns later was claimed as a different slot")
		}
	})
}

func TestHeartbeatWithBadTextFailsAlone(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		b := mustBroker(t, s)
		ctx := t.Context()
		for _, id := range []string{"i-1", "i-2", "i-3"} {
			if _, err := b.RegisterAgent(ctx, InstanceRecord{ID: id, Cloud: "aws", Region: "us-east-1"}, "h"+id, t0); err != nil {
				t.Fatal(err)
			}
		}
		ups := []HeartbeatUpdate{
			{Instance: "i-1", At: t0, Load1: 1, Telemetry: json.RawMessage(`[{"index":0}]`)},
			{Instance: "i-2", At: t0, Telemetry: json.RawMessage("[{\"name\":\"\xff\xfe\"}]")},
			{Instance: "i-3", At: t0, Load1: 3},
			{Instance: "i-\x00", At: t0},
			{Instance: "i-404", At: t0},
		}
		errs, err := b.Heartbeats(ctx, ups)
		if err != nil {
			t.Fatalf("the batch failed as a whole: %v", err)
		}
		want := []error{nil, ErrInvalidText, nil, ErrInvalidText, ErrNotFound}
		for i, w := range want {
			if (w == nil) != (errs[i] == nil) || (w != nil && !errors.Is(errs[i], w)) {
				t.Errorf("heartbeat %d (%q): %v, want %v", i, ups[i].Instance, errs[i], w)
			}
		}
		for _, id := range []string{"i-1", "i-3"} {
			inst, err := b.GetInstance(ctx, id)
			if err != nil || !inst.LastHeartbeat.Equal(t0) {
				t.Errorf("%s: last heartbeat %v, %v; want %v", id, inst.LastHeartbeat, err, t0)
			}
		}
	})
}

// TestHeartbeatBatchFailureLandsOnTheBadRow: a value the database itself
// refuses (on PostgreSQL a timestamp beyond its range) fails the shared
// transaction; the others are then applied one by one and succeed.
func TestHeartbeatBatchFailureLandsOnTheBadRow(t *testing.T) {
	s := openPostgres(t)
	b := mustBroker(t, s)
	ctx := t.Context()
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		if _, err := b.RegisterAgent(ctx, InstanceRecord{ID: id, Cloud: "aws"}, "h"+id, t0); err != nil {
			t.Fatal(err)
		}
	}
	ups := []HeartbeatUpdate{{Instance: "i-1", At: t0}, {Instance: "i-2", At: time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Instance: "i-3", At: t0}, {Instance: "i-1", At: t0.Add(time.Second)}}
	errs, err := b.Heartbeats(ctx, ups)
	if err != nil {
		t.Fatalf("the batch failed as a whole: %v", err)
	}
	if errs[0] != nil || errs[2] != nil || errs[3] != nil || errs[1] == nil {
		t.Fatalf("errors %v; want only heartbeat 1 to fail", errs)
	}
	inst, _ := b.GetInstance(ctx, "i-1")
	if !inst.LastHeartbeat.Equal(t0.Add(time.Second)) {
		t.Fatalf("i-1 last heartbeat %v; the later one of the batch must win", inst.LastHeartbeat)
	}
}

func TestRecordReportKeyReusedWithOtherBody(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		b := mustBroker(t, s)
		ctx := t.Context()
		if _, err := b.RegisterAgent(ctx, InstanceRecord{ID: "i-1", Cloud: "aws"}, "h", t0); err != nil {
			t.Fatal(err)
		}
		rep := Report{Event: EventRecord{At: t0, Kind: "notice", Instance: "i-1", Data: json.RawMessage(`{"kind":"rebalance"}`),
			IdempotencyKey: "notices:k1"}}
		first, dup, err := b.RecordReport(ctx, rep)
		if err != nil || dup {
			t.Fatal(dup, err)
		}
		again, dup, err := b.RecordReport(ctx, rep)
		if err != nil || !dup || again.ID != first.ID {
			t.Fatalf("same report again: %+v dup=%v err=%v; want the first event as a duplicate", again, dup, err)
		}
		other := rep
		other.Event.Data = json.RawMessage(`{"kind":"preempt"}`)
		if _, _, err := b.RecordReport(ctx, other); !errors.Is(err, ErrKeyReused) {
			t.Fatalf("same key, other body = %v; want ErrKeyReused", err)
		}
		bad := rep
		bad.Event.IdempotencyKey, bad.Event.Data = "notices:k2", json.RawMessage("{\"detail\":\"\xc3\x28\"}")
		if _, _, err := b.RecordReport(ctx, bad); !errors.Is(err, ErrInvalidText) {
			t.Fatalf("invalid UTF-8 in a report = %v; want ErrInvalidText", err)
		}
	})
}

func TestPruneKeepsTheNewestPricePoint(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		// Four price changes a day apart, then one event a day for 5 days.
		for d, price := range []float64{10, 11, 12, 13} {
			at := t0.Add(time.Duration(d) * 24 * time.Hour)
			mustSave(t, s, "us-east-1", []pricing.Offer{offer("us-east-1", "us-east-1a", "p4d", price, price/2, at)}, at)
		}
		b := mustBroker(t, s)
		for d := range 5 {
			if _, err := b.AddEvent(ctx, EventRecord{At: t0.Add(time.Duration(d) * 24 * time.Hour), Kind: "price_change"}); err != nil {
				t.Fatal(err)
			}
		}
		now := t0.Add(10 * 24 * time.Hour)
		res, err := s.Prune(ctx, Retention{PriceHistory: 9*24*time.Hour + time.Hour, Events: 8*24*time.Hour + time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		key := offer("us-east-1", "us-east-1a", "p4d", 1, 1, t0).Key()
		pts, err := s.PriceHistory(ctx, key, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		// The point of day 0 is removed, days 1 and 2 are kept (inside 9d1h), day 3 is
		// the newest and kept anyway.
		var ods []float64
		for _, p := range pts {
			if p.Capacity == pricing.OnDemand {
				ods = append(ods, p.Price)
			}
		}
		if fmt.Sprint(ods) != "[11 12 13]" || res.PricePoints != 2 {
			t.Fatalf("on-demand history after prune %v (removed %d points); want [11 12 13], 2 removed", ods, res.PricePoints)
		}
		evs, _ := b.ListEvents(ctx, EventFilter{})
		if len(evs) != 3 || res.Events != 2 {
			t.Fatalf("%d events left (%d removed); want 3 left, 2 removed", len(evs), res.Events)
		}
		// Far in the future: every point is old, the newest of each stays.
		res, err = s.Prune(ctx, Retention{PriceHistory: time.Hour}, now.Add(1000*24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		pts, _ = s.PriceHistory(ctx, key, time.Time{})
		if len(pts) != 2 {
			t.Fatalf("%d points left; want the newest on-demand and spot points", len(pts))
		}
		if _, err := s.Prune(ctx, Retention{}, now); err != nil {
			t.Fatalf("a zero retention keeps everything: %v", err)
		}
	})
}

func TestIsUnavailable(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		b := mustBroker(t, s)
		if _, err := b.ListWorkloads(t.Context()); IsUnavailable(err) {
			t.Fatalf("a working store: %v", err)
		}
		_, err := b.CreateWorkload(t.Context(), WorkloadRecord{Name: "x\x00"}, t0)
		if err == nil || IsUnavailable(err) {
			t.Fatalf("a bad value is not an outage: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		_, err = b.ListWorkloads(t.Context())
		if !IsUnavailable(err) {
			t.Fatalf("a closed pool: %v is not classified as unavailable", err)
		}
	})
}

func TestPostgresPasswordOutsideTheDSN(t *testing.T) {
	dsn := postgresDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok {
		// CI's DSN has one; a local server without passwords cannot show
		// where a password comes from.
		if os.Getenv("CI") == "true" {
			t.Fatal("the test DSN has no password to move out of it")
		}
		t.Skip("the test DSN has no password to move out of it")
	}
	u.User = url.User(u.User.Username())
	bare := u.String()

	t.Run("password file", func(t *testing.T) {
		t.Setenv("PGPASSWORD", "")
		f := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(f, []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := OpenWith(t.Context(), bare, nil, Options{PasswordFile: f})
		if err != nil {
			t.Fatalf("OpenWith a password file: %v", err)
		}
		_ = s.Close()
		if err := os.WriteFile(f, []byte("n0t-the-pw\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = OpenWith(t.Context(), bare, nil, Options{PasswordFile: f})
		if err == nil || strings.Contains(err.Error(), "n0t-the-pw") {
			t.Fatalf("a wrong password from a file = %v; want an error without it", err)
		}
		if _, err := OpenWith(t.Context(), bare, nil, Options{PasswordFile: filepath.Join(t.TempDir(), "none")}); err == nil {
			t.Fatal("a missing password file opened")
		}
	})
	t.Run("PGPASSWORD", func(t *testing.T) {
		t.Setenv("PGPASSWORD", pw)
		t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
		s, err := Open(t.Context(), bare, nil)
		if err != nil {
			t.Fatalf("Open with PGPASSWORD: %v", err)
		}
		_ = s.Close()
	})
}

// TestPruneAgentsAndLaunchIntents: agents silent for longer than the
// retention go (a heartbeat counts as a sign of life, else registration);
// retired launch intents go when old, but each slot id keeps its highest
// generation so LastGeneration survives pruning; open and launched intents
// are never pruned.
func TestPruneAgentsAndLaunchIntents(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		b := mustBroker(t, s)
		for _, id := range []string{"old-silent", "old-beating", "new"} {
			at := t0
			if id == "new" {
				at = t0.Add(25 * 24 * time.Hour)
			}
			if _, err := b.RegisterAgent(ctx, InstanceRecord{ID: id, Cloud: "aws"}, "h"+id, at); err != nil {
				t.Fatal(err)
			}
		}
		errs, err := b.Heartbeats(ctx, []HeartbeatUpdate{{Instance: "old-beating", At: t0.Add(25 * 24 * time.Hour), Telemetry: []byte(`[]`)}})
		if err != nil || errs[0] != nil {
			t.Fatal(err, errs)
		}
		f, err := b.Fleet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		old, recent := t0, t0.Add(25*24*time.Hour)
		intent := func(tok, slot string, gen int, state string, at time.Time) IntentRecord {
			return IntentRecord{Token: tok, SlotID: slot, Generation: gen, Cloud: "aws", State: state, CreatedAt: at, UpdatedAt: at}
		}
		err = f.Apply(ctx, Fence{Now: t0}, FleetChanges{Intents: []IntentRecord{
			intent("a1", "a/0", 1, IntentRetired, old), intent("a2", "a/0", 2, IntentRetired, old), // a/0: only a2 stays
			intent("b1", "b/0", 1, IntentRetired, old), intent("b2", "b/0", 2, IntentRetired, recent), // b1 goes
			intent("c1", "c/0", 1, IntentLaunched, old), intent("c2", "c/0", 2, IntentOpen, old), // never pruned
		}})
		if err != nil {
			t.Fatal(err)
		}
		now := t0.Add(30 * 24 * time.Hour)
		res, err := s.Prune(ctx, Retention{Agents: 7 * 24 * time.Hour, LaunchIntents: 7 * 24 * time.Hour}, now)
		if err != nil {
			t.Fatal(err)
		}
		if res.Agents != 1 || res.LaunchIntents != 2 {
			t.Fatalf("pruned %d agents and %d intents; want 1 and 2", res.Agents, res.LaunchIntents)
		}
		if _, err := b.GetInstance(ctx, "old-silent"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("old-silent: %v, want not found", err)
		}
		for _, id := range []string{"old-beating", "new"} {
			if _, err := b.GetInstance(ctx, id); err != nil {
				t.Fatalf("%s: %v", id, err)
			}
		}
		for slot, want := range map[string]int{"a/0": 2, "b/0": 2, "c/0": 2, "d/0": 0} {
			if got, err := f.LastGeneration(ctx, slot); err != nil || got != want {
				t.Fatalf("last generation of %s = %d, %v; want %d", slot, got, err, want)
			}
		}
		var left []string
		if err := s.db.Model(&intentRow{}).Order("token").Pluck("token", &left).Error; err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(left) != "[a2 b2 c1 c2]" {
			t.Fatalf("intents left %v; want [a2 b2 c1 c2]", left)
		}
	})
}
