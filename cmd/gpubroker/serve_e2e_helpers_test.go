//go:build !agentonly

package main

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// startServe starts `gpubroker serve` with args as a child process (this
// test binary run as the CLI), its log in dir/serve.log, and returns it
// once it listens, with the admin token it printed on first start. The
// caller stops it (and may print serveLogTail when the test failed).
func startServe(t *testing.T, dir string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), envAsCLI+"=1", "TMPDIR="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logf.Close() })
	token := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if tok, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "gpb_"); ok {
			token = "gpb_" + tok
		}
		if strings.Contains(sc.Text(), "listening on") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	if token == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("serve printed no admin token; log:\n%s", serveLogTail(dir, 6000))
	}
	return cmd, token
}

// serveLogTail is the last n bytes of dir/serve.log.
func serveLogTail(dir string, n int) string {
	b, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
