package apiv1

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
)

// maxAnswer bounds an answer the client reads (an offers list of the whole
// catalog is a few MiB).
const maxAnswer = 64 << 20

// Client calls one broker's API with one bearer token. It is safe for
// concurrent use. The token never appears in its errors.
type Client struct {
	// BaseURL is the broker's root, e.g. https://broker.example:8443.
	BaseURL string
	// Token is sent as "Authorization: Bearer <Token>".
	Token string
	// HTTP sends the requests (default: a client with a 30 s timeout).
	HTTP *http.Client
	// UserAgent, when set, is sent as User-Agent.
	UserAgent string
}

// NewClient returns a Client for baseURL with token; hc may be nil.
func NewClient(baseURL, token string, hc *http.Client) *Client {
	return &Client{BaseURL: baseURL, Token: token, HTTP: hc}
}

// WithToken returns a copy of c that sends token.
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.Token = token
	return &cp
}

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

// do sends one request. body is JSON-encoded unless it is []byte (sent as
// is with contentType). out, when not nil, receives the decoded answer.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, header http.Header, body any, contentType string, out any) error {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case []byte:
			rd = bytes.NewReader(b)
		default:
			enc, err := json.Marshal(body)
			if err != nil {
				return fmt.Errorf("%s %s: encoding request: %w", method, path, err)
			}
			rd = bytes.NewReader(enc)
			contentType = "application/json"
		}
	}
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("%s %s: building request: %w", method, path, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	if c.Token != "" {
		req.Header.Set(HeaderAuthorization, "Bearer "+c.Token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		// *url.Error names the URL, never the Authorization header.
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: reading answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return parseError(method, path, resp.StatusCode, rb)
	}
	if out == nil || len(bytes.TrimSpace(rb)) == 0 {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], rb...)
		return nil
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("%s %s: decoding answer: %w", method, path, err)
	}
	return nil
}

func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, http.MethodGet, path, q, nil, nil, "", out)
}

func (c *Client) send(ctx context.Context, method, path string, body, out any) error {
	return c.do(ctx, method, path, nil, nil, body, "", out)
}

func seg(s string) string { return "/" + url.PathEscape(s) }

// --- health ---

// Health calls /healthz.
func (c *Client) Health(ctx context.Context) error {
	return c.get(ctx, PathHealth, nil, nil)
}

// Ready calls /readyz; an *Error with status 503 means not ready.
func (c *Client) Ready(ctx context.Context) error {
	return c.get(ctx, PathReady, nil, nil)
}

// --- offers, plan, budgets ---

// Values encodes q as query parameters.
func (q OffersQuery) Values() url.Values {
	v := url.Values{}
	if len(q.GPUs) > 0 {
		v.Set("gpu", strings.Join(q.GPUs, ","))
	}
	if len(q.Clouds) > 0 {
		v.Set("cloud", strings.Join(q.Clouds, ","))
	}
	if len(q.Regions) > 0 {
		v.Set("region", strings.Join(q.Regions, ","))
	}
	if q.Capacity != "" {
		v.Set("capacity", q.Capacity)
	}
	if q.MinGPUs > 0 {
		v.Set("min_gpus", strconv.Itoa(q.MinGPUs))
	}
	if q.MaxGPUs > 0 {
		v.Set("max_gpus", strconv.Itoa(q.MaxGPUs))
	}
	if q.MinGPUMemoryGiB > 0 {
		v.Set("min_gpu_memory_gib", strconv.FormatFloat(q.MinGPUMemoryGiB, 'g', -1, 64))
	}
	if q.MaxPrice > 0 {
		v.Set("max_price", strconv.FormatFloat(q.MaxPrice, 'g', -1, 64))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Offers queries the broker's current catalog.
func (c *Client) Offers(ctx context.Context, q OffersQuery) (Offers, error) {
	var out Offers
	err := c.get(ctx, PathOffers, q.Values(), &out)
	return out, err
}

// Plan returns the latest plan of the loaded policy.
func (c *Client) Plan(ctx context.Context) (Plan, error) {
	var out Plan
	err := c.get(ctx, PathPlan, nil, &out)
	return out, err
}

// PlanPolicy plans the policy file in data (YAML); name is used in error
// positions ("policy.yaml:3:7: ...").
func (c *Client) PlanPolicy(ctx context.Context, name string, data []byte) (Plan, error) {
	var q url.Values
	if name != "" {
		q = url.Values{"name": {name}}
	}
	var out Plan
	err := c.do(ctx, http.MethodPost, PathPlan, q, nil, data, "application/yaml", &out)
	return out, err
}

// Budgets returns the loaded policy's budgets with their planned spend.
func (c *Client) Budgets(ctx context.Context) (Budgets, error) {
	var out Budgets
	err := c.get(ctx, PathBudgets, nil, &out)
	return out, err
}

// --- workloads ---

// Spend reads the spend ledger (GET /api/v1/spend).
func (c *Client) Spend(ctx context.Context, q SpendQuery) (Spend, error) {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format("2006-01-02"))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.UTC().Format("2006-01-02"))
	}
	if q.By != "" {
		v.Set("by", q.By)
	}
	var out Spend
	err := c.get(ctx, "/api/v1/spend", v, &out)
	return out, err
}

// ListWorkloads lists the workloads stored through the API.
func (c *Client) ListWorkloads(ctx context.Context) ([]Workload, error) {
	var out List[Workload]
	err := c.get(ctx, PathWorkloads, nil, &out)
	return out.Items, err
}

