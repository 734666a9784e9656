package fake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Metadata is a fake EC2 instance metadata service (IMDSv2) for every
// instance of a simulated cloud, one per path prefix: the agent of instance
// ID watches http://HOST/ID (its metadata_url), and sees
//
//	PUT /ID/latest/api/token                        (session token, TTL header)
//	GET /ID/latest/meta-data/instance-id            (the instance id)
//	GET /ID/latest/meta-data/placement/availability-zone
//	GET /ID/latest/meta-data/spot/instance-action   (404 until a notice)
//
// with the token rules of the real service (missing or unknown token: 401).
// Wire it to a Compute with c.OnNotice(m.Deliver). It is safe for
// concurrent use.
type Metadata struct {
	// Compute answers instance-id and zone; may be nil (then every id is
	// known and the zone is empty).
	Compute *Compute

	mu      sync.Mutex
	tokens  map[string]string // token -> instance id
	actions map[string]string // instance id -> instance-action body
	gets    int
}

// NewMetadata returns a metadata service for c's instances.
func NewMetadata(c *Compute) *Metadata {
	return &Metadata{Compute: c, tokens: map[string]string{}, actions: map[string]string{}}
}

// Deliver publishes a preemption notice on the instance's
// spot/instance-action path, in EC2's format.
func (m *Metadata) Deliver(n Notice) {
	b, _ := json.Marshal(struct {
		Action string `json:"action"`
		Time   string `json:"time"`
	}{n.Action, n.At.UTC().Format("2006-01-02T15:04:05Z")})
	m.mu.Lock()
	m.actions[n.Instance.ID] = string(b)
	m.mu.Unlock()
}

// Gets counts authorised GETs (the agents' polls).
func (m *Metadata) Gets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets
}

func (m *Metadata) instance(id string) (zone string, ok bool) {
	if m.Compute == nil {
		return "", true
	}
	m.Compute.mu.Lock()
	defer m.Compute.mu.Unlock()
	s := m.Compute.insts[id]
	if s == nil {
		return "", false
	}
	return s.inst.Zone, true
}

// ConsoleInstance is one instance as GET /_fake/instances lists it: the
// cloud console a test reads to check for duplicates.
type ConsoleInstance struct {
	ID           string            `json:"id"`
	Zone         string            `json:"zone"`
	InstanceType string            `json:"instance_type"`
	Capacity     string            `json:"capacity"`
	State        string            `json:"state"`
	Tags         map[string]string `json:"tags"`
	Noticed      bool              `json:"noticed"`
	LaunchedAt   time.Time         `json:"launched_at"`
}

// ServeHTTP implements the paths above, and for tests GET /_fake/instances
// (every instance of the fake, JSON), GET /_fake/notices and POST
// /_fake/timescale?x=N (0 freezes the traces) and POST /_fake/calm (spot
// capacity unlimited from now on).
func (m *Metadata) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m.Compute != nil && r.Method == http.MethodPost && r.URL.Path == "/_fake/calm" {
		m.Compute.Calm()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if m.Compute != nil && r.Method == http.MethodPost && r.URL.Path == "/_fake/timescale" {
		x, err := strconv.ParseFloat(r.URL.Query().Get("x"), 64)
		if err != nil || x < 0 {
			http.Error(w, "x must be a number >= 0", http.StatusBadRequest)
			return
		}
		m.Compute.SetTimeScale(x)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if m.Compute != nil && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/_fake/") {
		var v any
		switch r.URL.Path {
		case "/_fake/instances":
			var out []ConsoleInstance
			for _, in := range m.Compute.Instances() {
				out = append(out, ConsoleInstance{ID: in.ID, Zone: in.Zone, InstanceType: in.InstanceType, Capacity: string(in.Capacity),
					State: string(in.State), Tags: in.Tags, Noticed: m.Compute.Noticed(in.ID), LaunchedAt: in.LaunchedAt})
			}
			v = out
		case "/_fake/notices":
			v = m.Compute.Notices()
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
		return
	}
	id, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !ok || id == "" {
		http.NotFound(w, r)
		return
	}
	zone, known := m.instance(id)
	if !known {
		http.NotFound(w, r)
		return
	}
	rest = "/" + rest
	if rest == "/latest/api/token" {
		if r.Method != http.MethodPut {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		ttl, err := strconv.Atoi(r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
		if err != nil || ttl < 1 || ttl > 21600 {
			http.Error(w, "bad ttl", http.StatusBadRequest)
			return
		}
		var b [16]byte
		_, _ = rand.Read(b[:])
		tok := "AQAE" + hex.EncodeToString(b[:])
		m.mu.Lock()
		m.tokens[tok] = id
		m.mu.Unlock()
		w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", strconv.Itoa(ttl))
		fmt.Fprint(w, tok)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	m.mu.Lock()
	owner, ok := m.tokens[r.Header.Get("X-aws-ec2-metadata-token")]
	if !ok || owner != id {
		m.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	m.gets++
	action := m.actions[id]
	m.mu.Unlock()
	switch rest {
	case "/latest/meta-data/instance-id":
		fmt.Fprint(w, id)
	case "/latest/meta-data/placement/availability-zone":
		fmt.Fprint(w, zone)
	case "/latest/meta-data/spot/instance-action":
		if action == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		fmt.Fprint(w, action)
	default:
		http.NotFound(w, r)
	}
}
