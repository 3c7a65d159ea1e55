package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startServe runs `peakline serve args...` until the test ends; it
// returns the URL serve printed and the binary's running process.
func startServe(t *testing.T, args ...string) (string, *served) {
	t.Helper()
	s := serve(t, args...)
	return s.URL, s
}

// loopbackURL is u (whose host is every interface, "[::]" or "0.0.0.0")
// on 127.0.0.1.
func loopbackURL(t *testing.T, u string) string {
	t.Helper()
	i := strings.LastIndex(u, ":")
	if i < 0 {
		t.Fatalf("no port in %q", u)
	}
	return "http://127.0.0.1" + u[i:]
}

// TestSecurityServeRefusesOpenListen: a non-loopback --listen needs an
// auth file or the explicit opt-out; the opt-out starts with a warning.
func TestSecurityServeRefusesOpenListen(t *testing.T) {
	data := t.TempDir()
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		_, errOut, code := runCodeWithin(t, 10*time.Second, "serve", "--data", data, "--listen", listen)
		want := "peakline: --listen " + listen + ": refusing to serve without authentication on a non-loopback address: give --auth-file FILE (scoped tokens), or --insecure-no-auth to serve anyone who can connect\n"
		if code == 0 || !strings.HasSuffix(errOut, want) {
			t.Fatalf("serve --listen %s without auth: exit %d, %q, want %q", listen, code, errOut, want)
		}
	}

	url, srv := startServe(t, "--data", data, "--listen", "0.0.0.0:0", "--insecure-no-auth")
	if logs := srv.logs(); !strings.Contains(logs, `level=WARN msg="serving without authentication: anyone who can connect may read, write and delete (--insecure-no-auth)" listen=0.0.0.0:0`) {
		t.Fatalf("no warning in the log:\n%s", logs)
	}
	resp, err := http.Get(loopbackURL(t, url) + "/api/v1/jobs")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/v1/jobs without auth: %d", resp.StatusCode)
	}
}

// TestSecurityServeWithAuthFile: with --auth-file a non-loopback listen
// starts and requests need a token of the right scope.
func TestSecurityServeWithAuthFile(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(authFile, []byte(`tokens: [{name: grafana, token: "read-token-0123456789", scopes: [read]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	url, _ := startServe(t, "--data", filepath.Join(dir, "data"), "--listen", "0.0.0.0:0", "--auth-file", authFile)
	url = loopbackURL(t, url)
	f := func(method, path, token string, want int) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("X-Peakline-CSRF", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d, want %d", method, path, resp.StatusCode, want)
		}
	}
	f("GET", "/healthz", "", 200)
	f("GET", "/api/v1/jobs", "", 401)
	f("GET", "/api/v1/jobs", "read-token-0123456789", 200)
	f("DELETE", "/api/v1/jobs/x", "read-token-0123456789", 403)
}

// TestSecurityServeReloadsOnSIGHUP: a rewritten auth file takes effect on
// SIGHUP (the poll is set far off, so only the signal can reload it).
func TestSecurityServeReloadsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.yaml")
	write := func(tok string) {
		t.Helper()
		if err := os.WriteFile(authFile, []byte(`tokens: [{name: grafana, token: "`+tok+`", scopes: [read]}]`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first-token-0123456789")
	url, srv := startServe(t, "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--auth-file", authFile, "--auth-file-poll", "1h")
	get := func(tok string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", url+"/api/v1/jobs", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("first-token-0123456789"); code != 200 {
		t.Fatalf("first token: %d", code)
	}
	write("second-token-0123456789")
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reload runs on serve's own goroutine: wait for its log line.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.logs(), "auth file reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged after SIGHUP:\n%s", srv.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a, b := get("first-token-0123456789"), get("second-token-0123456789"); a != 401 || b != 200 {
		t.Fatalf("after SIGHUP: old token %d, new token %d; want 401 and 200", a, b)
	}
}
