package drain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultStepTimeout applies to steps configured without one.
const DefaultStepTimeout = 30 * time.Second

// Exec runs a shell command (sh -c) in its own process group. On timeout
// the whole group is killed with SIGKILL, so a hook's children die with it.
type Exec struct {
	Command string
	Limit   time.Duration
	// Output, when set, receives the command's stdout and stderr.
	Output io.Writer
}

// Name implements Step.
func (e *Exec) Name() string { return "exec " + e.Command }

// Timeout implements Step.
func (e *Exec) Timeout() time.Duration { return orDefault(e.Limit) }

// Run implements Step. The command sees GPUBROKER_NOTICE_ID, _KIND, _CLOUD,
// _DEADLINE (RFC 3339, empty when none) and GPUBROKER_DRAIN_EARLY (true/false).
func (e *Exec) Run(ctx context.Context, info Info) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", e.Command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// Negative PID: the whole process group the hook started.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// After the kill, don't wait on pipes a stray grandchild may hold.
	cmd.WaitDelay = time.Second
	cmd.Env = append(os.Environ(), infoEnv(info)...)
	cmd.Stdout, cmd.Stderr = e.Output, e.Output
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("killed: %w", ctx.Err())
		}
		return fmt.Errorf("command failed: %w", err)
	}
	return nil
}

func infoEnv(info Info) []string {
	dl := ""
	if !info.Deadline.IsZero() {
		dl = info.Deadline.UTC().Format(time.RFC3339)
	}
	return []string{
		"GPUBROKER_NOTICE_ID=" + info.NoticeID,
		"GPUBROKER_NOTICE_KIND=" + info.Kind,
		"GPUBROKER_NOTICE_CLOUD=" + info.Cloud,
		"GPUBROKER_NOTICE_DEADLINE=" + dl,
		"GPUBROKER_DRAIN_EARLY=" + strconv.FormatBool(info.Early),
	}
}

// Signal sends a signal to the process group of the PID in PIDFile and
// waits until the group has exited or the timeout passes. A workload that
// is already gone counts as drained. On timeout the workload is left
// running unless KillOnTimeout is set: the next steps (and the platform)
// decide its fate.
type Signal struct {
	Signal        syscall.Signal
	PIDFile       string
	Limit         time.Duration
	KillOnTimeout bool
	// Poll is how often to check whether the group has exited (default 50ms).
	Poll time.Duration
}

// Name implements Step.
func (s *Signal) Name() string {
	return fmt.Sprintf("signal %s %s", SignalName(s.Signal), s.PIDFile)
}

// Timeout implements Step.
func (s *Signal) Timeout() time.Duration { return orDefault(s.Limit) }

// ErrBadPIDFile is returned when the PID file does not hold a usable PID.
var ErrBadPIDFile = errors.New("bad PID file")

// Run implements Step.
func (s *Signal) Run(ctx context.Context, _ Info) error {
	b, err := os.ReadFile(s.PIDFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil // no workload running: nothing to drain
	}
	if err != nil {
		return fmt.Errorf("reading PID file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("%w %s: %q is not a process ID > 1", ErrBadPIDFile, s.PIDFile, strings.TrimSpace(string(b)))
	}
	// Signal the process's group; fall back to the process alone when it
	// is not a group leader's group we may signal.
	pgid, err := syscall.Getpgid(pid)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	if err != nil {
		return fmt.Errorf("finding process group of %d: %w", pid, err)
	}
	if err := syscall.Kill(-pgid, s.Signal); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return fmt.Errorf("signalling process group %d: %w", pgid, err)
	}
	poll := s.Poll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		select {
		case <-ctx.Done():
			if s.KillOnTimeout {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
			return fmt.Errorf("process group %d still running: %w", pgid, ctx.Err())
		case <-t.C:
		}
	}
}

// HTTP POSTs the notice as JSON to a local endpoint; any 2xx is success.
type HTTP struct {
	URL    string
	Limit  time.Duration
	Client *http.Client // default http.DefaultClient; the step's context bounds it
}

// Name implements Step.
func (h *HTTP) Name() string { return "http " + h.URL }

// Timeout implements Step.
func (h *HTTP) Timeout() time.Duration { return orDefault(h.Limit) }

// Run implements Step.
func (h *HTTP) Run(ctx context.Context, info Info) error {
	body, _ := json.Marshal(info)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST: status %d", resp.StatusCode)
	}
	return nil
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultStepTimeout
	}
	return d
}

var signals = map[string]syscall.Signal{
	"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT, "SIGHUP": syscall.SIGHUP,
	"SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGQUIT": syscall.SIGQUIT,
	"SIGKILL": syscall.SIGKILL, "SIGCONT": syscall.SIGCONT, "SIGSTOP": syscall.SIGSTOP,
}

// ParseSignal accepts "TERM", "SIGTERM" or a number.
func ParseSignal(s string) (syscall.Signal, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	if n, err := strconv.Atoi(u); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	if !strings.HasPrefix(u, "SIG") {
		u = "SIG" + u
	}
	if sig, ok := signals[u]; ok {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q (want e.g. SIGTERM, SIGINT, SIGUSR1 or a number)", s)
}

// SignalName returns "SIGTERM" for syscall.SIGTERM.
func SignalName(sig syscall.Signal) string {
	for n, s := range signals {
		if s == sig {
			return n
		}
	}
	return strconv.Itoa(int(sig))
}
