// Package fakecloud provides metadata servers that answer like the real AWS
// IMDSv2, GCP metadata server and Azure Scheduled Events, with knobs to make
// notices appear, tokens expire and servers go down. Tests and the agent's
// latency and footprint measurements use them.
package fakecloud

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AWS is a fake IMDSv2.
type AWS struct {
	// Now is the server's clock (default time.Now); tests move it to expire
	// tokens.
	Now func() time.Time
	// MaxTTL caps the token TTL granted (default 6h, as IMDS does).
	MaxTTL time.Duration
	// Signer, when set, signs the instance identity document (RSA-SHA256,
	// as AWS does) and the signature path answers; otherwise it is 404.
	Signer *rsa.PrivateKey

	mu             sync.Mutex
	tokens         map[string]time.Time
	next           int
	instanceAction string
	rebalance      string
	maintenance    string
	down           bool
	failNext       int
	failPaths      map[string]bool
	// counters
	TokenPuts, Unauthorized, Gets int
}

// NewAWS returns an empty fake (no notices).
func NewAWS() *AWS { return &AWS{tokens: map[string]time.Time{}} }

func (f *AWS) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// SetInstanceAction sets the spot/instance-action body ("" = 404).
func (f *AWS) SetInstanceAction(body string) {
	f.mu.Lock()
	f.instanceAction = body
	f.mu.Unlock()
}

// SetRebalance sets the rebalance recommendation body ("" = 404).
func (f *AWS) SetRebalance(body string) { f.mu.Lock(); f.rebalance = body; f.mu.Unlock() }

// SetMaintenance sets the scheduled-maintenance body ("" = 404).
func (f *AWS) SetMaintenance(body string) { f.mu.Lock(); f.maintenance = body; f.mu.Unlock() }

// FailPath makes GETs of one path fail with 500 (fail=false heals it).
func (f *AWS) FailPath(path string, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failPaths == nil {
		f.failPaths = map[string]bool{}
	}
	f.failPaths[path] = fail
}

