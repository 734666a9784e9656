package drain_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent/drain"
)

var info = drain.Info{NoticeID: "aws/instance-action/terminate/x", Kind: "preempt", Cloud: "aws",
	Deadline: time.Date(2026, 4, 24, 17, 11, 44, 0, time.UTC)}

// workload starts a process-group leader that runs script and writes its PID
// file; it is killed at cleanup.
func workload(t *testing.T, script string) (pidFile string, cmd *exec.Cmd) {
	t.Helper()
	cmd = exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	pidFile = filepath.Join(t.TempDir(), "w.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the shell install its trap
	return pidFile, cmd
}

// alive reports whether pid runs and is not a zombie (an orphan killed in a
// container whose PID 1 does not reap stays a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func TestRunOrderTimeoutsAndSkips(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in drain.Info
		_ = json.NewDecoder(r.Body).Decode(&in)
		got = append(got, in.NoticeID)
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name     string
		steps    []drain.Step
		deadline time.Duration // from now; 0 = none
		want     []drain.Status
	}{
		{"all ok", []drain.Step{
			&drain.Exec{Command: "echo one >> " + log, Limit: time.Second},
			&drain.HTTP{URL: srv.URL + "/ok", Limit: time.Second},
		}, 0, []drain.Status{drain.StatusOK, drain.StatusOK}},
		{"hung hook is killed and the next step runs", []drain.Step{
			&drain.Exec{Command: "sleep 30", Limit: 200 * time.Millisecond},
			&drain.Exec{Command: "echo after >> " + log, Limit: time.Second},
		}, 0, []drain.Status{drain.StatusTimedOut, drain.StatusOK}},
		{"failures do not stop the drain", []drain.Step{
			&drain.Exec{Command: "exit 3", Limit: time.Second},
			&drain.HTTP{URL: srv.URL + "/fail", Limit: time.Second},
			&drain.HTTP{URL: "http://127.0.0.1:1/refused", Limit: time.Second},
			&drain.Exec{Command: "true", Limit: time.Second},
		}, 0, []drain.Status{drain.StatusFailed, drain.StatusFailed, drain.StatusFailed, drain.StatusOK}},
		{"overall deadline cuts a step and skips the rest", []drain.Step{
			&drain.Exec{Command: "sleep 30", Limit: time.Minute},
			&drain.Exec{Command: "true", Limit: time.Second},
		}, 300 * time.Millisecond, []drain.Status{drain.StatusTimedOut, drain.StatusSkipped}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dl time.Time
			if tc.deadline > 0 {
				dl = time.Now().Add(tc.deadline)
			}
			start := time.Now()
			res, err := (&drain.Runner{Steps: tc.steps}).Run(context.Background(), info, dl)
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("drain took %v", took)
			}
			if len(res.Steps) != len(tc.want) {
				t.Fatalf("%d results, want %d", len(res.Steps), len(tc.want))
			}
			for i, s := range res.Steps {
				if s.Status != tc.want[i] {
					t.Errorf("step %d (%s): %s (%s), want %s", i, s.Name, s.Status, s.Error, tc.want[i])
				}
			}
		})
	}
	if b, _ := os.ReadFile(log); string(b) != "one\nafter\n" {
		t.Errorf("hook log %q", b)
	}
	if len(got) != 2 || got[0] != info.NoticeID {
		t.Errorf("HTTP step bodies: %v", got)
	}
}

func TestExecKillsHookChildren(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	step := &drain.Exec{Command: "sleep 30 & echo $! > " + pidFile + "; wait", Limit: 300 * time.Millisecond}
	err := step.Run(contextWithTimeout(t, step.Timeout()), info)
	if err == nil {
		t.Fatal("want a timeout error")
	}
	b, rerr := os.ReadFile(pidFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	time.Sleep(50 * time.Millisecond)
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the hook's child %d survived the kill", pid)
	}
}

func contextWithTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestExecEnvironment(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	step := &drain.Exec{Command: `printf '%s|%s|%s|%s|%s' "$GPUBROKER_NOTICE_ID" "$GPUBROKER_NOTICE_KIND" "$GPUBROKER_NOTICE_CLOUD" "$GPUBROKER_NOTICE_DEADLINE" "$GPUBROKER_DRAIN_EARLY" > ` + out}
	if err := step.Run(context.Background(), info); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out)
	if want := info.NoticeID + "|preempt|aws|2026-04-24T17:11:44Z|false"; string(b) != want {
		t.Fatalf("env %q, want %q", b, want)
	}
}

func TestSignal(t *testing.T) {
	t.Run("workload exits on SIGTERM", func(t *testing.T) {
		pidFile, cmd := workload(t, `trap 'exit 0' TERM; while :; do sleep 0.02; done`)
		step := &drain.Signal{Signal: syscall.SIGTERM, PIDFile: pidFile, Limit: 3 * time.Second}
		if err := step.Run(contextWithTimeout(t, step.Timeout()), info); err != nil {
			t.Fatal(err)
		}
		if alive(cmd.Process.Pid) && syscall.Kill(-cmd.Process.Pid, 0) == nil {
			t.Fatal("group still alive after a successful signal step")
		}
	})
	t.Run("workload ignores SIGTERM: timeout, left running", func(t *testing.T) {
		pidFile, cmd := workload(t, `trap '' TERM; while :; do sleep 0.02; done`)
		step := &drain.Signal{Signal: syscall.SIGTERM, PIDFile: pidFile, Limit: 200 * time.Millisecond}
		if err := step.Run(contextWithTimeout(t, step.Timeout()), info); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
		if !alive(cmd.Process.Pid) {
			t.Fatal("workload killed without KillOnTimeout")
		}
	})
	t.Run("KillOnTimeout", func(t *testing.T) {
		pidFile, cmd := workload(t, `trap '' TERM; while :; do sleep 0.02; done`)
		step := &drain.Signal{Signal: syscall.SIGTERM, PIDFile: pidFile, Limit: 200 * time.Millisecond, KillOnTimeout: true}
		_ = step.Run(contextWithTimeout(t, step.Timeout()), info)
		time.Sleep(100 * time.Millisecond)
		var ws syscall.WaitStatus
		if p, _ := syscall.Wait4(cmd.Process.Pid, &ws, syscall.WNOHANG, nil); p == 0 && alive(cmd.Process.Pid) {
			t.Fatal("workload not killed")
		}
	})
	t.Run("missing PID file means nothing to drain", func(t *testing.T) {
		step := &drain.Signal{Signal: syscall.SIGTERM, PIDFile: filepath.Join(t.TempDir(), "none.pid")}
		if err := step.Run(context.Background(), info); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("garbage PID file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "bad.pid")
		_ = os.WriteFile(p, []byte("1"), 0o644)
		step := &drain.Signal{Signal: syscall.SIGTERM, PIDFile: p}
		if err := step.Run(context.Background(), info); !errors.Is(err, drain.ErrBadPIDFile) {
			t.Fatalf("err = %v, want ErrBadPIDFile (never signal init)", err)
		}
	})
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "sigint": syscall.SIGINT, "SIGUSR1": syscall.SIGUSR1, "15": syscall.SIGTERM} {
		if got, err := drain.ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "SIGFOO", "0", "99"} {
		if _, err := drain.ParseSignal(in); err == nil {
			t.Errorf("ParseSignal(%q): want an error", in)
		}
	}
}
