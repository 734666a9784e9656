package dashboard

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// client is a browser-like HTTP client: a cookie jar, no redirects
// followed.
type client struct {
	t    *testing.T
	base string
	http *http.Client
}

func newClient(t *testing.T, h http.Handler) *client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: srv.URL, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (c *client) do(req *http.Request) (*http.Response, string) {
	c.t.Helper()
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(b)
}

func (c *client) get(path string) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	return c.do(req)
}

func (c *client) post(path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(req)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF field in the page:\n%s", body)
	}
	return m[1]
}

// login logs c in and returns the session's CSRF token.
func (c *client) login(token string) (*http.Response, string) {
	c.t.Helper()
	_, body := c.get("/ui/login?next=%2Fui%2Ffleet")
	return c.post("/ui/login", url.Values{"csrf": {csrfOf(c.t, body)}, "token": {token}, "next": {"/ui/fleet"}})
}

func (c *client) mustLogin() string {
	c.t.Helper()
	resp, _ := c.login(testToken)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/fleet" {
		c.t.Fatalf("login: %s to %q", resp.Status, resp.Header.Get("Location"))
	}
	_, body := c.get("/ui/events")
	return csrfOf(c.t, body)
}

func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

var pages = []string{"/", "/ui/prices", "/ui/prices/history?key=aws%2Fus-east-1%2Fuse1-az1%2Fp5.48xlarge", "/ui/plan",
	"/ui/fleet", "/ui/events", "/ui/budgets"}

func TestSecurityHeadersOnEveryAnswer(t *testing.T) {
	clock := &fakeClock{t: testNow}
	c := newClient(t, newTestServer(hostileData(3, 10), clock, false).Handler())
	check := func(path string, resp *http.Response) {
		t.Helper()
		h := resp.Header
		for k, want := range map[string]string{
			"Content-Security-Policy": contentSecurityPolicy, "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
			"Referrer-Policy": "no-referrer", "Cross-Origin-Opener-Policy": "same-origin",
		} {
			if got := h.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", path, k, got, want)
			}
		}
		if !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || strings.Contains(h.Get("Content-Security-Policy"), "unsafe-inline") {
			t.Errorf("%s: CSP allows inline code", path)
		}
		if h.Get("Strict-Transport-Security") != "" {
			t.Errorf("%s: HSTS sent without TLS", path)
		}
	}
	for _, p := range append([]string{"/ui/login", "/ui/nope", "/ui/static/app.css"}, pages...) {
		resp, _ := c.get(p)
		check(p, resp)
	}
	c.mustLogin()
	for _, p := range append([]string{"/ui/nope"}, pages...) {
		resp, body := c.get(p)
		check(p, resp)
		if p != "/ui/nope" && resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", p, resp.Status)
		}
		if resp.Header.Get("Cache-Control") != "no-store" && resp.StatusCode == http.StatusOK {
			t.Errorf("%s: logged-in page may be cached", p)
		}
		// No inline script, style or event handler anywhere (the CSP would
		// block them).
		for _, bad := range []string{"<script>", " style=", "<style", " onclick=", " onload="} {
			if strings.Contains(body, bad) {
				t.Errorf("%s: page has inline %q", p, bad)
			}
		}
	}
	for path, ctype := range map[string]string{"/ui/static/app.css": "text/css", "/ui/static/app.js": "text/javascript"} {
		resp, body := c.get(path)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), ctype) || len(body) < 100 {
			t.Errorf("%s: %s %q, %d bytes", path, resp.Status, resp.Header.Get("Content-Type"), len(body))
		}
	}
}

