package httpapi_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/store"
)

// TestVerifyAdmin: the dashboard's login accepts admin tokens only, by the
// same lookup as the API's bearer auth.
func TestVerifyAdmin(t *testing.T) {
	e := newEnv(t, filepath.Join(t.TempDir(), "v.db"))
	ctx := context.Background()
	name, err := e.api.VerifyAdmin(ctx, e.admin)
	if err != nil || name != "test" {
		t.Fatalf("admin token: %q, %v", name, err)
	}
	// Surrounding blanks are ignored, as in the Authorization header.
	if _, err := e.api.VerifyAdmin(ctx, " "+e.admin+"\n"); err != nil {
		t.Errorf("admin token with blanks: %v", err)
	}
	for kind, subject := range map[string]string{store.TokenAgent: "i-123", store.TokenBootstrap: "cloud-init"} {
		tok, hash, err := httpapi.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if err := e.broker.AddToken(ctx, store.TokenRecord{Hash: hash, Kind: kind, Subject: subject, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.api.VerifyAdmin(ctx, tok); !errors.Is(err, httpapi.ErrBadToken) {
			t.Errorf("%s token: %v, want ErrBadToken", kind, err)
		}
	}
	for _, tok := range []string{"", "gpb_unknown", e.admin + "x"} {
		if _, err := e.api.VerifyAdmin(ctx, tok); !errors.Is(err, httpapi.ErrBadToken) {
			t.Errorf("token %q: %v, want ErrBadToken", tok, err)
		}
	}
}
