package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A mistake in the agent's flags ends it with exit code 2 and a message
// naming the flag, before it does anything.
func TestAgentFlagErrors(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(token, []byte("secret\n"), 0o600))
	good := []string{"agent", "--server", "http://127.0.0.1:1", "--awx-url", "http://127.0.0.1:2", "--awx-token-file", token,
		"--spool-dir", t.TempDir()}
	f := func(wantFlag string, args ...string) {
		t.Helper()
		_, errOut, code := runCodeWithin(t, 10*time.Second, args...)
		if code != 2 || !strings.Contains(errOut, wantFlag) {
			t.Errorf("%v: exit %d, stderr %q; want exit code 2 naming %s", args[len(good):], code, errOut, wantFlag)
		}
	}
	with := func(extra ...string) []string { return append(append([]string{}, good...), extra...) }
	f("--server", "agent", "--awx-url", "http://a", "--awx-token-file", token)
	f("--server", with("--server", "ftp://x")...)
	f("--awx-url", with("--awx-url", "awx.example.com")...)
	f("--awx-token-file", with("--awx-token-file", "")...)
	f("--awx-token-file", with("--awx-token-file", filepath.Join(t.TempDir(), "missing"))...)
	f("--poll-interval", with("--poll-interval", "5ms")...)
	f("--poll-interval", with("--poll-interval", "soon")...)
	f("--awx-poll-interval", with("--awx-poll-interval", "1ms")...)
	f("--awx-page-size", with("--awx-page-size", "500")...)
	f("--cgroup-root", with("--cgroup-root", filepath.Join(t.TempDir(), "none"))...)
	f("--proc-root", with("--proc-root", token)...)
	f("--scope", with("--scope", "docker:machine.slice:x")...)
	f("--scope", with("--scope", "podman:machine.slice")...)
	f("--bogus", with("--bogus")...)
	// Discovery rules the agent cannot use name their flag too.
	f("--scope", with("--scope", "podman:machine.slice:(")...)
	f("--scope", with("--scope", "podman:machine.slice:^libpod-[0-9a-f]+$")...) // no group for the id
	f("--scope", with("--scope", "podman:machine.slice/x:^libpod-(.*)$")...)
	f("--pod-name", with("--pod-name", "[")...)
	f("--pod-name", with("--pod-name", "^automation-job-")...)
	f("--conmon-name", with("--conmon-name", "(")...)
	f("--job-id-env", with("--job-id-env", "")...)
	f("--job-process", with("--job-process", "")...)
	f("--scope-depth", with("--scope-depth", "0")...)

	// The same flags, right, run the agent until SIGTERM: a refusal would
	// have ended it with 2 long before the second is up.
	cmd := exec.Command(peaklineBin(t), with("--scope", `podman:no-such-top:^libpod-([0-9a-f]{64})\.scope$`)...)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("a correct configuration ended by itself: %v; stderr:\n%s", err, errOut.String())
	case <-time.After(time.Second):
	}
	must(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a correct configuration, stopped by SIGTERM: %v; stderr:\n%s", err, errOut.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the agent did not stop within 10 s of SIGTERM; stderr:\n%s", errOut.String())
	}
}