func TestLoginLogoutAndCookies(t *testing.T) {
	for _, secure := range []bool{false, true} {
		clock := &fakeClock{t: testNow}
		s := newTestServer(hostileData(1, 1), clock, secure)
		c := newClient(t, s.Handler())
		prefix := ""
		if secure {
			prefix = "__Host-"
		}
		resp, _ := c.get("/ui/budgets?x=1")
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?next=%2Fui%2Fbudgets%3Fx%3D1" {
			t.Fatalf("logged out: %s to %q", resp.Status, resp.Header.Get("Location"))
		}
		if secure && resp.Header.Get("Strict-Transport-Security") == "" {
			t.Error("no HSTS under TLS")
		}
		// The login form's CSRF token must match its cookie.
		resp, _ = c.get("/ui/login")
		lc := cookieNamed(resp, prefix+loginCookie)
		if lc == nil || !lc.HttpOnly || lc.SameSite != http.SameSiteStrictMode || lc.Secure != secure {
			t.Fatalf("login cookie %+v", lc)
		}
		resp, _ = c.post("/ui/login", url.Values{"csrf": {"forged"}, "token": {testToken}})
		if resp.StatusCode != http.StatusForbidden || cookieNamed(resp, prefix+sessionCookie) != nil {
			t.Errorf("login with a forged CSRF token: %s", resp.Status)
		}
		_, body := c.get("/ui/login")
		resp, body = c.post("/ui/login", url.Values{"csrf": {csrfOf(t, body)}, "token": {"gpb_wrong"}})
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not a valid admin token") || strings.Contains(body, "gpb_wrong") {
			t.Errorf("wrong token: %s", resp.Status)
		}
		resp, _ = c.login(testToken)
		sc := cookieNamed(resp, prefix+sessionCookie)
		if resp.StatusCode != http.StatusSeeOther || sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Secure != secure || sc.Path != "/" {
			t.Fatalf("login: %s, session cookie %+v", resp.Status, sc)
		}
		if len(sc.Value) < 40 {
			t.Errorf("session id %q is short", sc.Value)
		}
		if secure {
			// The test server is plain HTTP, so the jar keeps no Secure
			// cookie; the flags are what matters here.
			continue
		}
		_, body = c.get("/ui/events")
		if !strings.Contains(body, "signed in as ops") {
			t.Error("logged in page does not name the token")
		}
		csrf := csrfOf(t, body)
		// Logout needs the session's CSRF token.
		if resp, _ := c.post("/ui/logout", url.Values{"csrf": {"nope"}}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("logout without CSRF: %s", resp.Status)
		}
		if resp, _ := c.get("/ui/events"); resp.StatusCode != http.StatusOK {
			t.Errorf("refused logout ended the session: %s", resp.Status)
		}
		resp, _ = c.post("/ui/logout", url.Values{"csrf": {csrf}})
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
			t.Errorf("logout: %s", resp.Status)
		}
		if _, ok := s.sessions.get(sc.Value, clock.Now()); ok {
			t.Error("the session survives logout on the server")
		}
		// Replaying the old cookie does not work.
		req, _ := http.NewRequest(http.MethodGet, c.base+"/ui/events", nil)
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: sc.Value})
		if resp, _ := c.do(req); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("old session cookie after logout: %s", resp.Status)
		}
	}
}

