package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/gpubroker/gpubroker/broker"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "copy the browser test's screenshots to docs/img/dashboard-*.png")

// Hostile names planted in every field that users, clouds or agents
// supply. The browser test asserts none of them becomes markup.
const (
	xssScript = `<script>alert(1)</script>`
	xssImg    = `"><img src=x onerror=alert(1)>`
)

// chromiumPath finds the browser, or skips (fails under CI=true).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("GPUBROKER_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found (install Debian's chromium, or set GPUBROKER_CHROMIUM); CI must not skip the browser test")
	}
	t.Skip("chromium not found: install Debian's chromium (or set GPUBROKER_CHROMIUM) to run the browser test")
	return ""
}

func artifactsDir(t *testing.T) string {
	if d := os.Getenv("GPUBROKER_ARTIFACTS"); d != "" {
		d = filepath.Join(d, "dashboard")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// seed fills a SQLite store the way a running broker would have: offers
// with a price history (one of them stale), agents with telemetry, events
// and benchmarks, some carrying hostile names, and an admin token.
func seed(t *testing.T, dsn, adminToken string, now time.Time) (historyKey, staleGPU string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := st.Broker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AddToken(ctx, store.TokenRecord{Hash: httpapi.HashToken(adminToken), Kind: store.TokenAdmin, Subject: "e2e", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}

	// Price history: the us-east-1 offers of the snapshot, observed four
	// times, ten days apart, with moving spot prices; one offer was last
	// seen 10 days ago (stale).
	snap, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	offers := snap.Query(pricing.Query{Clouds: []pricing.Cloud{pricing.AWS}, Regions: []string{"us-east-1"}})
	if len(offers) < 3 {
		t.Fatalf("snapshot has %d us-east-1 offers", len(offers))
	}
	for i, o := range offers {
		if o.GPU == pricing.H100 && o.SpotPrice > 0 {
			historyKey = o.Key()
			offers[0], offers[i] = offers[i], offers[0]
			break
		}
	}
	if historyKey == "" {
		t.Fatal("no H100 spot offer in us-east-1 in the snapshot")
	}
	// A shape seen 20 days ago and not since, in a zone the snapshot does
	// not have (the snapshot's newer observation would win otherwise).
	staleOffer := offers[1]
	staleOffer.Zone = "use1-az9"
	staleOffer.Source = "aws price list (test seed)"
	staleGPU = string(staleOffer.GPU)
	for k, factor := range []float64{1.1, 0.9, 1.25, 1.0} {
		at := now.Add(time.Duration(k-3) * 10 * 24 * time.Hour)
		batch := make([]pricing.Offer, 0, len(offers))
		for _, o := range offers {
			// Refreshed prices carry their observation date (the
			// snapshot's rows are undated, hence always stale).
			o.ObservedAt, o.Source = at, "aws price list (test seed)"
			if o.SpotPrice > 0 {
				o.SpotPrice *= factor
			}
			if k == 2 {
				o.OnDemandPrice *= 1.05
			}
			batch = append(batch, o)
		}
		if k <= 1 {
			staleOffer.ObservedAt = at
			batch = append(batch, staleOffer)
		}
		if _, err := st.SaveOffers(ctx, pricing.AWS, "us-east-1", batch, at); err != nil {
			t.Fatal(err)
		}
	}

	type agent struct {
		rec store.InstanceRecord
		tel string
	}
	gpu := func(i int, name string, util, used, total float64) map[string]any {
		return map[string]any{"index": i, "name": name, "util_gpu_pct": util, "memory_used_mib": used, "memory_total_mib": total,
			"temperature_c": 61, "power_w": 290}
	}
	tel := func(gs ...map[string]any) string {
		b, _ := json.Marshal(gs)
		return string(b)
	}
	agents := []agent{
		{store.InstanceRecord{ID: "i-0a1b2c3d4e5f60001", Hostname: "train-a", Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a",
			InstanceType: "p5.48xlarge", GPU: "H100", GPUCount: 8, Capacity: "spot", Workload: "llm-finetune"},
			tel(gpu(0, "NVIDIA H100 80GB HBM3", 97, 71000, 81559), gpu(1, "NVIDIA H100 80GB HBM3", 95, 70500, 81559))},
		{store.InstanceRecord{ID: "1234567890123456789", Hostname: "serve-b", Cloud: "gcp", Region: "us-central1", Zone: "us-central1-a",
			InstanceType: "g2-standard-8", GPU: "L4", GPUCount: 1, Capacity: "spot", Workload: "chat-inference"},
			tel(gpu(0, "NVIDIA L4", 64, 17000, 23034))},
		{store.InstanceRecord{ID: "serve-c", Hostname: "serve-c", Cloud: "azure", Region: "eastus", Zone: "1",
			InstanceType: "Standard_NC4as_T4_v3", GPU: "T4", GPUCount: 1, Capacity: "on-demand", Workload: "chat-inference"},
			tel(gpu(0, "Tesla T4", 40, 9000, 15360))},
		{store.InstanceRecord{ID: xssImg, Hostname: xssScript, Cloud: "aws", Region: "us-east-1", Zone: xssScript,
			InstanceType: xssImg, GPU: xssImg, GPUCount: 1, Capacity: "on-demand", Workload: xssScript},
			tel(gpu(0, xssScript, 10, 1, 2))},
	}
	var ups []store.HeartbeatUpdate
	for i, a := range agents {
		if _, err := b.RegisterAgent(ctx, a.rec, fmt.Sprintf("agent-token-hash-%d", i), now.Add(-time.Duration(33-i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		ups = append(ups, store.HeartbeatUpdate{Instance: a.rec.ID, At: now.Add(-time.Duration(5+i*20) * time.Second), Load1: 3.5,
			Utilization: 80, Telemetry: json.RawMessage(a.tel)})
	}
	if _, err := b.Heartbeats(ctx, ups); err != nil {
		t.Fatal(err)
	}
	for _, e := range []store.EventRecord{
		{At: now.Add(-3 * time.Hour), Kind: "notice", Instance: agents[1].rec.ID, Workload: "chat-inference", Message: "preempt notice: instance stops at 14:02 UTC"},
		{At: now.Add(-170 * time.Minute), Kind: "drained", Instance: agents[1].rec.ID, Workload: "chat-inference", Message: "drain completed"},
		{At: now.Add(-2 * time.Hour), Kind: "price_change", Message: "aws us-east-1 p5.48xlarge spot −12%"},
		{At: now.Add(-time.Hour), Kind: "notice", Instance: xssImg, Workload: xssScript, Message: xssScript + " " + xssImg},
	} {
		if _, err := b.AddEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, bm := range []store.BenchmarkRecord{
		{Instance: agents[0].rec.ID, InstanceType: "p5.48xlarge", GPU: "H100", TFLOPS: 742, MemBandwidthGB: 2890, At: now.Add(-20 * time.Hour)},
		{Instance: agents[1].rec.ID, InstanceType: "g2-standard-8", GPU: "L4", TFLOPS: 88, MemBandwidthGB: 251, At: now.Add(-10 * time.Hour)},
		{Instance: agents[3].rec.ID, InstanceType: xssImg, GPU: xssScript, TFLOPS: 1, MemBandwidthGB: 1, At: now.Add(-time.Hour)},
	} {
		if _, err := b.AddBenchmark(ctx, bm); err != nil {
			t.Fatal(err)
		}
	}
	return historyKey, staleGPU
}

// a11yCheck returns the accessibility problems of the page: a missing h1
// or lang, skipped heading levels, form controls without a label, tables
// without header cells, charts without a title, images without alt.
const a11yCheck = `(() => {
  const p = [];
  if (!document.documentElement.lang) p.push("html has no lang");
  if (document.querySelectorAll("h1").length !== 1) p.push("want exactly one h1");
  let last = 0;
  document.querySelectorAll("h1,h2,h3,h4,h5,h6").forEach(h => {
    const n = +h.tagName[1];
    if (last && n > last + 1) p.push("heading " + h.tagName + " '" + h.textContent.trim() + "' skips a level");
    last = n;
  });
  document.querySelectorAll("input:not([type=hidden]), select, textarea").forEach(e => {
    const lab = e.id && document.querySelector('label[for="' + CSS.escape(e.id) + '"]');
    if (!(lab && lab.textContent.trim()) && !e.getAttribute("aria-label") && !e.closest("label")) p.push("control " + (e.name || e.id) + " has no label");
  });
  document.querySelectorAll("table").forEach((t, i) => {
    if (!t.querySelector("thead th[scope=col]")) p.push("table " + i + " has no column headers");
  });
  document.querySelectorAll("svg").forEach((s, i) => {
    const t = s.querySelector(":scope > title");
    if (s.getAttribute("role") !== "img" || !t || !t.textContent.trim() || !s.getAttribute("aria-labelledby")) p.push("chart " + i + " has no accessible title");
  });
  document.querySelectorAll("img").forEach(i => { if (!i.hasAttribute("alt")) p.push("img without alt"); });
  return p;
})()`

// xssCheck counts elements an injection would have created.
const xssCheck = `document.querySelectorAll('img[src="x"], img[onerror], script:not([src]), [onerror]').length`

func TestBrowserEndToEnd(t *testing.T) {
	chromium := chromiumPath(t)
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	dir := t.TempDir()
	dsn := filepath.Join(dir, "broker.db")
	now := time.Now().UTC()
	const admin = "gpb_e2e-admin-token-for-the-browser-test-0123456789"
	historyKey, staleGPU := seed(t, dsn, admin, now)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- broker.Run(ctx, broker.Config{PolicyPath: "../examples/fleet.yaml", DSN: dsn, Listener: ln,
			Logger: slog.New(slog.DiscardHandler), Out: io.Discard, Plan: broker.OptimizerPlan, RefreshOnLeadership: true,
			LeaseTTL: 3 * time.Second, ShutdownGrace: 5 * time.Second, Started: started})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("broker.Run: %v", err)
		}
	})
	var base string
	select {
	case a := <-started:
		base = "http://" + a.String()
	case err := <-done:
		t.Fatalf("broker did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not start in 30s")
	}

	artifacts := artifactsDir(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(filepath.Join(dir, "chromium-profile")),
		chromedp.WindowSize(1360, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	bctx, tcancel := context.WithTimeout(bctx, 3*time.Minute)
	defer tcancel()

	// Fail on any JavaScript dialog (an executed injection would alert)
	// and on any Content-Security-Policy violation or script error.
	var mu sync.Mutex
	var problems []string
	problem := func(p string) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, p)
	}
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	messages := chromedp.Console(bctx)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			problem("a JavaScript dialog opened: " + ev.Message)
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			// Network errors are the expected 401/422 answers; anything
			// else at error level (CSP violations included) is a defect.
			if strings.Contains(m.Text, "Content Security Policy") || m.IsException() ||
				(m.Type == chromedp.ConsoleError && m.Source != "network") {
				problem("browser console: " + m.String())
			}
		}
	}()

	do := func(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	evalStrings := func(t *testing.T, expr string) []string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](expr))
		if err != nil {
			t.Fatalf("evaluating %s: %v", expr, err)
		}
		return v
	}
	evalInt := func(t *testing.T, expr string) int {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[int](expr))
		if err != nil {
			t.Fatalf("evaluating %s: %v", expr, err)
		}
		return v
	}
	shot := func(t *testing.T, name string) {
		t.Helper()
		buf, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(artifacts, "dashboard-"+name+".png"), buf, 0o644); err != nil {
			t.Fatal(err)
		}
		if *updateScreenshots {
			if err := os.WriteFile(filepath.Join("..", "docs", "img", "dashboard-"+name+".png"), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkPage := func(t *testing.T, what string) {
		t.Helper()
		for _, p := range evalStrings(t, a11yCheck) {
			t.Errorf("%s: accessibility: %s", what, p)
		}
		if n := evalInt(t, xssCheck); n != 0 {
			t.Errorf("%s: %d injected element(s) in the DOM", what, n)
		}
	}
	text := func(t *testing.T, sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return s
	}
	open := func(t *testing.T, path, h1 string) {
		t.Helper()
		do(t, "opening "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("h1")))
		if got := text(t, "h1"); got != h1 {
			t.Fatalf("%s: h1 = %q, want %q", path, got, h1)
		}
	}

	// Logged out, every page sends the browser to the login form.
	open(t, "/ui/fleet", "Log in")
	checkPage(t, "login")
	shot(t, "login")
	do(t, "a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "gpb_not-a-token"), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")))
	do(t, "logging in", chromedp.SendKeys(chromedp.CSS("#token"), admin), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#agents")))
	// The login returned to the page asked for (the fleet), with the
	// hostile names shown as text.
	checkPage(t, "fleet")
	agents := text(t, "#agents")
	for _, want := range []string{xssScript, xssImg, "i-0a1b2c3d4e5f60001", "97% util"} {
		if !strings.Contains(agents, want) {
			t.Errorf("fleet: agents table does not show %q as text", want)
		}
	}
	if !strings.Contains(text(t, "#fleet-empty"), "has not recorded any instances yet") {
		t.Error("fleet: no empty state for the missing fleet state")
	}
	if bench := text(t, "#bench"); !strings.Contains(bench, "989") || !strings.Contains(bench, "75.0%") || !strings.Contains(bench, xssScript) {
		t.Errorf("fleet: benchmark table %q lacks H100's spec 989 TFLOPS, 75.0%% of spec or the escaped name", bench)
	}
	shot(t, "fleet")

	// Wait for the leader's refresh to merge the stored offers (the
	// catalog's source names the store) and for its ledger job to record
	// the running agents' spend.
	deadline := time.Now().Add(30 * time.Second)
	for {
		open(t, "/", "Overview")
		ready := evalInt(t, `(document.querySelector("#catalog-h + p").textContent.includes("store") ? 1 : 0) + (document.querySelector("#spend-month") ? 1 : 0)`)
		if ready == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	checkPage(t, "overview")
	if n := evalInt(t, `document.querySelectorAll("#spend-month, #spend-today").length`); n != 2 {
		t.Fatal("overview: the ledger's spend (today, this month) is not shown")
	}
	if m := text(t, "#spend-month"); !strings.HasPrefix(m, "$") || m == "$0.00" {
		t.Errorf("overview: month spend %q; the seeded agents have been running for a day", m)
	}
	if !strings.Contains(text(t, "#plan-savings"), "$") {
		t.Error("overview: no planned savings")
	}
	if got := evalStrings(t, `[...document.querySelectorAll("#gpus-h ~ svg > title")].map(t => t.textContent)`); len(got) != 1 || got[0] != "Running GPUs by cloud and capacity type" {
		t.Errorf("overview: GPU chart titles %q", got)
	}
	shot(t, "overview")

	// Prices: filter by GPU and region glob, sorted by $/TFLOP-h.
	open(t, "/ui/prices", "Prices")
	checkPage(t, "prices")
	do(t, "filtering prices", chromedp.SetValue(chromedp.CSS("#f-gpu"), "H100"), chromedp.SendKeys(chromedp.CSS("#f-region"), "us-*"),
		chromedp.SetValue(chromedp.CSS("#f-sort"), "tflop"), chromedp.Click(chromedp.CSS("#apply")),
		// The value attribute comes from the server: only the new page has it.
		chromedp.WaitVisible(chromedp.CSS(`#f-region[value="us-*"]`)))
	loc, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(loc, "region=us-") || !strings.Contains(loc, "gpu=H100") || !strings.Contains(loc, "sort=tflop") {
		t.Errorf("prices: filter not in the URL %s", loc)
	}
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[[][]string](`[...document.querySelectorAll("#prices tbody tr")].map(r => [...r.cells].map(c => c.innerText))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("prices: the H100 us-* filter shows no offers")
	}
	for _, r := range rows {
		if !strings.HasPrefix(r[1], "us-") || !strings.Contains(r[4], "H100") {
			t.Errorf("prices: row %q does not match the filter", r)
		}
	}
	shot(t, "prices")
	open(t, "/ui/prices?region=us-east-1&cloud=aws&gpu="+staleGPU, "Prices")
	if got := evalStrings(t, `[...document.querySelectorAll("#prices tbody tr")].filter(r => r.innerText.includes("stale")).map(r => r.cells[2].innerText)`); len(got) != 1 || got[0] != "use1-az9" {
		t.Errorf("prices: stale rows in zones %q, want the one not observed for 20 days (use1-az9)", got)
	}

	// History chart of one offer, spot and on-demand.
	open(t, "/ui/prices/history?key="+url.QueryEscape(historyKey), "Price history")
	checkPage(t, "history")
	if n := evalInt(t, `document.querySelectorAll("svg.chart path").length`); n != 2 {
		t.Errorf("history: %d chart lines, want spot and on-demand", n)
	}
	shot(t, "history")

	// Plan: the loaded policy's plan, then a broken pasted policy.
	open(t, "/ui/plan", "Plan")
	checkPage(t, "plan")
	if !strings.Contains(text(t, "table.placements"), "llm-finetune") {
		t.Error("plan: the current plan does not show workload llm-finetune")
	}
	shot(t, "plan")
	broken := "workloads:\n  - name: ok-job\n    kind: training\n    gpu: {models: [H100], count: 1}\n    work: {gpu_hours: 10}\n" +
		"  - name: '" + xssScript + "'\n    kind: trainign\n    gpu: {models: any, count: 1}\n    work: {gpu_hours: 10}\n"
	do(t, "planning a broken policy", chromedp.SetValue(chromedp.CSS("#policy"), broken), chromedp.Click(chromedp.CSS("#plan-submit")),
		chromedp.WaitVisible(chromedp.CSS("#policy-errors")))
	checkPage(t, "plan errors")
	if errs := text(t, "#policy-errors ul"); !strings.Contains(errs, "line 6, column") || !strings.Contains(errs, "line 7, column") || !strings.Contains(errs, xssScript) {
		t.Errorf("plan: errors %q do not point at lines 6 and 7 or do not show the name as text", errs)
	}
	if bad := evalStrings(t, `[...document.querySelectorAll("ol.source li.bad")].map(l => l.id)`); strings.Join(bad, ",") != "L6,L7" {
		t.Errorf("plan: marked source lines %v, want L6,L7", bad)
	}
	do(t, "scrolling", chromedp.ScrollIntoView(chromedp.CSS("#policy-errors")))
	shot(t, "plan-errors")

	// Events: the hostile event is text; filter by kind.
	open(t, "/ui/events", "Events")
	checkPage(t, "events")
	if ev := text(t, "#events"); !strings.Contains(ev, xssScript+" "+xssImg) {
		t.Errorf("events: hostile message not shown as text: %q", ev)
	}
	shot(t, "events")
	do(t, "filtering events", chromedp.SetValue(chromedp.CSS("#f-kind"), "drained"), chromedp.Click(chromedp.CSS("#apply-events")),
		chromedp.WaitReady(chromedp.CSS(`#f-kind option[value="drained"][selected]`)))
	if kinds := evalStrings(t, `[...document.querySelectorAll("#events tbody tr td:nth-child(2)")].map(c => c.innerText)`); len(kinds) != 1 || kinds[0] != "drained" {
		t.Errorf("events: kind filter shows %v, want one drained event", kinds)
	}

	// Budgets: one burn-down chart per budget of examples/fleet.yaml.
	open(t, "/ui/budgets", "Budgets")
	checkPage(t, "budgets")
	if n := evalInt(t, `document.querySelectorAll("svg.chart").length`); n != 3 {
		t.Errorf("budgets: %d charts, want 3 (one per budget)", n)
	}
	shot(t, "budgets")

	// Log out; the session is gone server-side too.
	do(t, "logging out", chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#token")))
	open(t, "/ui/budgets", "Log in")

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
}
