// Package remotetest starts real Prometheus-compatible engines
// (VictoriaMetrics single-node, Prometheus, and others built into ./bin)
// for the tests of the remote backend and of stateless serve: each on a
// free loopback port with its own temporary directory, stopped when the
// test ends. It is imported by tests only.
package remotetest

import (
	"bytes"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Bin returns the absolute path of an engine binary built by make tools.
// Without it the test is skipped, unless CI is set, where it fails.
func Bin(t testing.TB, path string) string {
	t.Helper()
	p, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s not built (make tools): %v", p, err)
		}
		t.Fatalf("%s not built (make tools): %v", p, err)
	}
	return p
}

// FreeAddr returns a loopback address nothing listens on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Start runs bin with args and waits until GET readyURL answers 200 (at
// most 30 s; the process's output is in the failure). The process gets
// SIGTERM when the test ends, and SIGKILL 20 s later.
func Start(t testing.TB, bin string, args []string, readyURL string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(readyURL)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready in 30s: %v\n%s", filepath.Base(bin), err, logs.String())
		}
	}
}

// Engine starts bin on a free loopback port with args, in which ADDR is
// replaced by its address and DIR by a new temporary directory, and
// returns its base URL once readyPath answers 200.
func Engine(t testing.TB, bin, readyPath string, args ...string) string {
	t.Helper()
	addr := FreeAddr(t)
	r := strings.NewReplacer("ADDR", addr, "DIR", t.TempDir())
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = r.Replace(a)
	}
	base := "http://" + addr
	Start(t, bin, out, base+readyPath)
	return base
}
