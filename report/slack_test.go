package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSlack is a local Slack: an incoming webhook at /services/..., and the
// Web API methods the sender uses (chat.postMessage,
// files.getUploadURLExternal, the upload URL, files.completeUploadExternal),
// answering in Slack's wire format. fail scripts answers per path.
type fakeSlack struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	calls    []string
	posted   []map[string]any
	uploaded []byte
	complete url2values
	fail     map[string][]int // path → statuses to answer before succeeding
	token    string
}

type url2values map[string]string

func newFakeSlack(t *testing.T) *fakeSlack {
	f := &fakeSlack{t: t, fail: map[string][]int{}, token: "xoxb-123-secret-token"}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.URL.Path)
	if st := f.fail[r.URL.Path]; len(st) > 0 {
		f.fail[r.URL.Path] = st[1:]
		if st[0] == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(st[0])
		_, _ = io.WriteString(w, "<html>error</html>")
		return
	}
	body, _ := io.ReadAll(r.Body)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		_ = parseFormBody(r, body)
	}
	// Slack takes the token as a bearer header or a form field.
	apiAuth := func() bool {
		if r.Header.Get("Authorization") != "Bearer "+f.token && r.Form.Get("token") != f.token {
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_auth"})
			return false
		}
		return true
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/services/"):
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			w.WriteHeader(400)
			_, _ = io.WriteString(w, "invalid_payload")
			return
		}
		f.posted = append(f.posted, m)
		_, _ = io.WriteString(w, "ok")
	case r.URL.Path == "/api/chat.postMessage":
		if !apiAuth() {
			return
		}
		m := map[string]any{"channel": r.Form.Get("channel"), "text": r.Form.Get("text")}
		var blocks []any
		_ = json.Unmarshal([]byte(r.Form.Get("blocks")), &blocks)
		m["blocks"] = blocks
		f.posted = append(f.posted, m)
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "channel": "C123", "ts": "1700000000.000100"})
	case r.URL.Path == "/api/files.getUploadURLExternal":
		if !apiAuth() {
			return
		}
		if r.Form.Get("filename") == "" || r.Form.Get("length") == "" {
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": "invalid_arguments"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "upload_url": f.srv.URL + "/upload/F123", "file_id": "F123"})
	case r.URL.Path == "/upload/F123":
		// Slack's upload URL takes the raw bytes or a multipart form.
		f.uploaded = append([]byte(nil), body...)
		if mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			for {
				part, err := mr.NextPart()
				if err != nil {
					break
				}
				if part.FileName() != "" {
					f.uploaded, _ = io.ReadAll(part)
				}
			}
		}
		_, _ = io.WriteString(w, "OK - "+string(rune('0'+len(body)%10)))
	case r.URL.Path == "/api/files.completeUploadExternal":
		if !apiAuth() {
			return
		}
		f.complete = url2values{"files": r.Form.Get("files"), "channel_id": r.Form.Get("channel_id")}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "files": []map[string]any{{"id": "F123", "title": "chart"}}})
	default:
		w.WriteHeader(404)
	}
}

func parseFormBody(r *http.Request, body []byte) error {
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.Form = nil
	return r.ParseForm()
}

func noSleep(context.Context, time.Duration) error { return nil }

func testMessage(t *testing.T) Message {
	in := seeded()
	in.Period = Week
	r := Build(in)
	m := Blocks(r)
	img, err := SpendChart(r)
	if err != nil {
		t.Fatal(err)
	}
	m.Image = img
	return m
}

