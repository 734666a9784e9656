package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/gpubroker/gpubroker/pricing"
)

// EnvPostgresDSN names a PostgreSQL database the tests may create schemas
// in, e.g. postgres://gpubroker:gpubroker@127.0.0.1:5432/gpubroker_test.
const EnvPostgresDSN = "GPUBROKER_TEST_POSTGRES_DSN"

// backends returns a fresh, empty store per available database: SQLite in a
// temporary directory always; PostgreSQL (in a schema of its own, dropped
// afterwards) when EnvPostgresDSN is set.
func backends(t *testing.T) map[string]func(t *testing.T) *Store {
	t.Helper()
	return map[string]func(t *testing.T) *Store{
		"sqlite":   openSQLite,
		"postgres": openPostgres,
	}
}

func openSQLite(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "sub", "gpubroker.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// postgresDSN returns the test DSN pointed at a new schema, or skips.
func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(EnvPostgresDSN)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the PostgreSQL store tests", EnvPostgresDSN)
		}
		t.Skipf("%s not set: skipping PostgreSQL (e.g. postgres://gpubroker:gpubroker@127.0.0.1:5432/gpubroker_test)", EnvPostgresDSN)
	}
	admin, err := Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatalf("opening %s: %v", Redact(dsn), err)
	}
	schema := fmt.Sprintf("t_%d_%d", time.Now().UnixNano(), rand.IntN(1e6))
	if err := admin.db.Exec("CREATE SCHEMA " + schema).Error; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.db.Exec("DROP SCHEMA " + schema + " CASCADE").Error
		_ = admin.Close()
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func openPostgres(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), postgresDSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func offer(region, zone, it string, od, spot float64, at time.Time) pricing.Offer {
	return pricing.Offer{Cloud: pricing.AWS, Region: region, Zone: zone, InstanceType: it, GPU: pricing.A100_80,
		GPUCount: 8, GPUMemoryGiB: 80, VCPUs: 96, MemoryGiB: 1152, OnDemandPrice: od, SpotPrice: spot,
		Spot:       pricing.SpotSignal{Bucket: "5-10%", InterruptionsPerHour: 0.0001, PlacementScore: 7, Availability: 0.93},
		ObservedAt: at, Source: "test"}
}

func forEach(t *testing.T, fn func(t *testing.T, s *Store)) {
	for name, open := range backends(t) {
		t.Run(name, func(t *testing.T) { fn(t, open(t)) })
	}
}

func mustSave(t *testing.T, s *Store, region string, offers []pricing.Offer, at time.Time) SaveResult {
	t.Helper()
	res, err := s.SaveOffers(t.Context(), pricing.AWS, region, offers, at)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func loadAll(t *testing.T, s *Store) map[string]pricing.Offer {
	t.Helper()
	offers, err := s.Offers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]pricing.Offer)
	for _, o := range offers {
		m[o.Key()] = o
	}
	return m
}

func TestSaveAndLoadRoundTrip(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		in := []pricing.Offer{
			offer("us-east-1", "us-east-1a", "p4de.24xlarge", 40.96633, 12.3456789, t0),
			offer("us-east-1", "", "p4de.24xlarge", 40.96633, 0, time.Time{}), // zero observed-at: takes `at`
		}
		in[1].Spot = pricing.SpotSignal{}
		res := mustSave(t, s, "us-east-1", in, t0.Add(time.Minute))
		if res.Inserted != 2 || res.Updated != 0 || res.PriceChanges != 0 || res.Points != 3 {
			t.Errorf("result = %+v, want 2 inserted, 3 first points, 0 changes", res)
		}
		got := loadAll(t, s)
		want0 := in[0]
		want1 := in[1]
		want1.ObservedAt = t0.Add(time.Minute)
		for _, w := range []pricing.Offer{want0, want1} {
			if g := got[w.Key()]; !reflect.DeepEqual(g, w) {
				t.Errorf("loaded %+v\nwant   %+v", g, w)
			}
		}
		cat, err := s.Catalog(t.Context())
		if err != nil || cat.Len() != 2 || !cat.GeneratedAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("Catalog() = %v offers at %v, %v; want 2 at %v", cat.Len(), cat.GeneratedAt, err, t0.Add(time.Minute))
		}
	})
}

func TestEmptyStoreCatalogIsNil(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		cat, err := s.Catalog(t.Context())
		if err != nil || cat != nil {
			t.Fatalf("Catalog() on an empty store = %v, %v; want nil, nil", cat, err)
		}
	})
}

