package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/agent/notice"
	"github.com/gpubroker/gpubroker/agent/notice/aws"
	"github.com/gpubroker/gpubroker/agent/notice/azure"
	"github.com/gpubroker/gpubroker/agent/notice/gcp"
)

// ErrUnknownCloud means neither DMI nor any metadata service identified
// the cloud.
var ErrUnknownCloud = errors.New("cloud not detected")

// DetectOptions configure Detect.
type DetectOptions struct {
	// MetadataURL, when set, is probed for all three clouds (tests,
	// proxies) and DMI is not read.
	MetadataURL string
	// DMIDir is where the firmware's identity is read (default
	// /sys/class/dmi/id).
	DMIDir string
	Client *http.Client
}

// Detect names the cloud the agent runs in: first from the firmware (DMI
// vendor strings, no network), then by asking each metadata service in
// the way only the real one answers.
func Detect(ctx context.Context, o DetectOptions) (string, error) {
	if o.MetadataURL == "" {
		if c := detectDMI(o.DMIDir); c != "" {
			return c, nil
		}
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 2 * time.Second}
	}
	type probe struct {
		cloud string
		fn    func(context.Context) bool
	}
	base := func(def string) string {
		if o.MetadataURL != "" {
			return strings.TrimRight(o.MetadataURL, "/")
		}
		return def
	}
	// Most specific first: GCP and Azure demand their own headers; IMDSv2
	// only a token PUT.
	probes := []probe{
		{notice.GCP, func(ctx context.Context) bool {
			resp, ok := do(ctx, o.Client, http.MethodGet, base(gcp.DefaultEndpoint)+"/computeMetadata/v1/instance/id", "Metadata-Flavor", "Google")
			return ok && resp.Header.Get("Metadata-Flavor") == "Google"
		}},
		{notice.Azure, func(ctx context.Context) bool {
			_, ok := do(ctx, o.Client, http.MethodGet, base(azure.DefaultEndpoint)+azure.NamePath+"?api-version=2021-02-01&format=text", "Metadata", "true")
			return ok
		}},
		{notice.AWS, func(ctx context.Context) bool {
			_, ok := do(ctx, o.Client, http.MethodPut, base(aws.DefaultEndpoint)+aws.TokenPath, aws.TokenTTLHeader, "60")
			return ok
		}},
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	results := make([]chan bool, len(probes))
	for i, p := range probes {
		results[i] = make(chan bool, 1)
		go func() { results[i] <- p.fn(ctx) }()
	}
	for i, p := range probes {
		if <-results[i] {
			return p.cloud, nil
		}
	}
	return "", fmt.Errorf("%w: no DMI vendor match and no metadata service answered; set --cloud", ErrUnknownCloud)
}

func do(ctx context.Context, c *http.Client, method, url, hk, hv string) (*http.Response, bool) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, false
	}
	req.Header.Set(hk, hv)
	resp, err := c.Do(req)
	if err != nil {
		return nil, false
	}
	resp.Body.Close()
	return resp, resp.StatusCode == http.StatusOK
}

// detectDMI reads the vendor strings the clouds' hypervisors set.
func detectDMI(dir string) string {
	if dir == "" {
		dir = "/sys/class/dmi/id"
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		return strings.TrimSpace(string(b))
	}
	sys, bios, product := read("sys_vendor"), read("bios_vendor"), read("product_name")
	switch {
	case sys == "Amazon EC2" || strings.HasPrefix(bios, "Amazon EC2"):
		return notice.AWS
	case sys == "Google" || product == "Google Compute Engine":
		return notice.GCP
	case read("chassis_asset_tag") == "7783-7084-3265-9085-8269-3286-77":
		// Azure's fixed asset tag; sys_vendor alone ("Microsoft
		// Corporation") also matches Hyper-V on premises.
		return notice.Azure
	}
	return ""
}
