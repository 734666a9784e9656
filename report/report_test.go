package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/slack-go/slack"
)

var update = flag.Bool("update", false, "rewrite golden files")

var now = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

// seeded is a small fleet whose totals are computed by hand in the tests.
func seeded() Inputs {
	h := time.Hour
	return Inputs{
		Now: now, Period: Day, Policy: "fleet.yaml",
		Placements: []Placement{
			{Workload: "llm-finetune", Team: "research", Kind: "training", Where: "aws usw2-az3 p5e.48xlarge", Capacity: "spot",
				GPU: "H200", GPUs: 8, PricePerHour: 15.77, ExpectedHours: 78, DeadlineHours: 80, ExpectedCost: 1230, OnDemand: 3706,
				Pools: []string{"aws/usw2-az3/p5e.48xlarge"}},
			{Workload: "chat-serving", Team: "product", Kind: "inference", Where: "azure eastus2 Standard_NC4as_T4_v3", Capacity: "spot",
				GPU: "T4", GPUs: 1, PricePerHour: 0.25, ExpectedHours: 720, ExpectedCost: 182, OnDemand: 1136,
				Pools: []string{"azure/eastus2-1/Standard_NC4as_T4_v3"}},
		},
		PlanExpected: 1412, PlanOnDemand: 4842,
		Instances: []Instance{
			// Ran the whole 24h window: 24h × $10 = $240, on-demand 24h × $30 = $720.
			{ID: "i-train", Workload: "llm-finetune", Team: "research", Cloud: "aws", Zone: "usw2-az3", InstanceType: "p5e.48xlarge",
				Capacity: "spot", GPU: "H200", GPUs: 8, Start: now.Add(-30 * h), PricePerHour: 10, OnDemandPerHour: 30,
				LastHeartbeat: now.Add(-time.Minute), State: "running"},
			// Azure, ran 90.5 minutes inside the window: billed 91 minutes at
			// $0.60 = $0.91, on-demand $1.20/h → $1.82.
			{ID: "vm-chat-1", Workload: "chat-serving", Team: "product", Cloud: "azure", Zone: "eastus2-1",
				InstanceType: "Standard_NC4as_T4_v3", Capacity: "spot", GPU: "T4", GPUs: 1,
				Start: now.Add(-3 * h), End: now.Add(-3*h + 90*time.Minute + 30*time.Second), PricePerHour: 0.6, OnDemandPerHour: 1.2, State: "drained"},
			// Still running, silent for 10 minutes: 2h × $0.5 = $1, on-demand
			// price missing → no saving counted.
			{ID: "vm-chat-2", Workload: "chat-serving", Team: "product", Cloud: "azure", Zone: "eastus2-2",
				InstanceType: "Standard_NC4as_T4_v3", Capacity: "spot", GPU: "T4", GPUs: 1,
				Start: now.Add(-2 * h), PricePerHour: 0.5, LastHeartbeat: now.Add(-10 * time.Minute), State: "running"},
			// Outside the window: not counted.
			{ID: "old", Workload: "chat-serving", Cloud: "gcp", Start: now.Add(-72 * h), End: now.Add(-48 * h), PricePerHour: 5, State: "drained"},
			// No price known.
			{ID: "nopricer", Workload: "misc", Cloud: "gcp", Start: now.Add(-h), State: "running", LastHeartbeat: now},
		},
		Events: []Event{
			{At: now.Add(-2 * h), Kind: KindPreemption, Instance: "vm-chat-1", Workload: "chat-serving", Pool: "azure/eastus2-1/Standard_NC4as_T4_v3"},
			{At: now.Add(-90 * time.Minute), Kind: KindDrained, Instance: "vm-chat-1", Workload: "chat-serving"},
			{At: now.Add(-89 * time.Minute), Kind: KindReplaced, Instance: "vm-chat-2", Workload: "chat-serving"},
			{At: now.Add(-40 * time.Minute), Kind: KindPreemption, Instance: "i-train", Workload: "llm-finetune", Pool: "aws/usw2-az3/p5e.48xlarge"},
			{At: now.Add(-48 * h), Kind: KindPreemption, Instance: "old", Workload: "chat-serving", Pool: "gcp/x/y"},
		},
		Prices: []PricePoint{
			{Cloud: "aws", Zone: "usw2-az3", InstanceType: "p5e.48xlarge", GPU: "H200", At: now.Add(-30 * h), Spot: 10},
			{Cloud: "aws", Zone: "usw2-az3", InstanceType: "p5e.48xlarge", GPU: "H200", At: now.Add(-2 * h), Spot: 12.5},
			{Cloud: "azure", Zone: "eastus2-1", InstanceType: "Standard_NC4as_T4_v3", GPU: "T4", At: now.Add(-30 * h), Spot: 0.6},
			{Cloud: "azure", Zone: "eastus2-1", InstanceType: "Standard_NC4as_T4_v3", GPU: "T4", At: now.Add(-1 * h), Spot: 0.63},
			// Not used by the plan: ignored however much it moved.
			{Cloud: "gcp", Zone: "us-east4-a", InstanceType: "g2-standard-4", At: now.Add(-30 * h), Spot: 1},
			{Cloud: "gcp", Zone: "us-east4-a", InstanceType: "g2-standard-4", At: now.Add(-1 * h), Spot: 3},
		},
		Budgets: []Budget{{Name: "research", Team: "research", MonthlyUSD: 5000}, {Name: "everything", MonthlyUSD: 100000}},
		Catalog: CatalogInfo{Source: "store (refreshed)", ObservedAt: now.Add(-13 * h), Offers: 842,
			LastRefresh: now.Add(-13 * h), RefreshExpected: true},
		DashboardURL: "https://gpubroker.example.com",
	}
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 0.005 {
		t.Errorf("%s = %.4f, want %.4f", what, got, want)
	}
}