func TestHistoryOnlyOnChange(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		key := offer("us-west-2", "us-west-2b", "p5.48xlarge", 1, 1, t0).Key()
		steps := []struct {
			od, spot    float64
			wantChanges int
			wantPoints  int
		}{
			{98.32, 31.10, 0, 2}, // first prices
			{98.32, 31.10, 0, 0}, // unchanged: nothing recorded
			{98.32, 29.75, 1, 1}, // spot moved
			{98.32, 0, 0, 0},     // spot unknown: not a price, nothing recorded
			{98.32, 29.75, 0, 0}, // back to the last recorded spot price: no change
			{90.00, 33.00, 2, 2}, // both moved
		}
		for i, st := range steps {
			at := t0.Add(time.Duration(i) * time.Hour)
			res := mustSave(t, s, "us-west-2", []pricing.Offer{offer("us-west-2", "us-west-2b", "p5.48xlarge", st.od, st.spot, at)}, at)
			if res.PriceChanges != st.wantChanges || res.Points != st.wantPoints {
				t.Errorf("step %d: %+v, want %d changes, %d points", i, res, st.wantChanges, st.wantPoints)
			}
		}
		h, err := s.PriceHistory(t.Context(), key, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range h {
			got = append(got, fmt.Sprintf("%s %s %g", p.ObservedAt.Format("15:04"), p.Capacity, p.Price))
		}
		want := []string{"10:00 on-demand 98.32", "10:00 spot 31.1", "12:00 spot 29.75", "15:00 on-demand 90", "15:00 spot 33"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("history = %q\nwant      %q", got, want)
		}
		since, err := s.PriceHistory(t.Context(), key, t0.Add(2*time.Hour))
		if err != nil || len(since) != 3 {
			t.Errorf("history since 12:00 = %d points, %v; want 3", len(since), err)
		}
		none, err := s.PriceHistory(t.Context(), "aws/nowhere//x", time.Time{})
		if err != nil || len(none) != 0 {
			t.Errorf("history of an unknown key = %v, %v; want none", none, err)
		}
	})
}

func TestMissingOffersAreKeptAndOlderObservationsIgnored(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		a := offer("eu-west-1", "eu-west-1a", "g5.xlarge", 1.1, 0.4, t0)
		b := offer("eu-west-1", "eu-west-1b", "g5.xlarge", 1.1, 0.5, t0)
		mustSave(t, s, "eu-west-1", []pricing.Offer{a, b}, t0)
		a2 := a
		a2.SpotPrice, a2.ObservedAt = 0.45, t0.Add(time.Hour)
		res := mustSave(t, s, "eu-west-1", []pricing.Offer{a2}, t0.Add(time.Hour))
		if res.Updated != 1 || res.PriceChanges != 1 {
			t.Errorf("second save = %+v, want 1 updated with 1 change", res)
		}
		got := loadAll(t, s)
		if len(got) != 2 || !got[b.Key()].ObservedAt.Equal(t0) || got[a.Key()].SpotPrice != 0.45 {
			t.Errorf("after a refresh without b: %+v; want a updated and b kept at its old observed-at", got)
		}
		stale := a
		stale.SpotPrice, stale.ObservedAt = 9, t0.Add(-time.Hour)
		res = mustSave(t, s, "eu-west-1", []pricing.Offer{stale}, t0)
		if res.Older != 1 || res.Points != 0 {
			t.Errorf("older observation: %+v, want it ignored", res)
		}
		if got := loadAll(t, s)[a.Key()]; got.SpotPrice != 0.45 {
			t.Errorf("older observation overwrote the newer one: spot %v", got.SpotPrice)
		}
		if n, err := s.CountOffers(t.Context(), pricing.AWS, "eu-west-1"); err != nil || n != 2 {
			t.Errorf("CountOffers = %d, %v; want 2", n, err)
		}
	})
}

func TestSaveOffersRejectsBadInput(t *testing.T) {
	good := offer("us-east-1", "us-east-1a", "p4d.24xlarge", 32.77, 0, t0)
	wrongRegion := offer("us-east-2", "us-east-2a", "p4d.24xlarge", 32.77, 0, t0)
	noPrice := offer("us-east-1", "us-east-1b", "p4d.24xlarge", 0, 0, t0)
	cases := []struct {
		name   string
		offers []pricing.Offer
		want   string
	}{
		{"other region", []pricing.Offer{good, wrongRegion}, "belongs to another cloud or region"},
		{"invalid offer", []pricing.Offer{good, noPrice}, "neither an on-demand nor a spot price"},
		{"duplicate", []pricing.Offer{good, good}, "appears twice"},
	}
	forEach(t, func(t *testing.T, s *Store) {
		for _, c := range cases {
			_, err := s.SaveOffers(t.Context(), pricing.AWS, "us-east-1", c.offers, t0)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
			}
		}
		if got := loadAll(t, s); len(got) != 0 {
			t.Errorf("rejected saves wrote %d offers", len(got))
		}
	})
}

