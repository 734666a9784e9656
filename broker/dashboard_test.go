package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/dashboard"
	"github.com/gpubroker/gpubroker/store"
)

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpubroker test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLSDashboard serves the API and the dashboard over HTTPS: the
// dashboard's cookies are then Secure with the __Host- prefix, and HSTS is
// sent.
func TestServeTLSDashboard(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	r := startDaemon(t, Config{DSN: filepath.Join(t.TempDir(), "b.db"), NoRefresh: true, TLSCert: certFile, TLSKey: keyFile})
	if !strings.Contains(r.out.String(), "listening on https://") {
		t.Errorf("startup line does not say https: %q", r.out.String())
	}
	base := strings.Replace(r.url, "http://", "https://", 1)
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Errorf("GET /ui/login over TLS: %s, HSTS %q", resp.Status, resp.Header.Get("Strict-Transport-Security"))
	}
	var found bool
	for _, ck := range resp.Cookies() {
		if ck.Name == "__Host-gpubroker_login" {
			found = ck.Secure && ck.HttpOnly && ck.SameSite == http.SameSiteStrictMode
		}
	}
	if !found {
		t.Errorf("no Secure __Host- login cookie: %v", resp.Cookies())
	}
	// The API answers on the same TLS listener.
	resp, err = c.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz over TLS: %s", resp.Status)
	}
	// Plain HTTP to the TLS port is refused.
	if resp, err := http.Get(r.url + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served on the TLS listener")
		}
	}
}

func TestServeTLSNeedsBothFiles(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t)
	for _, cfg := range []Config{{TLSCert: certFile}, {TLSKey: keyFile}} {
		cfg.DSN = filepath.Join(t.TempDir(), "b.db")
		if err := Run(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "both a certificate") {
			t.Errorf("Run with only one TLS file: %v", err)
		}
	}
	cfg := Config{DSN: filepath.Join(t.TempDir(), "b.db"), TLSCert: certFile, TLSKey: certFile}
	if err := Run(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "TLS certificate and key") {
		t.Errorf("Run with a certificate as its key: %v", err)
	}
}

// TestDashSpend sums the ledger's entries of this month for the dashboard,
// and reports ErrNoSource while the ledger is empty.
func TestDashSpend(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := st.Broker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 15, 10, 0, 0, 0, time.UTC)
	if _, err := (dashSpend{b}).Spend(ctx, now); !errors.Is(err, dashboard.ErrNoSource) {
		t.Fatalf("empty ledger: %v, want ErrNoSource", err)
	}
	day := func(d int) time.Time { return time.Date(2026, 12, d, 0, 0, 0, 0, time.UTC) }
	if err := b.UpsertSpend(ctx, []store.SpendEntry{
		{Day: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), Instance: "old", Cost: 1000, OnDemand: 3000}, // last month
		{Day: day(1), Instance: "a", Cost: 10, OnDemand: 30},
		{Day: day(1), Instance: "b", Cost: 5, OnDemand: 5},
		{Day: day(15), Instance: "a", Cost: 2, OnDemand: 6},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := (dashSpend{b}).Spend(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.TodayUSD != 2 || got.MonthUSD != 17 || got.OnDemandMonthUSD != 41 || len(got.Daily) != 2 || got.Daily[0].USD != 15 {
		t.Errorf("spend = %+v", got)
	}
}