func TestBuildHandComputedTotals(t *testing.T) {
	r := Build(seeded())
	// 240 + 0.91 + 1 = 241.91; on-demand 720 + 1.82 + 1 = 722.82.
	near(t, "spend", r.Spend.Total, 241.91)
	near(t, "on-demand", r.Spend.OnDemand, 722.82)
	near(t, "savings", r.Spend.Savings, 480.91)
	near(t, "savings %", r.Spend.SavingsPercent, 66.5)
	if r.Spend.Unpriced != 1 {
		t.Errorf("unpriced = %d, want 1", r.Spend.Unpriced)
	}
	if got := r.Spend.ByCloud; len(got) != 2 || got[0].Name != "aws" || got[1].Name != "azure" {
		t.Errorf("by cloud = %+v", got)
	} else {
		near(t, "azure", got[1].Cost, 1.91)
	}
	if got := r.Spend.ByTeam; len(got) != 2 || got[0].Name != "research" {
		t.Errorf("by team = %+v", got)
	}
	a := r.Activity
	if a.Preemptions != 2 || a.Drains != 1 || a.Replacements != 1 {
		t.Errorf("activity = %+v, want 2 preemptions (the 48h-old one is outside), 1 drain, 1 replacement", a)
	}
	if len(r.PriceMoves) != 1 || r.PriceMoves[0].Pool != "aws/usw2-az3/p5e.48xlarge" || r.PriceMoves[0].ChangePct != 25 {
		t.Errorf("price moves = %+v, want only the H200 pool at +25%% (T4 moved 5%%, the gcp pool is unused)", r.PriceMoves)
	}
	// llm-finetune: expected 78h > 80h × 0.9 = 72h → at risk; elapsed 30h.
	if len(r.DeadlineRisk) != 1 || r.DeadlineRisk[0].Workload != "llm-finetune" || r.DeadlineRisk[0].ElapsedHours != 30 {
		t.Errorf("deadline risk = %+v", r.DeadlineRisk)
	}
	if strings.Join(r.SilentAgents, ",") != "vm-chat-2" {
		t.Errorf("silent = %v, want vm-chat-2", r.SilentAgents)
	}
	// Budget research: month to date from Nov 1; i-train ran 30h → $300.
	// Burn $10/h; hours left in November from Nov 20 09:00 = 10×24 + 15 = 255h.
	b := r.Budgets[0]
	near(t, "research spent", b.Spent, 300)
	near(t, "research burn", b.BurnPerHour, 10)
	near(t, "research forecast", b.Forecast, 300+10*255)
	near(t, "research forecast %", b.ForecastPct, 57)
	if r.Placements[0].Workload != "llm-finetune" {
		t.Errorf("placements not sorted by cost: %+v", r.Placements)
	}
}

