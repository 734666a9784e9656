package broker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/broker/config"
	"github.com/gpubroker/gpubroker/store"
)

// slackHook is a local Slack incoming webhook that records what it gets.
type slackHook struct {
	mu   sync.Mutex
	msgs []string
}

func (h *slackHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var m struct{ Text string }
	if err := json.Unmarshal(b, &m); err != nil {
		w.WriteHeader(400)
		return
	}
	h.mu.Lock()
	h.msgs = append(h.msgs, string(b))
	h.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (h *slackHook) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.msgs...)
}

// TestScheduledReportsAndAlerts runs two replicas on one store with a
// report every second and the alert check every second: every report slot
// is sent exactly once (by whichever replica leads), each alert once however
// often it is evaluated, and the webhook URL never reaches the logs.
func TestScheduledReportsAndAlerts(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			dsn := be.dsn(t)
			hook := &slackHook{}
			srv := httptest.NewServer(hook)
			defer srv.Close()
			secretURL := srv.URL + "/services/T0/B0/TOPSECRETHOOK"
			t.Setenv("GPUBROKER_TEST_SLACK_HOOK", secretURL)

			// Seed the store: one silent instance of the policy's workload and
			// a drain event.
			b := openBroker(t, dsn)
			now := time.Now().UTC()
			inst := store.InstanceRecord{ID: "i-0abc", Cloud: "aws", Region: "us-east-1", Zone: "use1-az4",
				InstanceType: "g4dn.xlarge", GPU: "T4", GPUCount: 1, Capacity: "spot", Workload: "embeddings", State: store.StateRunning}
			if _, err := b.RegisterAgent(context.Background(), inst, "hash-of-agent-token-0001", now.Add(-3*time.Hour)); err != nil {
				t.Fatal(err)
			}
			if _, err := b.AddEvent(context.Background(), store.EventRecord{At: now.Add(-time.Hour), Kind: "drained", Instance: "i-0abc", Workload: "embeddings"}); err != nil {
				t.Fatal(err)
			}

			rc := config.ReportsConfig{Slack: config.SlackConfig{WebhookURLEnv: "GPUBROKER_TEST_SLACK_HOOK"},
				Schedules: []config.ReportSchedule{{Period: "day", Cron: "@every 1s"}},
				Alerts:    config.AlertsConfig{Enabled: true, Schedule: "@every 1s", SilentAgent: time.Minute}}
			cfg := Config{DSN: dsn, PolicyPath: "../examples/minimal.yaml", Plan: OptimizerPlan, NoRefresh: true,
				Reports: rc, LeaseTTL: 1500 * time.Millisecond}
			a := startDaemon(t, cfg)
			cfg2 := cfg
			r2 := startDaemon(t, cfg2)
			deadline := time.Now().Add(20 * time.Second)
			for time.Now().Before(deadline) && len(reportsIn(hook.all())) < 3 {
				time.Sleep(100 * time.Millisecond)
			}
			a.stop(t)
			r2.stop(t)

			msgs := hook.all()
			reports := reportsIn(msgs)
			if len(reports) < 3 {
				t.Fatalf("%d reports sent in 20s at @every 1s: %v", len(reports), msgs)
			}
			runs, err := openBroker(t, dsn).ListJobRuns(context.Background(), "report-day-0")
			if err != nil {
				t.Fatal(err)
			}
			ok := 0
			for _, r := range runs {
				if r.Error == "" && !r.FinishedAt.IsZero() {
					ok++
				}
			}
			if ok != len(reports) {
				t.Errorf("%d report slots ran successfully, %d reports sent: a slot was sent twice or lost", ok, len(reports))
			}
			if !strings.Contains(reports[0], "gpubroker daily report") || !strings.Contains(reports[0], "embeddings") {
				t.Errorf("report lacks its title or the policy's workload: %s", reports[0])
			}
			silent := 0
			for _, m := range msgs {
				if strings.Contains(m, "Agent on i-0abc is silent") {
					silent++
				}
			}
			if silent != 1 {
				t.Errorf("silent-agent alert sent %d times across replicas and runs, want once", silent)
			}
			for _, logs := range []string{a.logs.String(), r2.logs.String()} {
				if strings.Contains(logs, "TOPSECRETHOOK") {
					t.Fatal("webhook URL in the logs")
				}
			}
		})
	}
}

func reportsIn(msgs []string) []string {
	var out []string
	for _, m := range msgs {
		if strings.Contains(m, "daily report") {
			out = append(out, m)
		}
	}
	return out
}

func TestReportsMissingSecretIsAStartupError(t *testing.T) {
	cfg := Config{DSN: filepath.Join(t.TempDir(), "b.db"), NoRefresh: true,
		Reports: config.ReportsConfig{Slack: config.SlackConfig{WebhookURLEnv: "GPUBROKER_TEST_UNSET_HOOK"},
			Schedules: []config.ReportSchedule{{Period: "day", Cron: "0 9 * * *"}}}}
	err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "GPUBROKER_TEST_UNSET_HOOK is empty or unset") {
		t.Fatalf("Run = %v", err)
	}
}