func TestSessionExpiry(t *testing.T) {
	clock := &fakeClock{t: testNow}
	c := newClient(t, newTestServer(hostileData(1, 1), clock, false).Handler())
	c.mustLogin()
	// Active use keeps the session up to the absolute limit.
	for range 24 {
		clock.Add(29 * time.Minute)
		if resp, _ := c.get("/ui/events"); resp.StatusCode != http.StatusOK {
			t.Fatalf("after %s of use: %s", clock.Now().Sub(testNow), resp.Status)
		}
	}
	clock.Add(29 * time.Minute) // 11h36m + 29m > 12h
	if resp, _ := c.get("/ui/events"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("past the 12h limit: %s", resp.Status)
	}
	c.mustLogin()
	clock.Add(31 * time.Minute)
	if resp, _ := c.get("/ui/events"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after 31m idle: %s", resp.Status)
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/plan?x=1": "/ui/plan?x=1", "/": "/", "": "/", "//evil.example": "/", "/\\evil.example": "/",
		"https://evil.example/": "/", "/api/v1/offers": "/", "/ui/login": "/", "/ui/fleet\r\nX: y": "/", "ui/plan": "/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestHostileNamesEscaped renders every page with hostile names in every
// field that comes from users, clouds or agents.
func TestHostileNamesEscaped(t *testing.T) {
	clock := &fakeClock{t: testNow}
	c := newClient(t, newTestServer(hostileData(3, 10), clock, false).Handler())
	c.mustLogin()
	for _, p := range append(pages, "/ui/events?kind=notice", "/ui/fleet?workload="+url.QueryEscape(xssScript)) {
		resp, body := c.get(p)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", p, resp.Status)
		}
		for _, raw := range []string{xssScript, "<img", "onerror=alert"} {
			if strings.Contains(body, raw) && !strings.Contains(body, "onerror=alert(1)&gt;") {
				t.Errorf("%s: raw %q in the page", p, raw)
			}
		}
		if strings.Contains(body, "<img") || strings.Contains(body, "<script>") {
			t.Errorf("%s: injected markup in the page", p)
		}
	}
	_, body := c.get("/ui/fleet")
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(body, "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;") {
		t.Error("fleet: hostile names not shown escaped")
	}
}

func TestEmptyStatesNeverShowNumbers(t *testing.T) {
	clock := &fakeClock{t: testNow}
	f := hostileData(0, 0)
	f.plan, f.fleet, f.spend, f.bench = nil, nil, nil, nil
	c := newClient(t, newTestServer(f, clock, false).Handler())
	c.mustLogin()
	for path, want := range map[string][]string{
		"/":           {"The spend ledger has not recorded any spending yet", "No policy is loaded", "no GPUs are known to run", "No active alerts"},
		"/ui/fleet":   {"The autoscaler has not recorded any instances yet", "No agent has registered yet", "No agent has reported a benchmark yet"},
		"/ui/plan":    {"No policy is loaded"},
		"/ui/budgets": {"No policy is loaded, so there are no budgets", "The spend ledger has not recorded any spending this month yet"},
		"/ui/events":  {"No events match"},
	} {
		_, body := c.get(path)
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %q", path, w)
			}
		}
		if strings.Contains(body, "$0.00") {
			t.Errorf("%s: shows $0.00 for data that is not recorded", path)
		}
	}
}

func TestOverviewWithLedgerAndFleet(t *testing.T) {
	clock := &fakeClock{t: testNow}
	f := hostileData(4, 0)
	f.spend = &SpendSummary{TodayUSD: 123.45, MonthUSD: 2345.67, OnDemandMonthUSD: 6000}
	f.budgets = []Budget{{Name: "research", MonthlyUSD: 500, PlannedUSD: 800, Workloads: []string{xssScript},
		SpentUSD: 450, BurnPerHourUSD: 2.5, ForecastUSD: 2000}}
	c := newClient(t, newTestServer(f, clock, false).Handler())
	c.mustLogin()
	_, body := c.get("/")
	for _, w := range []string{"$123.45", "$2,345.67", "$3,654.33", "aws spot", ">32<", "over (160.0%)", "Budget research: the plan expects $800.00 against $500.00",
		"Budget research: $450.00 spent this month; at the current burn $2,000.00 by the month&#39;s end, against $500.00", "forecast over"} {
		if !strings.Contains(body, w) {
			t.Errorf("overview: no %q", w)
		}
	}
	_, body = c.get("/ui/budgets")
	for _, w := range []string{"Spent this month $450.00", "at the current burn ($2.50/h) $2,000.00", "spent (ledger)</text>", "at the current burn</text>", "forecast (plan)</text>"} {
		if !strings.Contains(body, w) {
			t.Errorf("budgets with a ledger: no %q", w)
		}
	}
	_, body = c.get("/ui/fleet")
	if !strings.Contains(body, "Instances 1–4 of 4") || !strings.Contains(body, "$30.500") {
		t.Error("fleet: instances from the fleet source not shown")
	}
}