func TestLedgerRowsWin(t *testing.T) {
	in := seeded()
	in.Spend = []SpendRow{{Day: now.Truncate(24 * time.Hour), Workload: "w", Team: "t", Cloud: "gcp", Cost: 12, OnDemand: 40}}
	r := Build(in)
	if r.Spend.Source != "ledger" || r.Spend.Total != 12 || r.Spend.Savings != 28 {
		t.Errorf("ledger spend = %+v", r.Spend)
	}
}

func TestEmptyReport(t *testing.T) {
	r := Build(Inputs{Now: now, Period: Week})
	var b bytes.Buffer
	if err := Text(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"weekly", "nothing ran", "no plan yet"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("empty report lacks %q:\n%s", want, b.String())
		}
	}
	if png, err := SpendChart(r); err != nil || png != nil {
		t.Errorf("chart of nothing = %d bytes, %v", len(png), err)
	}
	checkLimits(t, Blocks(r))
}

func TestParsePeriod(t *testing.T) {
	for _, s := range []string{"day", "Week", " month "} {
		if _, err := ParsePeriod(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := ParsePeriod("fortnight"); err == nil || !strings.Contains(err.Error(), "day, week or month") {
		t.Errorf("fortnight: %v", err)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden (run go test ./report -update and review the diff):\n%s", name, got)
	}
}

func blocksJSON(t *testing.T, m Message) []byte {
	t.Helper()
	return indentJSON(t, map[string]any{"text": m.Text, "blocks": m.Blocks})
}

// indentJSON encodes v as Slack sees it, without Go's HTML escaping, so the
// golden files read like the payload.
func indentJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestGoldenReports(t *testing.T) {
	for _, p := range []Period{Day, Week, Month} {
		in := seeded()
		in.Period = p
		r := Build(in)
		m := Blocks(r)
		checkLimits(t, m)
		golden(t, "report-"+string(p)+".blocks.json", blocksJSON(t, m))
		var txt bytes.Buffer
		if err := Text(&txt, r); err != nil {
			t.Fatal(err)
		}
		golden(t, "report-"+string(p)+".txt", txt.Bytes())
	}
}

func TestGoldenAlerts(t *testing.T) {
	in := seeded()
	in.Budgets = []Budget{{Name: "research", Team: "research", MonthlyUSD: 400}}
	for i := range 5 {
		in.Events = append(in.Events, Event{At: now.Add(-time.Duration(i) * time.Minute), Kind: KindPreemption,
			Pool: "gcp/us-central1-a/a2-highgpu-1g/spot"})
	}
	for i := range 3 {
		in.Events = append(in.Events, Event{At: now.Add(-time.Duration(10+i) * time.Minute), Kind: KindLaunchFailed, Workload: "llm-finetune"})
	}
	in.Catalog.LastRefreshError = "aws: spot price history us-east-1: RequestLimitExceeded"
	alerts := Evaluate(in)
	var kinds []string
	for _, a := range alerts {
		kinds = append(kinds, a.Key)
	}
	// nopricer heartbeated just now: not silent. research spent $300 of
	// $400 (the 50% level; 80% is $320) and is forecast far above 100%.
	want := "agent/vm-chat-2,budget-forecast/research/2026-11,budget/research/2026-11/50,deadline/llm-finetune,refresh/failed,replacement/llm-finetune,storm/gcp/us-central1-a/a2-highgpu-1g/spot"
	if got := strings.Join(kinds, ","); got != want {
		t.Errorf("alerts:\n got %s\nwant %s", got, want)
	}
	var all []map[string]any
	for _, a := range alerts {
		m := AlertMessage(a, in.DashboardURL)
		checkLimits(t, m)
		all = append(all, map[string]any{"key": a.Key, "text": m.Text, "blocks": m.Blocks})
	}
	golden(t, "alerts.blocks.json", indentJSON(t, all))
}

// checkLimits asserts Slack's Block Kit limits on a message.
func checkLimits(t *testing.T, m Message) {
	t.Helper()
	if len(m.Blocks) > MaxBlocks {
		t.Errorf("%d blocks > %d", len(m.Blocks), MaxBlocks)
	}
	for _, b := range m.Blocks {
		switch b := b.(type) {
		case *slack.SectionBlock:
			if b.Text != nil && utf8.RuneCountInString(b.Text.Text) > MaxSectionText {
				t.Errorf("section text %d chars", utf8.RuneCountInString(b.Text.Text))
			}
			if len(b.Fields) > MaxFields {
				t.Errorf("%d fields", len(b.Fields))
			}
			for _, f := range b.Fields {
				if utf8.RuneCountInString(f.Text) > MaxFieldText {
					t.Errorf("field %d chars", utf8.RuneCountInString(f.Text))
				}
			}
			if b.Text == nil && len(b.Fields) == 0 {
				t.Error("empty section")
			}
		case *slack.HeaderBlock:
			if utf8.RuneCountInString(b.Text.Text) > MaxHeaderText {
				t.Errorf("header %d chars", utf8.RuneCountInString(b.Text.Text))
			}
		case *slack.ContextBlock:
			if len(b.ContextElements.Elements) > MaxContextElems {
				t.Errorf("context %d elements", len(b.ContextElements.Elements))
			}
		}
	}
}

func TestLongListsAreCut(t *testing.T) {
	in := seeded()
	in.Placements = nil
	for i := range 400 {
		name := strings.Repeat("w", 60) + "-" + string(rune('a'+i%26)) + strings.Repeat("x", i%7)
		in.Placements = append(in.Placements, Placement{Workload: name, Kind: "batch", Where: "gcp us-central1-a n1", GPU: "T4", GPUs: 1, ExpectedCost: float64(i)})
		in.Instances = append(in.Instances, Instance{ID: name + string(rune(i)), Workload: name + string(rune('0'+i%10)) + strings.Repeat("y", i), Cloud: "gcp",
			Start: now.Add(-time.Hour), PricePerHour: 1, LastHeartbeat: now.Add(-time.Hour)})
	}
	m := Blocks(Build(in))
	checkLimits(t, m)
	js := string(blocksJSON(t, m))
	if !strings.Contains(js, "and 395 more") {
		t.Error("400 placements not cut to 5 with \"and 395 more\"")
	}
	if !strings.Contains(js, "more_") {
		t.Error("no list cut")
	}
}

func TestHostileNamesEscaped(t *testing.T) {
	in := seeded()
	in.Placements[0].Workload = "<!channel> <https://evil|click> & co"
	m := Blocks(Build(in))
	js := string(blocksJSON(t, m))
	if strings.Contains(js, "<!channel>") || strings.Contains(js, "<https://evil") {
		t.Errorf("user text reached Slack unescaped: %s", js)
	}
	if !strings.Contains(js, "&lt;!channel&gt; &lt;https://evil|click&gt; &amp; co") {
		t.Error("escaped name missing")
	}
}

func TestSpendChartPNG(t *testing.T) {
	in := seeded()
	in.Period = Week
	r := Build(in)
	b, err := SpendChart(r)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dx() != 800 || img.Bounds().Dy() != 360 {
		t.Errorf("chart %v", img.Bounds())
	}
	// The spend colour appears: bars were drawn.
	found := false
	for y := 0; y < 360 && !found; y++ {
		for x := 0; x < 800; x++ {
			if r, g, b, _ := img.At(x, y).RGBA(); r>>8 == 0x1f && g>>8 == 0x4e && b>>8 == 0x9c {
				found = true
				break
			}
		}
	}
	if !found {
		t.Error("no spend bar drawn")
	}
}

func TestPreviewHTMLEscapesHostileNames(t *testing.T) {
	in := seeded()
	in.Placements[0].Workload = `<script>alert(1)</script>"><img src=x onerror=alert(1)> <https://evil.example|x>`
	m := Blocks(Build(in))
	page := PreviewHTML(m)
	for _, bad := range []string{"<script>", "<img src=x", `href="https://evil.example"`} {
		if strings.Contains(page, bad) {
			t.Errorf("preview contains %q", bad)
		}
	}
	if !strings.Contains(page, `<a href="https://gpubroker.example.com/plan">plan</a>`) {
		t.Error("the report's own link is not an anchor")
	}
}