// SetDown makes every request fail with 503 while down.
func (f *AWS) SetDown(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

// FailNext makes the next n requests fail with 500.
func (f *AWS) FailNext(n int) { f.mu.Lock(); f.failNext = n; f.mu.Unlock() }

// RevokeTokens forgets every token, as IMDS does after a stop/start.
func (f *AWS) RevokeTokens() { f.mu.Lock(); clear(f.tokens); f.mu.Unlock() }

// Stats returns the counters.
func (f *AWS) Stats() (tokenPuts, unauthorized, gets int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.TokenPuts, f.Unauthorized, f.Gets
}

// ServeHTTP implements the IMDSv2 subset the agent uses.
func (f *AWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if f.failNext > 0 {
		f.failNext--
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if r.URL.Path == "/latest/api/token" {
		if r.Method != http.MethodPut {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
		if err != nil || ttl < 1 || ttl > 21600 {
			http.Error(w, "bad ttl", http.StatusBadRequest)
			return
		}
		granted := time.Duration(ttl) * time.Second
		if f.MaxTTL > 0 && granted > f.MaxTTL {
			granted = f.MaxTTL
		}
		f.next++
		f.TokenPuts++
		tok := fmt.Sprintf("AQAEA-token-%d", f.next)
		f.tokens[tok] = f.now().Add(granted)
		w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", strconv.Itoa(int(granted/time.Second)))
		fmt.Fprint(w, tok)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	exp, ok := f.tokens[r.Header.Get("X-aws-ec2-metadata-token")]
	if !ok || !f.now().Before(exp) {
		f.Unauthorized++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	f.Gets++
	if f.failPaths[r.URL.Path] {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	var body string
	switch r.URL.Path {
	case "/latest/meta-data/spot/instance-action":
		body = f.instanceAction
	case "/latest/meta-data/events/recommendations/rebalance":
		body = f.rebalance
	case "/latest/meta-data/events/maintenance/scheduled":
		body = f.maintenance
	case "/latest/meta-data/instance-id":
		body = "i-0123456789abcdef0"
	case "/latest/meta-data/instance-life-cycle":
		body = "spot"
	case "/latest/dynamic/instance-identity/document":
		body = AWSIdentityDocument
	case "/latest/dynamic/instance-identity/signature":
		if f.Signer != nil {
			sum := sha256.Sum256([]byte(AWSIdentityDocument))
			sig, err := rsa.SignPKCS1v15(rand.Reader, f.Signer, crypto.SHA256, sum[:])
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			body = base64.StdEncoding.EncodeToString(sig)
		}
	}
	if body == "" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	fmt.Fprint(w, body)
}

// AWSIdentityDocument is the fake's instance identity document, in the
// real one's shape: pretty-printed, as IMDS serves it.
const AWSIdentityDocument = `{
  "accountId" : "123456789012",
  "architecture" : "x86_64",
  "availabilityZone" : "us-east-1b",
  "imageId" : "ami-0abcdef1234567890",
  "instanceId" : "i-0123456789abcdef0",
  "instanceType" : "g5.xlarge",
  "pendingTime" : "2026-12-02T09:00:00Z",
  "privateIp" : "10.0.0.12",
  "region" : "us-east-1",
  "version" : "2017-09-30"
}`

// GCP is a fake Compute Engine metadata server with ETags and hanging GETs.
type GCP struct {
	mu     sync.Mutex
	values map[string]string
	etags  map[string]int
	change chan struct{} // closed and replaced on every change
	down   bool
	hangs  int
}

// NewGCP returns a fake with preempted=FALSE and maintenance-event=NONE.
func NewGCP() *GCP {
	return &GCP{
		values: map[string]string{"instance/preempted": "FALSE", "instance/maintenance-event": "NONE", "instance/id": "1234567890", "instance/name": "gpu-worker-1",
			"instance/zone": "projects/123456789012/zones/us-central1-a", "instance/machine-type": "projects/123456789012/machineTypes/g2-standard-8",
			"instance/scheduling/provisioning-model": "SPOT", "instance/scheduling/preemptible": "TRUE"},
		etags:  map[string]int{},
		change: make(chan struct{}),
	}
}

// Set changes a key (e.g. "instance/preempted" to "TRUE") and wakes waiters.
func (f *GCP) Set(key, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.values[key] == value {
		return
	}
	f.values[key] = value
	f.etags[key]++
	close(f.change)
	f.change = make(chan struct{})
}

// SetDown makes requests fail with 503 and cuts hanging GETs.
func (f *GCP) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	close(f.change)
	f.change = make(chan struct{})
}

func (f *GCP) etag(key string) string {
	return fmt.Sprintf("%x%04d", len(key)*7919, f.etags[key])
}

// HangCount returns how many hanging GETs have started.
func (f *GCP) HangCount() int { f.mu.Lock(); defer f.mu.Unlock(); return f.hangs }

// ServeHTTP implements GET /computeMetadata/v1/<key>[?wait_for_change=true&last_etag=E&timeout_sec=N].
func (f *GCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata-Flavor") != "Google" {
		http.Error(w, "Missing Metadata-Flavor:Google header.", http.StatusForbidden)
		return
	}
	key, ok := strings.CutPrefix(r.URL.Path, "/computeMetadata/v1/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	timeout := 300 * time.Second
	if s := q.Get("timeout_sec"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		if f.down {
			f.mu.Unlock()
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		val, known := f.values[key]
		tag := f.etag(key)
		wait := f.change
		f.mu.Unlock()
		if !known {
			http.NotFound(w, r)
			return
		}
		if q.Get("wait_for_change") == "true" && q.Get("last_etag") == tag {
			f.mu.Lock()
			f.hangs++
			f.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-deadline:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Metadata-Flavor", "Google")
		w.Header().Set("ETag", tag)
		w.Header().Set("Content-Type", "application/text")
		fmt.Fprint(w, val)
		return
	}
}

// Azure is a fake Scheduled Events endpoint.
type Azure struct {
	// VMName is returned by /metadata/instance/compute/name.
	VMName string

	mu          sync.Mutex
	incarnation int
	events      []map[string]any
	down        bool
	// Acked lists the EventIds approved with StartRequests.
	Acked []string
	// Polls counts scheduled-events GETs.
	Polls int
	// failAcks makes the next acknowledgements fail with 500.
	failAcks int
}

// FailAcks makes the next n StartRequests POSTs fail with 500.
func (f *Azure) FailAcks(n int) { f.mu.Lock(); f.failAcks = n; f.mu.Unlock() }

// NewAzure returns a fake with no events for VM vmName.
func NewAzure(vmName string) *Azure { return &Azure{VMName: vmName, incarnation: 1} }

// AddEvent schedules an event and bumps DocumentIncarnation.
func (f *Azure) AddEvent(id, typ string, resources []string, notBefore time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	nb := ""
	if !notBefore.IsZero() {
		nb = notBefore.UTC().Format(time.RFC1123)
	}
	f.events = append(f.events, map[string]any{
		"EventId": id, "EventStatus": "Scheduled", "EventType": typ, "ResourceType": "VirtualMachine",
		"Resources": resources, "NotBefore": nb, "Description": "", "EventSource": "Platform", "DurationInSeconds": -1,
	})
	f.incarnation++
}

// SetNotBefore overwrites an event's NotBefore with raw text (to serve a
// malformed event).
func (f *Azure) SetNotBefore(id, raw string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		if e["EventId"] == id {
			e["NotBefore"] = raw
		}
	}
	f.incarnation++
}

// SetDown makes requests fail with 503.
func (f *Azure) SetDown(down bool) { f.mu.Lock(); f.down = down; f.mu.Unlock() }

// AckedIDs returns a copy of the approved event IDs.
func (f *Azure) AckedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.Acked...)
}

// ServeHTTP implements the Scheduled Events API and the compute name.
func (f *Azure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	if r.Header.Get("Metadata") != "true" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"Bad request. Required metadata header not specified"}`)
		return
	}
	if r.URL.Query().Get("api-version") == "" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"Bad request. api-version was not specified in the request"}`)
		return
	}
	switch r.URL.Path {
	case "/metadata/instance/compute/name":
		fmt.Fprint(w, f.VMName)
	case "/metadata/instance":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"compute":{"name":%q,"azEnvironment":"AzurePublicCloud"}}`, f.VMName)
	case "/metadata/instance/compute":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"azEnvironment":"AzurePublicCloud","location":"eastus","name":%q,"priority":"Spot",`+
			`"vmId":"02aab8a4-74ef-476e-8182-f6d2ba4166a6","vmSize":"Standard_NC24ads_A100_v4","zone":"2"}`, f.VMName)
	case "/metadata/scheduledevents":
		switch r.Method {
		case http.MethodGet:
			f.Polls++
			w.Header().Set("Content-Type", "application/json")
			evs := f.events
			if evs == nil {
				evs = []map[string]any{}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"DocumentIncarnation": f.incarnation, "Events": evs})
		case http.MethodPost:
			if f.failAcks > 0 {
				f.failAcks--
				http.Error(w, "internal error", http.StatusInternalServerError)
				return
			}
			var req struct {
				StartRequests []struct{ EventId string } //nolint:revive // wire name
			}
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.StartRequests) == 0 {
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			for _, s := range req.StartRequests {
				f.Acked = append(f.Acked, s.EventId)
				for i, e := range f.events {
					if e["EventId"] == s.EventId {
						f.events = append(f.events[:i], f.events[i+1:]...)
						f.incarnation++
						break
					}
				}
			}
			w.WriteHeader(http.StatusOK)
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	default:
		http.NotFound(w, r)
	}
}
