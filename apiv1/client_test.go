package apiv1_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpubroker/gpubroker/apiv1"
)

func TestErrorDecoding(t *testing.T) {
	tests := []struct {
		name, body       string
		status           int
		code, msg        string
		temporary        bool
		mustNotMentionIn string
	}{
		{"broker", `{"error":{"code":"forbidden","message":"token is for another instance"}}`, 403, "forbidden", "token is for another instance", false, ""},
		{"proxy json", `{"error":"starting up"}`, 503, "", "starting up", true, ""},
		{"html", `<html>bad gateway</html>`, 502, "", "<html>bad gateway</html>", true, ""},
		{"empty", ``, 429, "", "Too Many Requests", true, ""},
		{"long", strings.Repeat("x", 500), 400, "", strings.Repeat("x", 200) + "…", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := apiv1.NewClient(srv.URL, "gpb_secret", srv.Client())
			_, err := c.ListWorkloads(context.Background())
			var e *apiv1.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v, want *apiv1.Error", err, err)
			}
			if e.Status != tc.status || e.Code != tc.code || e.Message != tc.msg || e.Temporary() != tc.temporary {
				t.Fatalf("got %+v temporary=%v", e, e.Temporary())
			}
			if apiv1.StatusOf(err) != tc.status || apiv1.IsTemporary(err) != tc.temporary {
				t.Fatal("StatusOf/IsTemporary disagree with the error")
			}
			if strings.Contains(err.Error(), "gpb_secret") {
				t.Fatal("token in error text")
			}
		})
	}
}

func TestRequestShape(t *testing.T) {
	var got *http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"status":"accepted","duplicate":true,"event":{"id":7,"kind":"notice","future_field":1}}`)
	}))
	defer srv.Close()
	c := apiv1.NewClient(srv.URL+"/", "tok", srv.Client())
	acc, err := c.ReportNotice(context.Background(), "i-0a/b", "key-1", apiv1.NoticeReport{Kind: apiv1.NoticePreempt, ID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	if !acc.Duplicate || acc.Event.ID != 7 {
		t.Fatalf("answer %+v", acc)
	}
	if got.Method != "POST" || got.URL.EscapedPath() != "/api/v1/agents/i-0a%2Fb/notices" {
		t.Fatalf("request %s %s", got.Method, got.URL.EscapedPath())
	}
	if got.Header.Get("Authorization") != "Bearer tok" || got.Header.Get("Idempotency-Key") != "key-1" ||
		got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", got.Header)
	}
	if !strings.Contains(body, `"kind":"preempt"`) || strings.Contains(body, "deadline") {
		t.Fatalf("body %s", body)
	}

	q := apiv1.OffersQuery{GPUs: []string{"H100", "A100-80GB"}, Capacity: "spot", MinGPUs: 8, MaxPrice: 2.5, Limit: 3}
	if got, want := q.Values().Encode(), "capacity=spot&gpu=H100%2CA100-80GB&limit=3&max_price=2.5&min_gpus=8"; got != want {
		t.Fatalf("offers query %s, want %s", got, want)
	}
}

func TestNetworkErrorIsTemporary(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := apiv1.NewClient(url, "tok", nil).Plan(context.Background())
	if err == nil || !apiv1.IsTemporary(err) || apiv1.StatusOf(err) != 0 {
		t.Fatalf("connection refused: %v (temporary=%v)", err, apiv1.IsTemporary(err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := apiv1.NewClient(url, "tok", nil).Plan(ctx); apiv1.IsTemporary(err) {
		t.Fatalf("a cancelled request is not temporary: %v", err)
	}
}
