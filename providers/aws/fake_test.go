package aws

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAWS is a local stand-in for EC2 (query protocol, XML) and the Price
// List Query API (JSON 1.1) that answers from the files in testdata/, in
// the services' real wire formats. Knobs: faults queue scripted answers
// that are served before the fixture, per "service:operation:region" key.
type fakeAWS struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	calls    map[string]int
	tokens   map[string]map[string]bool // NextTokens asked for, by key ("" is the first page)
	faults   map[string][]fault
	forms    map[string][]url.Values // EC2 request parameters by key
	pricing  []pricingRequest
	advisor  []fault // scripted Spot Advisor answers, then the fixture
	advCalls int
}

// fault is one scripted answer. times < 0 repeats it for ever.
type fault struct {
	status int
	body   string
	// delay holds the answer back (until the client gives up, at most).
	delay time.Duration
	times int
}

// passThrough, queued before faults, lets one call answer from the fixture.
var passThrough = fault{status: -1}

type pricingRequest struct {
	ServiceCode   string
	FormatVersion string
	NextToken     string
	MaxResults    int
	Filters       []struct{ Type, Field, Value string }
}

func newFakeAWS(t *testing.T) *fakeAWS {
	f := &fakeAWS{t: t, calls: map[string]int{}, tokens: map[string]map[string]bool{}, faults: map[string][]fault{}, forms: map[string][]url.Values{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /", f.serveAPI)
	mux.HandleFunc("GET /spot-advisor-data.json", f.serveAdvisor)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// fail scripts answers for a key such as "ec2:DescribeSpotPriceHistory:us-west-2"
// or "pricing:GetProducts:us-east-1".
func (f *fakeAWS) fail(key string, fs ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[key] = append(f.faults[key], fs...)
}

func (f *fakeAWS) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

// pages is how many distinct pages (NextTokens) were asked for under key.
// Unlike count it does not grow when the SDK asks for a page again.
func (f *fakeAWS) pages(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.tokens[key])
}

// page notes that the page token was asked for under key.
func (f *fakeAWS) page(key, token string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tokens[key] == nil {
		f.tokens[key] = map[string]bool{}
	}
	f.tokens[key][token] = true
}

// next pops the scripted answer for key, if any.
func (f *fakeAWS) next(key string) (fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[key]++
	q := f.faults[key]
	if len(q) == 0 {
		return fault{}, false
	}
	ft := q[0]
	switch {
	case ft.status == passThrough.status:
		f.faults[key] = q[1:]
		return fault{}, false
	case ft.times < 0:
	case ft.times > 1:
		q[0].times--
	default:
		f.faults[key] = q[1:]
	}
	return ft, true
}

var credentialScope = regexp.MustCompile(`Credential=[^/]+/\d{8}/([a-z0-9-]+)/([a-z0-9.-]+)/aws4_request`)

func (f *fakeAWS) serveAPI(w http.ResponseWriter, r *http.Request) {
	// Both SDK clients sign with SigV4; the signing scope names region and
	// service exactly as on the real endpoints.
	m := credentialScope.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		http.Error(w, "missing SigV4 Authorization header", http.StatusForbidden)
		return
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		f.servePricing(w, r, target, m[2])
		return
	}
	f.serveEC2(w, r, m[1], m[2])
}

func (f *fakeAWS) serveEC2(w http.ResponseWriter, r *http.Request, region, service string) {
	if service != "ec2" {
		http.Error(w, "want signing service ec2, got "+service, http.StatusBadRequest)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		http.Error(w, "want a form-encoded body, got "+ct, http.StatusBadRequest)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action := r.PostForm.Get("Action")
	if v := r.PostForm.Get("Version"); v != "2016-11-15" {
		ec2Error(w, http.StatusBadRequest, "InvalidParameterValue", "unknown Version "+v)
		return
	}
	key := "ec2:" + action + ":" + region
	f.mu.Lock()
	f.forms[key] = append(f.forms[key], r.PostForm)
	f.mu.Unlock()
	f.page(key, r.PostForm.Get("NextToken"))
	if ft, ok := f.next(key); ok {
		f.serveFault(w, r, ft)
		return
	}
	name := action
	if tok := r.PostForm.Get("NextToken"); tok != "" {
		name += "." + tok
	}
	path := filepath.Join("testdata", "ec2", region, name+".xml")
	if action == "GetSpotPlacementScores" {
		path = filepath.Join("testdata", "ec2", action, r.PostForm.Get("InstanceType.1")+".xml")
		if _, err := os.Stat(path); err != nil {
			writeXML(w, `<?xml version="1.0" encoding="UTF-8"?>
<GetSpotPlacementScoresResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
    <requestId>7d3b1c2e-0000-4000-8000-000000000000</requestId>
    <spotPlacementScoreSet/>
</GetSpotPlacementScoresResponse>`)
			return
		}
	}
	body, err := os.ReadFile(path)
	if err != nil {
		ec2Error(w, http.StatusBadRequest, "InvalidParameterValue", "no fixture "+path)
		return
	}
	writeXML(w, string(body))
}

func writeXML(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	io.WriteString(w, body)
}

// ec2Error writes EC2's error envelope.
func ec2Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>0f5c1c3e-9d4e-4b8e-8d0b-3d1e5f2a7c61</RequestID></Response>`, code, msg)
}

func (f *fakeAWS) servePricing(w http.ResponseWriter, r *http.Request, target, service string) {
	if target != "AWSPriceListService.GetProducts" || service != "pricing" {
		pricingError(w, http.StatusBadRequest, "InvalidParameterException", "unexpected "+target+" signed for "+service)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-amz-json-1.1" {
		pricingError(w, http.StatusBadRequest, "InvalidParameterException", "want application/x-amz-json-1.1, got "+ct)
		return
	}
	var req pricingRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		pricingError(w, http.StatusBadRequest, "InvalidParameterException", err.Error())
		return
	}
	region := ""
	for _, fl := range req.Filters {
		if fl.Field == "regionCode" {
			region = fl.Value
		}
	}
	f.mu.Lock()
	f.pricing = append(f.pricing, req)
	f.mu.Unlock()
	f.page("pricing:GetProducts:"+region, req.NextToken)
	if ft, ok := f.next("pricing:GetProducts:" + region); ok {
		f.serveFault(w, r, ft)
		return
	}
	name := region
	if req.NextToken != "" {
		name += "." + req.NextToken
	}
	body, err := os.ReadFile(filepath.Join("testdata", "pricing", name+".json"))
	if err != nil {
		pricingError(w, http.StatusBadRequest, "InvalidNextTokenException", "no fixture for "+name)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Write(body)
}

// pricingError writes the JSON 1.1 error shape.
func pricingError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":%q,"Message":%q}`, code, msg)
}