// CreateWorkload stores a new workload (409 when the name exists).
func (c *Client) CreateWorkload(ctx context.Context, w WorkloadInput) (Workload, error) {
	var out Workload
	err := c.send(ctx, http.MethodPost, PathWorkloads, w, &out)
	return out, err
}

// GetWorkload reads one workload.
func (c *Client) GetWorkload(ctx context.Context, name string) (Workload, error) {
	var out Workload
	err := c.get(ctx, PathWorkloads+seg(name), nil, &out)
	return out, err
}

// PutWorkload replaces a workload (the name cannot change).
func (c *Client) PutWorkload(ctx context.Context, w WorkloadInput) (Workload, error) {
	var out Workload
	err := c.send(ctx, http.MethodPut, PathWorkloads+seg(w.Name), w, &out)
	return out, err
}

// DeleteWorkload deletes a workload.
func (c *Client) DeleteWorkload(ctx context.Context, name string) error {
	return c.send(ctx, http.MethodDelete, PathWorkloads+seg(name), nil, nil)
}

// --- instances, events, benchmarks ---

// ListInstances lists instances.
func (c *Client) ListInstances(ctx context.Context, q InstancesQuery) ([]Instance, error) {
	v := url.Values{}
	if q.Workload != "" {
		v.Set("workload", q.Workload)
	}
	if q.State != "" {
		v.Set("state", q.State)
	}
	var out List[Instance]
	err := c.get(ctx, PathInstances, v, &out)
	return out.Items, err
}

// GetInstance reads one instance.
func (c *Client) GetInstance(ctx context.Context, id string) (Instance, error) {
	var out Instance
	err := c.get(ctx, PathInstances+seg(id), nil, &out)
	return out, err
}

// ListEvents lists events, oldest first.
func (c *Client) ListEvents(ctx context.Context, q EventsQuery) ([]Event, error) {
	v := url.Values{}
	for k, s := range map[string]string{"kind": q.Kind, "instance": q.Instance, "workload": q.Workload} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339))
	}
	if q.AfterID > 0 {
		v.Set("after_id", strconv.FormatInt(q.AfterID, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out List[Event]
	err := c.get(ctx, PathEvents, v, &out)
	return out.Items, err
}

// ListBenchmarks lists benchmark results, of one instance type when set.
func (c *Client) ListBenchmarks(ctx context.Context, instanceType string) ([]Benchmark, error) {
	var v url.Values
	if instanceType != "" {
		v = url.Values{"instance_type": {instanceType}}
	}
	var out List[Benchmark]
	err := c.get(ctx, PathBenchmarks, v, &out)
	return out.Items, err
}

// --- tokens ---

// CreateToken creates a token; its secret is only in this answer.
func (c *Client) CreateToken(ctx context.Context, in TokenInput) (TokenCreated, error) {
	var out TokenCreated
	err := c.send(ctx, http.MethodPost, PathTokens, in, &out)
	return out, err
}

// ListTokens lists stored tokens (never their secrets).
func (c *Client) ListTokens(ctx context.Context, q TokensQuery) ([]Token, error) {
	v := url.Values{}
	if q.Kind != "" {
		v.Set("kind", q.Kind)
	}
	if q.Subject != "" {
		v.Set("subject", q.Subject)
	}
	var out List[Token]
	err := c.get(ctx, PathTokens, v, &out)
	return out.Items, err
}

// RevokeToken revokes the token with id (Token.ID).
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.send(ctx, http.MethodDelete, PathTokens+seg(id), nil, nil)
}

// --- agents ---

// Register registers an agent; c's token is a bootstrap, registration or
// admin token.
func (c *Client) Register(ctx context.Context, r RegisterRequest) (RegisterResponse, error) {
	var out RegisterResponse
	err := c.send(ctx, http.MethodPost, PathRegister, r, &out)
	if err == nil && (out.AgentID == "" || out.Token == "") {
		return out, errors.New("POST " + PathRegister + ": answer lacks agent_id or token")
	}
	return out, err
}

// Heartbeat sends one heartbeat of agent id.
func (c *Client) Heartbeat(ctx context.Context, id string, hb Heartbeat) (HeartbeatResponse, error) {
	var out HeartbeatResponse
	err := c.send(ctx, http.MethodPost, PathAgents+seg(id)+SuffixHeartbeat, hb, &out)
	return out, err
}

// ReportProgress sends the progress of agent id's job.
func (c *Client) ReportProgress(ctx context.Context, id string, p ProgressReport) (ProgressResponse, error) {
	var out ProgressResponse
	err := c.send(ctx, http.MethodPost, PathAgents+seg(id)+SuffixProgress, p, &out)
	return out, err
}

func (c *Client) report(ctx context.Context, id, suffix, key string, body any) (Accepted, error) {
	var h http.Header
	if key != "" {
		h = http.Header{HeaderIdempotency: {key}}
	}
	var out Accepted
	err := c.do(ctx, http.MethodPost, PathAgents+seg(id)+suffix, nil, h, body, "", &out)
	return out, err
}

// ReportNotice reports a notice; key (default: the notice's id) makes a
// repeated delivery count once.
func (c *Client) ReportNotice(ctx context.Context, id, key string, n NoticeReport) (Accepted, error) {
	return c.report(ctx, id, SuffixNotices, key, n)
}

// ReportDrain reports a drain result.
func (c *Client) ReportDrain(ctx context.Context, id, key string, d DrainReport) (Accepted, error) {
	return c.report(ctx, id, SuffixDrains, key, d)
}

// ReportBenchmark reports a benchmark result.
func (c *Client) ReportBenchmark(ctx context.Context, id, key string, b BenchmarkReport) (Accepted, error) {
	return c.report(ctx, id, SuffixBenchmarks, key, b)
}
