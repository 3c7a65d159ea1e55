package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		cmd := rootCommand(io.Discard, io.Discard)
		cmd.SetArgs(args)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a correct configuration would run until ctx ends: it ends at once
		err := cmd.ExecuteContext(ctx)
		var ce codedError
		if !errors.As(err, &ce) || ce.code != exitUsage || !strings.Contains(err.Error(), wantFlag) {
			t.Errorf("%v: %v, want exit code 2 naming %s", args[len(good):], err, wantFlag)
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

	// The same flags, right, run the agent until ctx ends.
	cmd := rootCommand(io.Discard, io.Discard)
	cmd.SetArgs(with("--scope", `podman:no-such-top:^libpod-([0-9a-f]{64})\.scope$`))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("a correct configuration: %v", err)
	}
}
