package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/agent/notice"
	"github.com/gpubroker/gpubroker/agent/notice/aws"
	"github.com/gpubroker/gpubroker/agent/notice/azure"
	"github.com/gpubroker/gpubroker/agent/notice/gcp"
	"github.com/gpubroker/gpubroker/apiv1"
)

// Identity is what the metadata service says about this instance; the
// agent registers with it so the broker's instance record is complete.
type Identity struct {
	InstanceID   string
	Region       string
	Zone         string
	InstanceType string
	// Capacity is "spot" or "on-demand" ("" when unknown).
	Capacity string
	// Signed is the cloud's signed identity document, when the cloud has
	// one the agent reads (AWS); the broker may verify it.
	Signed *apiv1.InstanceIdentity
}

// Identify reads the instance's identity from the metadata service of
// cloud. endpoint overrides the cloud's default (tests, proxies). Fields
// the service does not answer stay empty; an error means nothing could be
// read.
func Identify(ctx context.Context, cloud, endpoint string, c *http.Client) (Identity, error) {
	if c == nil {
		c = &http.Client{Timeout: 2 * time.Second}
	}
	base := func(def string) string {
		if endpoint != "" {
			return strings.TrimRight(endpoint, "/")
		}
		return def
	}
	switch cloud {
	case notice.AWS:
		return identifyAWS(ctx, c, base(aws.DefaultEndpoint))
	case notice.GCP:
		return identifyGCP(ctx, c, base(gcp.DefaultEndpoint))
	case notice.Azure:
		return identifyAzure(ctx, c, base(azure.DefaultEndpoint))
	}
	return Identity{}, fmt.Errorf("identify: unknown cloud %q", cloud)
}

func metaGet(ctx context.Context, c *http.Client, method, url string, hdr map[string]string) (string, error) {
	b, err := metaGetRaw(ctx, c, method, url, hdr)
	return strings.TrimSpace(b), err
}

// metaGetRaw returns the body as sent: a signed document must keep every
// byte the signature covers.
func metaGetRaw(ctx context.Context, c *http.Client, method, url string, hdr map[string]string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return "", err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: status %d", method, url, resp.StatusCode)
	}
	return string(b), nil
}

// identifyAWS reads the signed-document's plain JSON twin (instance
// identity document) and the instance life cycle, over IMDSv2.
func identifyAWS(ctx context.Context, c *http.Client, base string) (Identity, error) {
	tok, err := metaGet(ctx, c, http.MethodPut, base+aws.TokenPath, map[string]string{aws.TokenTTLHeader: "60"})
	if err != nil {
		return Identity{}, fmt.Errorf("identify: IMDS token: %w", err)
	}
	h := map[string]string{"X-aws-ec2-metadata-token": tok}
	doc, err := metaGetRaw(ctx, c, http.MethodGet, base+"/latest/dynamic/instance-identity/document", h)
	if err != nil {
		return Identity{}, fmt.Errorf("identify: %w", err)
	}
	var d struct {
		InstanceID       string `json:"instanceId"`
		InstanceType     string `json:"instanceType"`
		Region           string `json:"region"`
		AvailabilityZone string `json:"availabilityZone"`
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return Identity{}, fmt.Errorf("identify: instance identity document: %w", err)
	}
	id := Identity{InstanceID: d.InstanceID, Region: d.Region, Zone: d.AvailabilityZone, InstanceType: d.InstanceType}
	if sig, err := metaGet(ctx, c, http.MethodGet, base+"/latest/dynamic/instance-identity/signature", h); err == nil && sig != "" {
		id.Signed = &apiv1.InstanceIdentity{Cloud: notice.AWS, Document: doc, Signature: sig}
	}
	// "spot" or "on-demand" (also "scheduled"/"capacity-block": treated as
	// on-demand, they are not reclaimed like spot).
	if lc, err := metaGet(ctx, c, http.MethodGet, base+"/latest/meta-data/instance-life-cycle", h); err == nil {
		id.Capacity = "on-demand"
		if lc == "spot" {
			id.Capacity = "spot"
		}
	}
	return id, nil
}

// identifyGCP reads the instance name (the id the providers' compute
// contract and the fleet controller use; the numeric id when there is no
// name), zone (projects/N/zones/Z), machine type (projects/N/machineTypes/T)
// and the provisioning model.
func identifyGCP(ctx context.Context, c *http.Client, base string) (Identity, error) {
	h := map[string]string{"Metadata-Flavor": "Google"}
	get := func(key string) string {
		v, _ := metaGet(ctx, c, http.MethodGet, base+"/computeMetadata/v1/instance/"+key, h)
		return v
	}
	id := Identity{InstanceID: get("name")}
	if id.InstanceID == "" {
		id.InstanceID = get("id")
	}
	if id.InstanceID == "" {
		return Identity{}, fmt.Errorf("identify: GCP metadata answered no instance name or id")
	}
	if z := get("zone"); z != "" {
		id.Zone = path.Base(z)
		if i := strings.LastIndex(id.Zone, "-"); i > 0 {
			id.Region = id.Zone[:i]
		}
	}
	if mt := get("machine-type"); mt != "" {
		id.InstanceType = path.Base(mt)
	}
	switch pm := strings.ToUpper(get("scheduling/provisioning-model")); pm {
	case "SPOT":
		id.Capacity = "spot"
	case "STANDARD":
		id.Capacity = "on-demand"
	default:
		// Older preemptible VMs report only scheduling/preemptible.
		switch strings.ToUpper(get("scheduling/preemptible")) {
		case "TRUE":
			id.Capacity = "spot"
		case "FALSE":
			id.Capacity = "on-demand"
		}
	}
	return id, nil
}

// identifyAzure reads the compute section of the instance metadata.
func identifyAzure(ctx context.Context, c *http.Client, base string) (Identity, error) {
	body, err := metaGet(ctx, c, http.MethodGet, base+"/metadata/instance/compute?api-version=2021-02-01", map[string]string{"Metadata": "true"})
	if err != nil {
		return Identity{}, fmt.Errorf("identify: %w", err)
	}
	var d struct {
		VMID     string `json:"vmId"`
		Name     string `json:"name"`
		Location string `json:"location"`
		Zone     string `json:"zone"`
		VMSize   string `json:"vmSize"`
		Priority string `json:"priority"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		return Identity{}, fmt.Errorf("identify: Azure compute metadata: %w", err)
	}
	// The VM name is the id the providers' compute contract and the fleet
	// controller use (registration tokens are bound to it); vmId stands in
	// when there is none.
	id := Identity{InstanceID: d.Name, Region: d.Location, InstanceType: d.VMSize}
	if id.InstanceID == "" {
		id.InstanceID = d.VMID
	}
	if d.Zone != "" {
		id.Zone = d.Location + "-" + d.Zone
	}
	switch strings.ToLower(d.Priority) {
	case "spot", "low":
		id.Capacity = "spot"
	case "regular":
		id.Capacity = "on-demand"
	}
	return id, nil
}
