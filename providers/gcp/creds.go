package gcp

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/auth/credentials"

	"github.com/gpubroker/gpubroker/providers"
)

// credentialProbeLimit bounds the search for application default
// credentials: without a key file or gcloud login, the SDK asks whether it
// runs on GCE by probing the metadata server, which off GCE can take
// several seconds and takes no context.
const credentialProbeLimit = 3 * time.Second

// detectCredentials is credentials.DetectDefault bounded by ctx and
// credentialProbeLimit; giving up counts as no credentials.
func detectCredentials(ctx context.Context, opts *credentials.DetectOptions) (*auth.Credentials, error) {
	type result struct {
		c   *auth.Credentials
		err error
	}
	ch := make(chan result, 1) // the probe may finish after we gave up
	go func() {
		c, err := credentials.DetectDefault(opts)
		ch <- result{c, err}
	}()
	t := time.NewTimer(credentialProbeLimit)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.c, r.err
	case <-t.C:
		return nil, fmt.Errorf("%w: no application default credentials found within %s (set GOOGLE_APPLICATION_CREDENTIALS or run gcloud auth application-default login)", providers.ErrNoCredentials, credentialProbeLimit)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
