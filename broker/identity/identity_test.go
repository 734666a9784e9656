package identity

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
)

// testCert makes a self-signed RSA certificate standing in for AWS's.
func testCert(t *testing.T) (*rsa.PrivateKey, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test aws"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func sign(t *testing.T, key *rsa.PrivateKey, doc string) string {
	sum := sha256.Sum256([]byte(doc))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	// IMDS wraps the base64 at 64 columns.
	s := base64.StdEncoding.EncodeToString(sig)
	var b strings.Builder
	for len(s) > 64 {
		b.WriteString(s[:64] + "\n")
		s = s[64:]
	}
	return b.String() + s
}

const doc = `{
  "accountId" : "123456789012",
  "availabilityZone" : "us-east-1b",
  "instanceId" : "i-0123456789abcdef0",
  "instanceType" : "g5.xlarge",
  "region" : "us-east-1"
}`

func TestVerifyAWS(t *testing.T) {
	key, certPEM := testCert(t)
	other, otherPEM := testCert(t)
	certs, err := ParseCertificates(append(append([]byte("junk\n"), otherPEM...), certPEM...))
	if err != nil || len(certs) != 2 {
		t.Fatalf("certs %d %v", len(certs), err)
	}
	v := &Verifier{AWS: certs}
	got, err := v.Verify(t.Context(), apiv1.InstanceIdentity{Cloud: "aws", Document: doc, Signature: sign(t, key, doc)})
	want := Verified{Cloud: "aws", InstanceID: "i-0123456789abcdef0", Region: "us-east-1", Zone: "us-east-1b", InstanceType: "g5.xlarge", AccountID: "123456789012"}
	if err != nil || got != want {
		t.Fatalf("verify: %+v %v", got, err)
	}
	onlyOther, _ := ParseCertificates(otherPEM)
	tampered := strings.Replace(doc, "i-0123456789abcdef0", "i-0victim", 1)
	for name, tc := range map[string]struct {
		v  *Verifier
		id apiv1.InstanceIdentity
	}{
		"tampered document": {v, apiv1.InstanceIdentity{Cloud: "aws", Document: tampered, Signature: sign(t, key, doc)}},
		"unknown signer":    {&Verifier{AWS: onlyOther}, apiv1.InstanceIdentity{Cloud: "aws", Document: doc, Signature: sign(t, key, doc)}},
		"not base64":        {v, apiv1.InstanceIdentity{Cloud: "aws", Document: doc, Signature: "!!"}},
		"empty signature":   {v, apiv1.InstanceIdentity{Cloud: "aws", Document: doc}},
		"no instance":       {v, apiv1.InstanceIdentity{Cloud: "aws", Document: `{}`, Signature: sign(t, key, `{}`)}},
		"gcp not supported": {v, apiv1.InstanceIdentity{Cloud: "gcp", Document: doc, Signature: sign(t, key, doc)}},
		"no keys":           {&Verifier{}, apiv1.InstanceIdentity{Cloud: "aws", Document: doc, Signature: sign(t, key, doc)}},
		"nil verifier":      {nil, apiv1.InstanceIdentity{Cloud: "aws", Document: doc, Signature: sign(t, key, doc)}},
	} {
		if _, err := tc.v.Verify(t.Context(), tc.id); !errors.Is(err, ErrUnverified) {
			t.Errorf("%s: %v, want ErrUnverified", name, err)
		}
	}
	_ = other
}

func TestParseCertificatesErrors(t *testing.T) {
	if _, err := ParseCertificates([]byte("no pem here")); err == nil {
		t.Error("no PEM accepted")
	}
	if _, err := ParseCertificates(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("garbage")})); err == nil {
		t.Error("garbage certificate accepted")
	}
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tpl, tpl, &ek.PublicKey, ek)
	if _, err := ParseCertificates(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err == nil || !strings.Contains(err.Error(), "RSA") {
		t.Errorf("ECDSA certificate: %v", err)
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(doc, "AAAA")
	f.Add(`{"instanceId":"i-1"}`, "!!")
	key, _ := rsa.GenerateKey(rand.Reader, 1024)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(3), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, _ := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	cert, _ := x509.ParseCertificate(der)
	v := &Verifier{AWS: []*x509.Certificate{cert}}
	f.Fuzz(func(t *testing.T, d, sig string) {
		if _, err := v.Verify(t.Context(), apiv1.InstanceIdentity{Cloud: "aws", Document: d, Signature: sig}); !errors.Is(err, ErrUnverified) {
			t.Fatalf("random input verified: %v", err)
		}
	})
}
