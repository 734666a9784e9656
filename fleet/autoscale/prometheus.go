package autoscale

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrNoData is returned when the query answers with no series: the metric
// does not exist (yet). The autoscaler then decides on utilisation alone,
// rather than reading "no series" as "no load" and scaling to the minimum.
var ErrNoData = errors.New("prometheus: the query returned no data")

// Prometheus reads one load metric through the Prometheus HTTP API
// (GET /api/v1/query, an instant query).
type Prometheus struct {
	URL   string
	Query string
	// HTTP is the client; default one with a 10 s timeout.
	HTTP *http.Client
	// Now stamps the query's evaluation time; default time.Now.
	Now func() time.Time
}

// queryResponse is the Prometheus API's envelope.
type queryResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// Value evaluates the query now. A vector result is summed over its series
// (the service's total load); a scalar is taken as it is. NaN and infinite
// samples are errors.
func (p Prometheus) Value(ctx context.Context) (float64, error) {
	u, err := url.Parse(strings.TrimRight(p.URL, "/") + "/api/v1/query")
	if err != nil {
		return 0, fmt.Errorf("prometheus: bad URL: %w", err)
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	q := url.Values{"query": {p.Query}, "time": {strconv.FormatFloat(float64(now().UnixMilli())/1000, 'f', 3, 64)}}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, fmt.Errorf("prometheus: %w", err)
	}
	hc := p.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("prometheus: query %s: %w", p.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, fmt.Errorf("prometheus: reading the answer: %w", err)
	}
	return parseQueryResponse(resp.StatusCode, body)
}

// parseQueryResponse reads an instant-query answer.
func parseQueryResponse(status int, body []byte) (float64, error) {
	var r queryResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, fmt.Errorf("prometheus: HTTP %d, not a Prometheus answer: %.120q", status, body)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("prometheus: HTTP %d: %s: %s", status, r.ErrorType, r.Error)
	}
	sample := func(pair []json.RawMessage) (float64, error) {
		if len(pair) != 2 {
			return 0, errors.New("prometheus: a sample is not [time, value]")
		}
		var s string
		if err := json.Unmarshal(pair[1], &s); err != nil {
			return 0, fmt.Errorf("prometheus: sample value: %w", err)
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("prometheus: sample value %q is not a finite number", s)
		}
		return v, nil
	}
	switch r.Data.ResultType {
	case "scalar":
		var pair []json.RawMessage
		if err := json.Unmarshal(r.Data.Result, &pair); err != nil {
			return 0, fmt.Errorf("prometheus: scalar result: %w", err)
		}
		return sample(pair)
	case "vector":
		var series []struct {
			Value []json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(r.Data.Result, &series); err != nil {
			return 0, fmt.Errorf("prometheus: vector result: %w", err)
		}
		if len(series) == 0 {
			return 0, ErrNoData
		}
		total := 0.0
		for _, s := range series {
			v, err := sample(s.Value)
			if err != nil {
				return 0, err
			}
			total += v
		}
		return total, nil
	}
	return 0, fmt.Errorf("prometheus: result type %q; the query must give a number or an instant vector (wrap a range in rate() and sum())", r.Data.ResultType)
}
