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

// emptyTokenSum is what sha256sum prints for an empty token file.
const emptyTokenSum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// TestSecurityServeRefusesEmptyTokenHash: serve does not start with an
// auth file holding the hash of the empty token, naming the entry; and
// a SIGHUP that brings one in keeps the previous file, so an empty
// bearer token never deletes anything.
func TestSecurityServeRefusesEmptyTokenHash(t *testing.T) {
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.yaml")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(authFile, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const emptyEntry = `tokens: [{name: deploy, sha256: "` + emptyTokenSum + `", scopes: [admin]}]`
	write(emptyEntry)
	_, errOut, code := runCodeWithin(t, 10*time.Second, "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--auth-file", authFile)
	want := "peakline: --auth-file: auth file " + authFile + ": tokens[0] (deploy): sha256: is the hash of an empty token (the token file was empty?); give the hash of the real token\n"
	if code == 0 || !strings.HasSuffix(errOut, want) {
		t.Fatalf("serve with the empty token's hash: exit %d, %q, want %q", code, errOut, want)
	}

	write(`tokens: [{name: ops, token: "admin-token-0123456789", scopes: [admin]}]`)
	url, srv := startServe(t, "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--auth-file", authFile, "--auth-file-poll", "1h")
	del := func(authorization string) int {
		t.Helper()
		req, _ := http.NewRequest("DELETE", url+"/api/v1/jobs/x", nil)
		req.Header.Set("Authorization", authorization)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	write(emptyEntry)
	if err := srv.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reload runs on serve's own goroutine: wait for its log line.
	wantLog := `msg="auth file not reloaded, keeping the previous one" path=` + authFile + ` err="auth file ` + authFile + `: tokens[0] (deploy): sha256: is the hash of an empty token`
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.logs(), wantLog) {
		if time.Now().After(deadline) {
			t.Fatalf("no refused reload logged after SIGHUP:\n%s", srv.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The job does not exist: 404 is what an admin gets, 401 anyone else.
	if a, b, c := del("Bearer"), del("Bearer "), del("Bearer admin-token-0123456789"); a != 401 || b != 401 || c != 404 {
		t.Fatalf("after the refused reload: DELETE with an empty bearer %d and %d, with the admin token %d; want 401, 401, 404", a, b, c)
	}
}