func (f *fakeAWS) serveFault(w http.ResponseWriter, r *http.Request, ft fault) {
	if ft.delay > 0 {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(ft.delay):
		}
	}
	if strings.HasPrefix(ft.body, "<?xml") || strings.HasPrefix(ft.body, "<Response") || strings.HasPrefix(ft.body, "<") {
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	} else {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	}
	w.WriteHeader(ft.status)
	io.WriteString(w, ft.body)
}

func (f *fakeAWS) serveAdvisor(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.advCalls++
	var ft *fault
	if len(f.advisor) > 0 {
		ft = &f.advisor[0]
		f.advisor = f.advisor[1:]
	}
	f.mu.Unlock()
	if ft != nil {
		w.WriteHeader(ft.status)
		io.WriteString(w, ft.body)
		return
	}
	http.ServeFile(w, r, filepath.Join("testdata", "spot-advisor-data.json"))
}

// ec2Fault is an EC2 error answer.
func ec2Fault(status int, code string, times int) fault {
	return fault{status: status, times: times, body: fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>%s</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>5b1d8e3a-2c4f-4e6a-9b7d-1f0e2d3c4b5a</RequestID></Response>`, code)}
}

// pricingFault is a Price List error answer.
func pricingFault(status int, code string, times int) fault {
	return fault{status: status, times: times, body: fmt.Sprintf(`{"__type":%q,"Message":"%s"}`, code, code)}
}