func TestWebhookSend(t *testing.T) {
	f := newFakeSlack(t)
	var logs bytes.Buffer
	hook := f.srv.URL + "/services/T000/B000/XXXXSECRETXXXX"
	s := &Sender{WebhookURL: hook, Sleep: noSleep, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	f.fail["/services/T000/B000/XXXXSECRETXXXX"] = []int{429, 503}
	if err := s.Send(context.Background(), "#ignored", testMessage(t)); err != nil {
		t.Fatal(err)
	}
	if len(f.posted) != 1 {
		t.Fatalf("posted %d messages, want 1 after a 429 and a 503", len(f.posted))
	}
	if blocks, _ := f.posted[0]["blocks"].([]any); len(blocks) < 5 {
		t.Errorf("webhook payload has %d blocks", len(blocks))
	}
	if f.uploaded != nil {
		t.Error("webhook-only setup uploaded a file")
	}
	if strings.Contains(logs.String(), "XXXXSECRETXXXX") {
		t.Errorf("webhook URL in logs: %s", logs.String())
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Errorf("retries not logged: %s", logs.String())
	}
}

func TestBotTokenSendWithUpload(t *testing.T) {
	f := newFakeSlack(t)
	s := &Sender{BotToken: f.token, APIURL: f.srv.URL + "/api", Sleep: noSleep}
	m := testMessage(t)
	if err := s.Send(context.Background(), "C-costs", m); err != nil {
		t.Fatal(err)
	}
	want := []string{"/api/chat.postMessage", "/api/files.getUploadURLExternal", "/upload/F123", "/api/files.completeUploadExternal"}
	if strings.Join(f.calls, " ") != strings.Join(want, " ") {
		t.Errorf("calls %v, want %v", f.calls, want)
	}
	if f.posted[0]["channel"] != "C-costs" {
		t.Errorf("posted to %v", f.posted[0]["channel"])
	}
	if !bytes.Equal(f.uploaded, m.Image) {
		t.Errorf("uploaded %d bytes, want the %d-byte PNG", len(f.uploaded), len(m.Image))
	}
	if f.complete["channel_id"] != "C-costs" || !strings.Contains(f.complete["files"], "F123") {
		t.Errorf("complete = %v", f.complete)
	}
}

func TestSendFailuresAreRedactedAndBounded(t *testing.T) {
	f := newFakeSlack(t)
	var logs bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&logs, nil))
	// A bad token: not retried, error names the Slack error only.
	s := &Sender{BotToken: "xoxb-999-wrong-secret", APIURL: f.srv.URL + "/api", Sleep: noSleep, Log: lg}
	err := s.Send(context.Background(), "C1", Message{Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "invalid_auth") {
		t.Fatalf("bad token: %v", err)
	}
	if n := len(f.calls); n != 1 {
		t.Errorf("invalid_auth retried: %d calls", n)
	}
	// 5xx forever: gives up after MaxAttempts.
	f.calls = nil
	hook := f.srv.URL + "/services/T1/B1/SUPERSECRETHOOK"
	f.fail["/services/T1/B1/SUPERSECRETHOOK"] = []int{500, 500, 500, 500, 500, 500}
	s = &Sender{WebhookURL: hook, Sleep: noSleep, Log: lg, MaxAttempts: 3}
	err = s.Send(context.Background(), "", Message{Text: "x"})
	if err == nil || len(f.calls) != 3 {
		t.Fatalf("5xx: err %v after %d calls, want an error after 3", err, len(f.calls))
	}
	// An unreachable webhook: the URL must not leak through net/http's error.
	s = &Sender{WebhookURL: "http://127.0.0.1:1/services/T2/B2/LEAKME", Sleep: noSleep, Log: lg, MaxAttempts: 2}
	err = s.Send(context.Background(), "", Message{Text: "x"})
	if err == nil {
		t.Fatal("unreachable webhook: no error")
	}
	for _, secret := range []string{"SUPERSECRETHOOK", "LEAKME", "wrong-secret"} {
		if strings.Contains(err.Error(), secret) || strings.Contains(logs.String(), secret) {
			t.Errorf("secret %q leaked: err=%v logs=%s", secret, err, logs.String())
		}
	}
	// A Retry-After longer than allowed fails instead of blocking the broker.
	f.calls = nil
	f.fail["/services/T3/B3/S"] = []int{429}
	s = &Sender{WebhookURL: f.srv.URL + "/services/T3/B3/S", Sleep: noSleep, MaxRetryAfter: 500 * time.Millisecond}
	if err := s.Send(context.Background(), "", Message{Text: "x"}); err == nil || !strings.Contains(err.Error(), "rate limited") {
		t.Errorf("long Retry-After: %v", err)
	}
	if err := (&Sender{}).Send(context.Background(), "", Message{}); !errors.Is(err, ErrNoDestination) {
		t.Errorf("no destination: %v", err)
	}
}

// memAlerts is an in-memory AlertStore.
type memAlerts struct{ active map[string]bool }

func (m *memAlerts) ActiveAlerts(context.Context) ([]string, error) {
	var ks []string
	for k, on := range m.active {
		if on {
			ks = append(ks, k)
		}
	}
	return ks, nil
}

func (m *memAlerts) ActivateAlert(_ context.Context, key, _ string, _ time.Time) (bool, error) {
	if m.active[key] {
		return false, nil
	}
	m.active[key] = true
	return true, nil
}

func (m *memAlerts) ClearAlert(_ context.Context, key string, _ time.Time) error {
	m.active[key] = false
	return nil
}

func TestDedupeSendsOncePerCondition(t *testing.T) {
	st := &memAlerts{active: map[string]bool{}}
	a := Alert{Key: "storm/p", Kind: AlertPreemptionStorm}
	b := Alert{Key: "agent/x", Kind: AlertAgentSilent}
	steps := []struct {
		holds []Alert
		want  string
	}{
		{[]Alert{a}, "storm/p"},
		{[]Alert{a, b}, "agent/x"}, // a already sent
		{[]Alert{a, b}, ""},
		{[]Alert{b}, ""},           // a clears
		{[]Alert{a, b}, "storm/p"}, // a returns: sent again
	}
	for i, s := range steps {
		got, err := Dedupe(context.Background(), st, s.holds, now)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, g := range got {
			keys = append(keys, g.Key)
		}
		if strings.Join(keys, ",") != s.want {
			t.Errorf("step %d: sent %v, want %q", i, keys, s.want)
		}
	}
}