func TestPricesFiltersSortAndPages(t *testing.T) {
	clock := &fakeClock{t: testNow}
	c := newClient(t, newTestServer(hostileData(0, 0), clock, false).Handler())
	c.mustLogin()
	rowRE := regexp.MustCompile(`(?s)<tr>\s*<td>(aws|gcp|azure)</td><td>([^<]*)</td>`)
	for _, tc := range []struct {
		query  string
		status int
		want   string
		check  func(t *testing.T, body string)
	}{
		{"region=%5Bus", http.StatusBadRequest, "is not a valid glob", nil},
		{"gpu=H1000", http.StatusBadRequest, "is not known", nil},
		{"cloud=ibm", http.StatusBadRequest, "unknown cloud", nil},
		{"capacity=reserved", http.StatusBadRequest, "want spot or on-demand", nil},
		{"sort=name", http.StatusBadRequest, "want gpu-hour or tflop", nil},
		{"cloud=gcp&region=europe-*", http.StatusOK, "Offers 1–", func(t *testing.T, body string) {
			rows := rowRE.FindAllStringSubmatch(body, -1)
			if len(rows) == 0 {
				t.Fatal("no rows")
			}
			for _, r := range rows {
				if r[1] != "gcp" || !strings.HasPrefix(r[2], "europe-") {
					t.Errorf("row %v outside the filter", r[1:])
				}
			}
		}},
		{"", http.StatusOK, "next →", func(t *testing.T, body string) {
			if n := len(rowRE.FindAllString(body, -1)); n != pageSize {
				t.Errorf("%d rows on page 1, want %d", n, pageSize)
			}
			// The embedded snapshot states no pricing date: every row is
			// marked undated, none stale.
			if n := strings.Count(body, ">undated</span>"); n != pageSize || strings.Contains(body, ">stale</span>") {
				t.Errorf("%d undated marks, want %d, and no stale one", n, pageSize)
			}
		}},
		{"page=999", http.StatusOK, "← previous", nil},
	} {
		resp, body := c.get("/ui/prices?" + tc.query)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("?%s: %s, want %d with %q", tc.query, resp.Status, tc.status, tc.want)
			continue
		}
		if tc.check != nil {
			t.Run(tc.query, func(t *testing.T) { tc.check(t, body) })
		}
	}
	// Sorted by the chosen key, ascending.
	for _, sortBy := range []string{"gpu-hour", "tflop"} {
		_, body := c.get("/ui/prices?capacity=spot&gpu=A100-80GB&sort=" + sortBy)
		col := 8
		if sortBy == "tflop" {
			col = 9
		}
		prev := 0.0
		for _, row := range regexp.MustCompile(`(?s)<tr>\s*<td>.*?</tr>`).FindAllString(body, -1) {
			cells := regexp.MustCompile(`<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(row, -1)
			v := parseUSD(t, cells[col][1])
			if v < prev {
				t.Errorf("sort %s: %v after %v", sortBy, v, prev)
			}
			prev = v
		}
		if prev == 0 {
			t.Errorf("sort %s: no rows", sortBy)
		}
	}
}

func parseUSD(t *testing.T, s string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscanf(strings.TrimPrefix(s, "$"), "%g", &v); err != nil {
		t.Fatalf("parsing %q: %v", s, err)
	}
	return v
}

func multipartPolicy(t *testing.T, csrf, text, filename string, file []byte) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.WriteField("csrf", csrf)
	_ = w.WriteField("policy", text)
	if filename != "" {
		fw, err := w.CreateFormFile("file", filename)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write(file)
	}
	_ = w.Close()
	return &buf, w.FormDataContentType()
}

func TestPlanThisPolicy(t *testing.T) {
	clock := &fakeClock{t: testNow}
	c := newClient(t, newTestServer(hostileData(0, 0), clock, false).Handler())
	csrf := c.mustLogin()
	post := func(text, filename string, file []byte, token string) (*http.Response, string) {
		body, ctype := multipartPolicy(t, token, text, filename, file)
		req, _ := http.NewRequest(http.MethodPost, c.base+"/ui/plan", body)
		req.Header.Set("Content-Type", ctype)
		return c.do(req)
	}
	good := "workloads:\n  - name: finetune\n    kind: training\n    gpu: {models: any, count: 1, min_memory_gib: 24}\n    work: {gpu_hours: 40}\n"
	broken := "workloads:\n  - name: finetune\n    kind: training\n    gpu: {models: [H1OO], count: 1}\n    work: {gpu_hours: 40}\n"
	blocked := "workloads:\n  - name: huge\n    kind: training\n    gpu: {models: [T4], count: 1}\n    work: {gpu_hours: 4000}\n    deadline: 1h\n"
	for _, tc := range []struct {
		name, text, filename string
		file                 []byte
		csrf                 string
		status               int
		want                 []string
	}{
		{"no csrf", good, "", nil, "", http.StatusForbidden, []string{"security token"}},
		{"forged csrf", good, "", nil, "x" + csrf, http.StatusForbidden, []string{"security token"}},
		{"empty", "  ", "", nil, csrf, http.StatusBadRequest, []string{"paste a policy file"}},
		{"good", good, "", nil, csrf, http.StatusOK, []string{`id="tried-plan"`, "Plan of pasted.yaml", "finetune"}},
		{"broken", broken, "", nil, csrf, http.StatusUnprocessableEntity, []string{"1 error(s) in pasted.yaml", `href="#L4"`, "line 4, column", `<li id="L4" class="bad">`, "H1OO"}},
		{"upload wins", "", "../../etc/team.yaml", []byte(broken), csrf, http.StatusUnprocessableEntity, []string{"error(s) in team.yaml", "line 4, column"}},
		{"blocked", blocked, "", nil, csrf, http.StatusOK, []string{"Blocked workloads", "huge", "deadline"}},
		{"too big", "", "big.yaml", bytes.Repeat([]byte("#"), 5<<20), csrf, http.StatusForbidden, nil},
	} {
		resp, body := post(tc.text, tc.filename, tc.file, tc.csrf)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.status)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %q in the page", tc.name, w)
			}
		}
	}
}

func TestEventsFilterAndPages(t *testing.T) {
	clock := &fakeClock{t: testNow}
	c := newClient(t, newTestServer(hostileData(1, 450), clock, false).Handler())
	c.mustLogin()
	_, body := c.get("/ui/events?kind=drained")
	n := strings.Count(body, `<span class="badge">drained</span>`)
	if n != pageSize || strings.Contains(body, `<span class="badge">notice</span>`) {
		t.Errorf("kind filter: %d drained rows (want %d) or other kinds shown", n, pageSize)
	}
	next := regexp.MustCompile(`href="(/ui/events\?[^"]+)" rel="next"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatal("no link to older events")
	}
	_, body2 := c.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	// 450 events, every fourth drained: 113, so 13 on the second page.
	if strings.Count(body2, `<span class="badge">drained</span>`) != 13 {
		t.Errorf("second page: %d rows, want the 13 older drained events", strings.Count(body2, `<span class="badge">drained</span>`))
	}
	_, body = c.get("/ui/events?window=1h")
	if strings.Count(body, "<tr><td>") != pageSize {
		t.Error("1h window: want a full page")
	}
}

func TestRoute(t *testing.T) {
	clock := &fakeClock{t: testNow}
	s := newTestServer(hostileData(0, 0), clock, false)
	api := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
	h := Route(api, s)
	for path, dash := range map[string]bool{"/": true, "/ui/prices": true, "/ui": true, "/api/v1/offers": false,
		"/metrics": false, "/healthz": false, "/uix": false, "/favicon.ico": false} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if got := rec.Code != http.StatusTeapot; got != dash {
			t.Errorf("%s: served by the dashboard = %v, want %v", path, got, dash)
		}
	}
}
