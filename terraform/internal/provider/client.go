package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
)

// errNotFound is what the broker answers 404 with: the workload is gone.
var errNotFound = errors.New("not found")

// apiError is a broker answer outside 2xx, with the broker's stable code
// and its message (which says what to change). It never holds the token.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("broker answered %d %s: %s", e.Status, e.Code, e.Message)
}

func (e *apiError) Is(target error) bool {
	return target == errNotFound && e.Status == http.StatusNotFound
}

// brokerClient calls the broker's JSON API (docs/api.md) with an admin
// token.
type brokerClient struct {
	base  *url.URL
	token string
	http  *http.Client
	agent string
}

func newBrokerClient(endpoint, token string, hc *http.Client, version string) (*brokerClient, error) {
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q is not an http:// or https:// URL of a broker, e.g. http://127.0.0.1:8080", endpoint)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	return &brokerClient{base: u, token: token, http: hc, agent: "terraform-provider-gpubroker/" + version}, nil
}

func (c *brokerClient) do(ctx context.Context, method, p string, q url.Values, body []byte, contentType string, out any) error {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + p
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("building %s %s: %w", method, p, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.agent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, p, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, p, err)
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode}
		var wire struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(data, &wire) == nil && wire.Error.Message != "" {
			e.Code, e.Message = wire.Error.Code, wire.Error.Message
		} else {
			e.Message = strings.TrimSpace(string(data[:min(len(data), 300)]))
		}
		return fmt.Errorf("%s %s: %w", method, p, e)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, p, err)
	}
	return nil
}

// offersAnswer is the answer of GET /api/v1/offers.
type offersAnswer struct {
	GeneratedAt time.Time       `json:"generated_at"`
	Source      string          `json:"source"`
	Count       int             `json:"count"`
	Offers      []pricing.Offer `json:"offers"`
}

func (c *brokerClient) Offers(ctx context.Context, q pricing.Query) (offersAnswer, error) {
	v := url.Values{}
	for _, g := range q.GPUs {
		v.Add("gpu", string(g))
	}
	for _, cl := range q.Clouds {
		v.Add("cloud", string(cl))
	}
	for _, r := range q.Regions {
		v.Add("region", r)
	}
	if q.Capacity != "" {
		v.Set("capacity", string(q.Capacity))
	}
	if q.MinGPUCount > 0 {
		v.Set("min_gpus", strconv.Itoa(q.MinGPUCount))
	}
	if q.MaxGPUCount > 0 {
		v.Set("max_gpus", strconv.Itoa(q.MaxGPUCount))
	}
	if q.MinGPUMemoryGiB > 0 {
		v.Set("min_gpu_memory_gib", strconv.FormatFloat(q.MinGPUMemoryGiB, 'f', -1, 64))
	}
	if q.MaxPricePerHour > 0 {
		v.Set("max_price", strconv.FormatFloat(q.MaxPricePerHour, 'f', -1, 64))
	}
	var out offersAnswer
	err := c.do(ctx, http.MethodGet, "/api/v1/offers", v, nil, "", &out)
	return out, err
}

// Plan posts a policy document (YAML or JSON) to POST /api/v1/plan.
func (c *brokerClient) Plan(ctx context.Context, name string, doc []byte) (*optimizer.Plan, error) {
	var out optimizer.Plan
	if err := c.do(ctx, http.MethodPost, "/api/v1/plan", url.Values{"name": {name}}, doc, "application/yaml", &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// workloadRecord is a workload registered through /api/v1/workloads.
type workloadRecord struct {
	Name      string          `json:"name"`
	Team      string          `json:"team,omitempty"`
	Kind      string          `json:"kind"`
	Spec      json.RawMessage `json:"spec,omitempty"`
	CreatedAt time.Time       `json:"created_at,omitzero"`
	UpdatedAt time.Time       `json:"updated_at,omitzero"`
}

func (c *brokerClient) CreateWorkload(ctx context.Context, w workloadRecord) (workloadRecord, error) {
	return c.sendWorkload(ctx, http.MethodPost, "/api/v1/workloads", w)
}

func (c *brokerClient) UpdateWorkload(ctx context.Context, w workloadRecord) (workloadRecord, error) {
	return c.sendWorkload(ctx, http.MethodPut, "/api/v1/workloads/"+url.PathEscape(w.Name), w)
}

func (c *brokerClient) sendWorkload(ctx context.Context, method, p string, w workloadRecord) (workloadRecord, error) {
	body := struct {
		Name string          `json:"name"`
		Team string          `json:"team,omitempty"`
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}{w.Name, w.Team, w.Kind, w.Spec}
	b, err := json.Marshal(body)
	if err != nil {
		return workloadRecord{}, fmt.Errorf("encoding workload %q: %w", w.Name, err)
	}
	var out workloadRecord
	err = c.do(ctx, method, p, nil, b, "application/json", &out)
	return out, err
}

func (c *brokerClient) GetWorkload(ctx context.Context, name string) (workloadRecord, error) {
	var out workloadRecord
	err := c.do(ctx, http.MethodGet, "/api/v1/workloads/"+url.PathEscape(name), nil, nil, "", &out)
	return out, err
}

func (c *brokerClient) DeleteWorkload(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/workloads/"+url.PathEscape(name), nil, nil, "", nil)
}
