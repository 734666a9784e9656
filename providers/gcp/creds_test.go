package gcp

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/auth/credentials"
)

// TestCredentialProbeIsBounded: with no key file and no gcloud login the
// credential search ends (with an error) within the probe limit plus slack,
// whether or not a metadata server answers here.
func TestCredentialProbeIsBounded(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	start := time.Now()
	_, err := detectCredentials(context.Background(), &credentials.DetectOptions{Scopes: []string{"https://www.googleapis.com/auth/cloud-platform"}})
	if err == nil {
		t.Fatal("found credentials in an empty environment")
	}
	if took := time.Since(start); took > credentialProbeLimit+2*time.Second {
		t.Errorf("credential search took %s; bounded at %s", took, credentialProbeLimit)
	}
}