// TestSaveOffersIsAtomic makes the database fail after the offers are
// written but before the price points are, and checks the old data is
// intact: no offer changed and no point was added.
func TestSaveOffersIsAtomic(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		old := []pricing.Offer{
			offer("ap-northeast-1", "ap-northeast-1a", "p4d.24xlarge", 44.0, 13.0, t0),
			offer("ap-northeast-1", "ap-northeast-1c", "p4d.24xlarge", 44.0, 14.0, t0),
		}
		mustSave(t, s, "ap-northeast-1", old, t0)
		before := loadAll(t, s)
		hist0, _ := s.PriceHistory(t.Context(), old[0].Key(), time.Time{})

		injected := errors.New("injected failure")
		err := s.db.Callback().Create().After("gorm:create").Register("test:fail_points", func(db *gorm.DB) {
			if db.Statement.Table == "price_points" {
				_ = db.AddError(injected)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		fresh := []pricing.Offer{
			offer("ap-northeast-1", "ap-northeast-1a", "p4d.24xlarge", 50.0, 20.0, t0.Add(time.Hour)),
			offer("ap-northeast-1", "ap-northeast-1d", "p4d.24xlarge", 50.0, 21.0, t0.Add(time.Hour)),
		}
		_, err = s.SaveOffers(t.Context(), pricing.AWS, "ap-northeast-1", fresh, t0.Add(time.Hour))
		if !errors.Is(err, injected) {
			t.Fatalf("SaveOffers error = %v, want the injected failure", err)
		}
		if err := s.db.Callback().Create().Remove("test:fail_points"); err != nil {
			t.Fatal(err)
		}
		if after := loadAll(t, s); !reflect.DeepEqual(after, before) {
			t.Errorf("a failed save changed the offers:\n got %+v\nwant %+v", after, before)
		}
		if hist1, _ := s.PriceHistory(t.Context(), old[0].Key(), time.Time{}); len(hist1) != len(hist0) {
			t.Errorf("a failed save changed the history: %d points, want %d", len(hist1), len(hist0))
		}
	})
}

// TestSaveOffersSurvivesCrash kills a process in the middle of SaveOffers
// (after the offers are written, before commit) and checks the SQLite file
// still holds exactly the old data.
func TestSaveOffersSurvivesCrash(t *testing.T) {
	if path := os.Getenv("GPUBROKER_TEST_CRASH_DB"); path != "" {
		crashDuringSave(path) // child: never returns
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	s, err := Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := []pricing.Offer{offer("us-east-1", "us-east-1a", "p5.48xlarge", 98.32, 30, t0)}
	mustSave(t, s, "us-east-1", old, t0)
	before := loadAll(t, s)
	_ = s.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestSaveOffersSurvivesCrash$")
	cmd.Env = append(os.Environ(), "GPUBROKER_TEST_CRASH_DB="+path)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("child should have crashed with status 3 mid-save: %v\n%s", err, out)
	}

	s, err = Open(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if after := loadAll(t, s); !reflect.DeepEqual(after, before) {
		t.Errorf("after a crash mid-save:\n got %+v\nwant %+v", after, before)
	}
}

func crashDuringSave(path string) {
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = s.db.Callback().Create().After("gorm:create").Register("test:crash", func(db *gorm.DB) {
		if db.Statement.Table == "offers" {
			os.Exit(3) // the offers UPDATE ran inside the open transaction
		}
	})
	fresh := []pricing.Offer{offer("us-east-1", "us-east-1a", "p5.48xlarge", 1, 1, t0.Add(time.Hour)),
		offer("us-east-1", "us-east-1b", "p5.48xlarge", 1, 1, t0.Add(time.Hour))}
	_, err = s.SaveOffers(context.Background(), pricing.AWS, "us-east-1", fresh, t0.Add(time.Hour))
	fmt.Fprintln(os.Stderr, "SaveOffers returned instead of crashing:", err)
	os.Exit(1)
}

func TestConcurrentSaves(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		regions := []string{"us-east-1", "us-east-2", "us-west-2", "eu-west-1", "eu-central-1", "ap-northeast-1"}
		var wg sync.WaitGroup
		errs := make(chan error, len(regions)*3)
		for round := range 3 {
			for _, r := range regions {
				wg.Go(func() {
					at := t0.Add(time.Duration(round) * time.Hour)
					_, err := s.SaveOffers(context.Background(), pricing.AWS, r,
						[]pricing.Offer{offer(r, r+"a", "g6.xlarge", 0.8+float64(round), 0, at)}, at)
					errs <- err
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if got := loadAll(t, s); len(got) != len(regions) {
			t.Errorf("%d offers after concurrent saves, want %d", len(got), len(regions))
		}
	})
}

func TestSchemaVersion(t *testing.T) {
	forEach(t, func(t *testing.T, s *Store) {
		v, err := s.SchemaVersion(t.Context())
		if err != nil || v != SchemaVersion {
			t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, SchemaVersion)
		}
		if err := s.migrate(t.Context()); err != nil {
			t.Fatalf("migrating twice: %v", err)
		}
		if err := s.db.Exec("UPDATE schema_version SET version = ?", SchemaVersion+1).Error; err != nil {
			t.Fatal(err)
		}
		if err := s.migrate(t.Context()); !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("migrate on a newer schema = %v, want ErrSchemaTooNew", err)
		}
	})
}

func TestOpenRefusesNewerSchemaFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	s, err := Open(t.Context(), "sqlite://"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.db.Exec("UPDATE schema_version SET version = 99").Error
	_ = s.Close()
	if _, err := Open(t.Context(), path, nil); !errors.Is(err, ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 99") {
		t.Fatalf("Open = %v, want ErrSchemaTooNew naming version 99", err)
	}
}

func TestParseDSN(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/data")
	cases := []struct {
		dsn     string
		dialect Dialect
		path    string
		err     string
	}{
		{"", SQLite, "/data/gpubroker/gpubroker.db", ""},
		{"/tmp/x.db", SQLite, "/tmp/x.db", ""},
		{"rel/x.db", SQLite, "rel/x.db", ""},
		{"sqlite:///tmp/x.db", SQLite, "/tmp/x.db", ""},
		{"sqlite://x.db", SQLite, "x.db", ""},
		{"sqlite:x.db", SQLite, "x.db", ""},
		{"postgres://u:p@127.0.0.1:5432/db?sslmode=disable", Postgres, "", ""},
		{"postgresql://u@h/db", Postgres, "", ""},
		{"host=127.0.0.1 user=u dbname=db", Postgres, "", ""},
		{"mysql://u@h/db", "", "", `unsupported scheme "mysql"`},
		{"sqlite://", "", "", "empty SQLite path"},
		{"x.db?mode=ro", "", "", "holds '?'"},
	}
	for _, c := range cases {
		got, err := ParseDSN(c.dsn)
		if c.err != "" {
			if err == nil || !errors.Is(err, ErrBadDSN) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseDSN(%q) error = %v, want ErrBadDSN with %q", c.dsn, err, c.err)
			}
			continue
		}
		if err != nil || got.Dialect != c.dialect || got.Path != c.path {
			t.Errorf("ParseDSN(%q) = %+v, %v; want %s %q", c.dsn, got, err, c.dialect, c.path)
		}
	}
}

func TestDefaultPathWithoutXDG(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("HOME", "/home/u")
	if p, err := DefaultPath(); err != nil || p != "/home/u/.local/share/gpubroker/gpubroker.db" {
		t.Errorf("DefaultPath() = %q, %v", p, err)
	}
}

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"postgres://u:s3cret@h:5432/db":           "postgres://u:xxxxx@h:5432/db",
		"postgres://u@h/db":                       "postgres://u@h/db",
		"host=h user=u password=s3cret dbname=db": "host=h user=u password=xxxxx dbname=db",
		"host=h password='s 3cret' dbname=db":     "host=h password=xxxxx dbname=db",
		"/var/lib/gpubroker/gpubroker.db":         "/var/lib/gpubroker/gpubroker.db",
	}
	for in, want := range cases {
		if got := Redact(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpenPostgresBadPasswordIsRedacted(t *testing.T) {
	dsn := postgresDSN(t) // skips (fails under CI) without a server
	u, _ := url.Parse(dsn)
	u.User = url.UserPassword(u.User.Username(), "wr0ng-s3cret")
	_, err := Open(t.Context(), u.String(), nil)
	if err == nil || strings.Contains(err.Error(), "wr0ng-s3cret") {
		t.Fatalf("Open with a wrong password = %v; want an error without the password", err)
	}
}
