//go:build !agentonly

package main

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// TestTokenCommand runs "gpubroker token" against a real broker API.
func TestTokenCommand(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "b.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := st.Broker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin, hash, _ := httpapi.NewToken()
	if _, err := b.EnsureFirstAdminToken(ctx, hash, "first", time.Now()); err != nil {
		t.Fatal(err)
	}
	cat, _ := pricing.EmbeddedCatalog()
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: b, Catalog: func() *pricing.Catalog { return cat }}).Handler())
	defer srv.Close()
	t.Setenv("GPUBROKER_URL", srv.URL)
	t.Setenv("GPUBROKER_TOKEN", "")

	_, errOut, code := execute(t, newTokenCmd(), "token", "list")
	if code != exitUsageError || !strings.Contains(errOut, "GPUBROKER_TOKEN") {
		t.Fatalf("no token: exit %d %q", code, errOut)
	}
	t.Setenv("GPUBROKER_TOKEN", admin)

	out, errOut, code := execute(t, newTokenCmd(), "token", "create", "--kind", "bootstrap", "--name", "cloud-init")
	secret := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(secret, "gpb_") || !strings.Contains(errOut, "shown only now") || strings.Contains(errOut, secret) {
		t.Fatalf("create: exit %d out %q err %q", code, out, errOut)
	}
	out, _, code = execute(t, newTokenCmd(), "token", "create", "--kind", "registration", "--instance", "i-0abc", "--ttl", "10m")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "gpb_") {
		t.Fatalf("create registration: %d %q", code, out)
	}
	out, _, code = execute(t, newTokenCmd(), "token", "list", "-o", "json")
	var l apiv1.List[apiv1.Token]
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Items) != 3 {
		t.Fatalf("list json: %d %s", code, out)
	}
	if strings.Contains(out, secret) || strings.Contains(out, admin) {
		t.Fatal("list shows a secret")
	}
	bootID := store.TokenID(store.HashToken(secret))
	out, _, code = execute(t, newTokenCmd(), "token", "list", "--kind", "bootstrap")
	if code != 0 || !strings.Contains(out, bootID) || !strings.Contains(out, "cloud-init") || strings.Contains(out, "i-0abc") {
		t.Fatalf("list bootstrap: %d\n%s", code, out)
	}
	out, _, code = execute(t, newTokenCmd(), "token", "revoke", bootID)
	if code != 0 || !strings.Contains(out, "revoked "+bootID) {
		t.Fatalf("revoke: %d %q", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"revoke", bootID}, "not found"},
		{[]string{"revoke", "nothex"}, "is not valid"},
		{[]string{"create", "--kind", "agent", "--name", "x"}, "use admin, bootstrap or registration"},
		{[]string{"create", "--kind", "registration", "--instance", "a/b"}, "instance_id"},
		{[]string{"create", "--kind", "admin", "--name", "x", "--ttl", "1.5s"}, "whole number of seconds"},
		{[]string{"revoke", store.TokenID(hash)}, "last admin token"},
		{[]string{"list", "--broker", "ftp://x"}, "http:// or https://"},
		{[]string{"list", "-o", "yaml"}, "table or json"},
	} {
		_, errOut, code := execute(t, newTokenCmd(), append([]string{"token"}, c.args...)...)
		if code != exitUsageError || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}
