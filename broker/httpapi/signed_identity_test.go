package httpapi_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/broker/identity"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

const awsDoc = `{
  "accountId" : "123456789012",
  "availabilityZone" : "us-east-1b",
  "instanceId" : "i-0signed",
  "instanceType" : "g5.xlarge",
  "region" : "us-east-1"
}`

// TestSignedIdentity: with AWS certificates configured, a registration's
// signed identity document must verify and name the registering instance;
// it lets a bootstrap token re-register the instance it proves to be (an
// agent that lost its state), and RequireIdentity refuses bootstrap
// registrations without one.
func TestSignedIdentity(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	cert, _ := x509.ParseCertificate(der)
	sign := func(doc string) string {
		sum := sha256.Sum256([]byte(doc))
		sig, _ := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		return base64.StdEncoding.EncodeToString(sig)
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(ctx, b.dsn(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			br, _ := st.Broker(ctx)
			admin, hash, _ := httpapi.NewToken()
			if _, err := br.EnsureFirstAdminToken(ctx, hash, "first", time.Now()); err != nil {
				t.Fatal(err)
			}
			cat, _ := pricing.EmbeddedCatalog()
			srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: br, Catalog: func() *pricing.Catalog { return cat },
				Identity: &identity.Verifier{AWS: []*x509.Certificate{cert}}, RequireIdentity: true}).Handler())
			defer srv.Close()
			a := apiv1.NewClient(srv.URL, admin, srv.Client())
			boot, err := a.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenBootstrap, Name: "cloud-init"})
			if err != nil {
				t.Fatal(err)
			}
			bc := a.WithToken(boot.Secret)
			reg := func(id string, ident *apiv1.InstanceIdentity) (apiv1.RegisterResponse, error) {
				return bc.Register(ctx, apiv1.RegisterRequest{Cloud: "aws", InstanceID: id, AgentVersion: "(devel)", Region: "eu-west-1", Identity: ident})
			}
			good := &apiv1.InstanceIdentity{Cloud: "aws", Document: awsDoc, Signature: sign(awsDoc)}

			if _, err := reg("i-0signed", nil); apiv1.StatusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), "requires a signed instance identity") {
				t.Fatalf("bootstrap without identity under RequireIdentity: %v", err)
			}
			first, err := reg("i-0signed", good)
			if err != nil {
				t.Fatalf("verified registration: %v", err)
			}
			if first.Instance.Region != "us-east-1" || first.Instance.Zone != "us-east-1b" || first.Instance.InstanceType != "g5.xlarge" {
				t.Fatalf("the signed document's placement wins over the body's: %+v", first.Instance)
			}
			// The same instance, state lost: the bootstrap token plus its
			// signed identity re-registers it.
			if _, err := reg("i-0signed", good); err != nil {
				t.Fatalf("re-registration proven by the signed identity: %v", err)
			}
			// Someone else's document, or a forged one, gets nothing.
			if _, err := reg("i-0other", good); apiv1.StatusOf(err) != http.StatusForbidden || !strings.Contains(err.Error(), `"i-0signed", not "i-0other"`) {
				t.Fatalf("identity of another instance: %v", err)
			}
			forged := strings.Replace(awsDoc, "i-0signed", "i-0forged", 1)
			if _, err := reg("i-0forged", &apiv1.InstanceIdentity{Cloud: "aws", Document: forged, Signature: sign(awsDoc)}); apiv1.StatusOf(err) != http.StatusForbidden {
				t.Fatalf("forged document: %v", err)
			}
			// Registration tokens need no identity.
			rt, _ := a.CreateToken(ctx, apiv1.TokenInput{Kind: apiv1.TokenRegistration, InstanceID: "i-0minted"})
			if _, err := a.WithToken(rt.Secret).Register(ctx, apiv1.RegisterRequest{Cloud: "aws", InstanceID: "i-0minted", AgentVersion: "v1"}); err != nil {
				t.Fatalf("registration token without identity: %v", err)
			}
		})
	}
}
