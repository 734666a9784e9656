package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzPageQueries sends arbitrary query strings to every page: no panic,
// no server error, and nothing from the query comes back unescaped.
func FuzzPageQueries(f *testing.F) {
	for _, seed := range []string{"", "gpu=H100&cloud=aws&region=us-*&capacity=spot&sort=tflop&page=2",
		"region=%5B", "page=-1", "page=99999999999999999999", "key=aws%2Fus-east-1%2Fuse1-az1%2Fp5.48xlarge&days=0",
		"kind=notice&window=1h&before=5", "workload=%3Cscript%3E", "next=%2F%2Fevil", "days=1e9", "region=" + strings.Repeat("*", 100)} {
		f.Add(seed)
	}
	clock := &fakeClock{t: testNow}
	s := newTestServer(hostileData(5, 20), clock, false)
	id, sess := s.sessions.create("fuzz", testNow)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, query string) {
		for _, p := range []string{"/", "/ui/prices", "/ui/prices/history", "/ui/plan", "/ui/fleet", "/ui/events", "/ui/budgets", "/ui/login"} {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.URL.Path, req.URL.RawQuery = p, query
			req.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s?%s: %d", p, query, rec.Code)
			}
			if body := rec.Body.String(); strings.Contains(body, "<script>") || strings.Contains(body, "<img") {
				t.Fatalf("%s?%s: unescaped markup in the page", p, query)
			}
		}
		_ = sess
	})
}
