package agent_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent"
	"github.com/gpubroker/gpubroker/agent/internal/fakecloud"
	"github.com/gpubroker/gpubroker/broker/identity"
)

func TestIdentify(t *testing.T) {
	for _, tc := range []struct {
		cloud string
		srv   *httptest.Server
		want  agent.Identity
	}{
		{"aws", httptest.NewServer(fakecloud.NewAWS()), agent.Identity{InstanceID: "i-0123456789abcdef0", Region: "us-east-1",
			Zone: "us-east-1b", InstanceType: "g5.xlarge", Capacity: "spot"}},
		{"gcp", httptest.NewServer(fakecloud.NewGCP()), agent.Identity{InstanceID: "gpu-worker-1", Region: "us-central1",
			Zone: "us-central1-a", InstanceType: "g2-standard-8", Capacity: "spot"}},
		{"azure", httptest.NewServer(fakecloud.NewAzure("vm-1")), agent.Identity{InstanceID: "vm-1",
			Region: "eastus", Zone: "eastus-2", InstanceType: "Standard_NC24ads_A100_v4", Capacity: "spot"}},
	} {
		got, err := agent.Identify(t.Context(), tc.cloud, tc.srv.URL, tc.srv.Client())
		tc.srv.Close()
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.cloud, got, err, tc.want)
		}
	}
	down := httptest.NewServer(fakecloud.NewAWS())
	down.Close()
	if _, err := agent.Identify(t.Context(), "aws", down.URL, nil); err == nil {
		t.Error("no metadata service, no error")
	}
}

// TestIdentifyAWSSigned: on AWS the agent reads the signed identity
// document byte for byte, and the broker's verifier accepts it.
func TestIdentifyAWSSigned(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	cert, _ := x509.ParseCertificate(der)
	fake := fakecloud.NewAWS()
	fake.Signer = key
	srv := httptest.NewServer(fake)
	defer srv.Close()
	id, err := agent.Identify(t.Context(), "aws", srv.URL, srv.Client())
	if err != nil || id.Signed == nil || id.Signed.Document != fakecloud.AWSIdentityDocument {
		t.Fatalf("identity %+v %v", id, err)
	}
	v, err := (&identity.Verifier{AWS: []*x509.Certificate{cert}}).Verify(t.Context(), *id.Signed)
	if err != nil || v.InstanceID != id.InstanceID {
		t.Fatalf("broker verification of what the agent read: %+v %v", v, err)
	}
}
