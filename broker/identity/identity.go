// Package identity verifies the signed instance identity documents the
// clouds' metadata services hand to code running on an instance, so the
// broker can tell that an agent runs on the instance it names.
//
// Implemented: AWS (the instance identity document with its base64
// RSA-SHA256 signature, checked against the AWS public certificates the
// operator configures for their regions). Not implemented: GCP identity
// tokens and Azure attested data (docs/api.md).
package identity

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/gpubroker/gpubroker/apiv1"
)

// ErrUnverified means the identity did not verify: bad signature, unknown
// cloud, malformed document.
var ErrUnverified = errors.New("instance identity does not verify")

// Verified is what a verified identity proves.
type Verified struct {
	Cloud        string
	InstanceID   string
	Region       string
	Zone         string
	InstanceType string
	AccountID    string
}

// Verifier checks identities of the clouds it has keys for.
type Verifier struct {
	// AWS holds the AWS public certificates ("RSA-2048" or the region's
	// RSA certificate from the EC2 documentation) the signatures are
	// checked against; empty: AWS identities are not verified.
	AWS []*x509.Certificate
}

// ParseCertificates reads PEM certificates (for Verifier.AWS).
func ParseCertificates(pemData []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := pemData; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing certificate %d: %w", len(out)+1, err)
		}
		if _, ok := c.PublicKey.(*rsa.PublicKey); !ok {
			return nil, fmt.Errorf("certificate %d: %s key; AWS signs identity documents with RSA", len(out)+1, c.PublicKeyAlgorithm)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return out, nil
}

// Enabled reports whether identities of cloud can be verified.
func (v *Verifier) Enabled(cloud string) bool {
	return v != nil && cloud == "aws" && len(v.AWS) > 0
}

// Verify checks id and returns what it proves.
func (v *Verifier) Verify(_ context.Context, id apiv1.InstanceIdentity) (Verified, error) {
	if !v.Enabled(id.Cloud) {
		return Verified{}, fmt.Errorf("%w: no keys configured for cloud %q", ErrUnverified, id.Cloud)
	}
	return v.verifyAWS(id)
}

func (v *Verifier) verifyAWS(id apiv1.InstanceIdentity) (Verified, error) {
	sig, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(id.Signature), ""))
	if err != nil || len(sig) == 0 {
		return Verified{}, fmt.Errorf("%w: signature is not base64", ErrUnverified)
	}
	sum := sha256.Sum256([]byte(id.Document))
	ok := false
	for _, c := range v.AWS {
		if rsa.VerifyPKCS1v15(c.PublicKey.(*rsa.PublicKey), crypto.SHA256, sum[:], sig) == nil {
			ok = true
			break
		}
	}
	if !ok {
		return Verified{}, fmt.Errorf("%w: the signature matches none of the configured AWS certificates", ErrUnverified)
	}
	var d struct {
		AccountID        string `json:"accountId"`
		InstanceID       string `json:"instanceId"`
		InstanceType     string `json:"instanceType"`
		Region           string `json:"region"`
		AvailabilityZone string `json:"availabilityZone"`
	}
	if err := json.Unmarshal([]byte(id.Document), &d); err != nil || d.InstanceID == "" {
		return Verified{}, fmt.Errorf("%w: the signed document names no instance", ErrUnverified)
	}
	return Verified{Cloud: "aws", InstanceID: d.InstanceID, Region: d.Region, Zone: d.AvailabilityZone,
		InstanceType: d.InstanceType, AccountID: d.AccountID}, nil
}
