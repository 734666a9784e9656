package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// envCrashChild makes the test binary run a broker instead of the tests:
// the crash test starts it as a subprocess and kills it with SIGKILL.
const envCrashChild = "GPUBROKER_CRASH_CHILD_DSN"

func TestMain(m *testing.M) {
	if dsn := os.Getenv(envCrashChild); dsn != "" {
		err := Run(context.Background(), Config{DSN: dsn, Listen: "127.0.0.1:0", Out: os.Stdout, NoRefresh: true,
			LeaseTTL: 2 * time.Second})
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	os.Exit(m.Run())
}

type child struct {
	cmd *exec.Cmd
	url string
	out []string
}

func startChild(t *testing.T, dsn string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envCrashChild+"="+dsn)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go scanAddr(stdout, lines)
	c := &child{cmd: cmd}
	deadline := time.After(30 * time.Second)
	for c.url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("child exited before listening; output %q", c.out)
			}
			c.out = append(c.out, l)
			if _, rest, ok := strings.Cut(l, "listening on "); ok {
				c.url, _, _ = strings.Cut(rest, " ")
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatal("child did not start")
		}
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return c
}

func (c *child) kill(t *testing.T) {
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
}

func post(client *http.Client, url, token string, body any) (int, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", url, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestCrashSafety writes through the API from many clients, kills the
// broker with SIGKILL in the middle, restarts it on the same database and
// checks that the store is consistent and holds every acknowledged write.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker subprocesses")
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			dsn := be.dsn(t)
			c := startChild(t, dsn)
			tok := tokenRE.FindString(strings.Join(c.out, "\n"))
			if tok == "" {
				t.Fatalf("no admin token in %q", c.out)
			}
			client := &http.Client{Timeout: 5 * time.Second}
			const writers = 8
			agentTok := make([]string, writers)
			for i := range writers {
				req, _ := http.NewRequest("POST", c.url+"/api/v1/agents/register", strings.NewReader(fmt.Sprintf(
					`{"instance_id":"i-%d","cloud":"aws","region":"us-east-1","instance_type":"g5.xlarge"}`, i)))
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != 201 {
					t.Fatalf("register: %v %v", resp, err)
				}
				var r struct{ Token string }
				_ = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				agentTok[i] = r.Token
			}

			var mu sync.Mutex
			ackedWorkloads := map[string]bool{}
			ackedBeat := make([]int, writers)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i := range writers {
				wg.Add(2)
				go func() { // workloads: each acknowledged create must survive
					defer wg.Done()
					for k := 0; ; k++ {
						select {
						case <-stop:
							return
						default:
						}
						name := fmt.Sprintf("w-%d-%d", i, k)
						code, err := post(client, c.url+"/api/v1/workloads", tok, map[string]any{"name": name, "kind": "batch",
							"spec": map[string]any{"seq": k}})
						if err != nil {
							return // the broker died mid-request: not acknowledged
						}
						if code == 201 {
							mu.Lock()
							ackedWorkloads[name] = true
							mu.Unlock()
						}
					}
				}()
				go func() { // heartbeats: the stored load1 must be at least the last acknowledged
					defer wg.Done()
					for k := 1; ; k++ {
						select {
						case <-stop:
							return
						default:
						}
						code, err := post(client, fmt.Sprintf("%s/api/v1/agents/i-%d/heartbeat", c.url, i), agentTok[i], map[string]any{"load1": k})
						if err != nil {
							return
						}
						if code == 200 {
							mu.Lock()
							ackedBeat[i] = k
							mu.Unlock()
						}
					}
				}()
			}
			time.Sleep(1500 * time.Millisecond)
			c.kill(t)
			close(stop)
			wg.Wait()
			t.Logf("acknowledged before SIGKILL: %d workloads, heartbeats %v", len(ackedWorkloads), ackedBeat)
			if len(ackedWorkloads) == 0 {
				t.Fatal("no write was acknowledged before the kill; the test proves nothing")
			}

			b := openBroker(t, dsn)
			if err := b.CheckIntegrity(context.Background()); err != nil {
				t.Fatal(err)
			}
			c2 := startChild(t, dsn)
			if tokenRE.MatchString(strings.Join(c2.out, "\n")) {
				t.Fatal("a restart printed a new admin token")
			}
			req, _ := http.NewRequest("GET", c2.url+"/api/v1/workloads", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("listing after restart: %v %v", resp, err)
			}
			var list struct {
				Items []struct {
					Name string
					Spec map[string]any
				}
			}
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			have := map[string]bool{}
			for _, w := range list.Items {
				have[w.Name] = true
				if w.Spec == nil {
					t.Errorf("workload %s lost its spec", w.Name)
				}
			}
			for n := range ackedWorkloads {
				if !have[n] {
					t.Errorf("acknowledged workload %s is missing after the crash", n)
				}
			}
			for i := range writers {
				inst, err := b.GetInstance(context.Background(), fmt.Sprintf("i-%d", i))
				if err != nil {
					t.Fatal(err)
				}
				if int(inst.Load1) < ackedBeat[i] {
					t.Errorf("agent %d: stored heartbeat %v is older than the acknowledged %d", i, inst.Load1, ackedBeat[i])
				}
			}
			c2.kill(t)
		})
	}
}

func leaderGauge(client *http.Client, url string) string {
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		return "down"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "gpubroker_leader "); ok {
			return v
		}
	}
	return "?"
}

// TestFailoverProcesses runs two real broker processes on one database,
// kills the leader with SIGKILL, and checks the survivor leads within the
// lease time (2 s in the child).
func TestFailoverProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts broker subprocesses")
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			dsn := be.dsn(t)
			client := &http.Client{Timeout: 2 * time.Second}
			a := startChild(t, dsn)
			waitFor(t, 10*time.Second, "the first process leading", func() bool { return leaderGauge(client, a.url) == "1" })
			b := startChild(t, dsn)
			time.Sleep(1500 * time.Millisecond)
			if g := leaderGauge(client, b.url); g != "0" {
				t.Fatalf("second process leader gauge %q while the first leads", g)
			}
			a.kill(t)
			took := waitFor(t, 10*time.Second, "the second process taking over", func() bool { return leaderGauge(client, b.url) == "1" })
			t.Logf("takeover %s after SIGKILL of the leader (lease 2s)", took)
			if took > 2*time.Second+700*time.Millisecond+time.Second {
				t.Errorf("takeover took %s; want within the lease (2s) plus one renew interval", took)
			}
			b.kill(t)
		})
	}
}
