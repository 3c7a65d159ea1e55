package main

import (
	"bytes"
	"context"
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
	var stdout, stderr bytes.Buffer
	cmd := rootCommand(&stdout, &stderr)
	cmd.SetArgs([]string{"serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--auth-file", authFile})
	// A serve that started would run until ctx ends, then return nil.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	want := "--auth-file: auth file " + authFile + ": tokens[0] (deploy): sha256: is the hash of an empty token (the token file was empty?); give the hash of the real token"
	if err == nil || err.Error() != want {
		t.Fatalf("serve with the empty token's hash: %v, want %q", err, want)
	}

	write(`tokens: [{name: ops, token: "admin-token-0123456789", scopes: [admin]}]`)
	url, logs := startServe(t, "--data", filepath.Join(dir, "data"), "--auth-file", authFile, "--auth-file-poll", "1h")
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
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// The reload runs on serve's own goroutine: wait for its log line.
	wantLog := `msg="auth file not reloaded, keeping the previous one" path=` + authFile + ` err="auth file ` + authFile + `: tokens[0] (deploy): sha256: is the hash of an empty token`
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), wantLog) {
		if time.Now().After(deadline) {
			t.Fatalf("no refused reload logged after SIGHUP:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The job does not exist: 404 is what an admin gets, 401 anyone else.
	if a, b, c := del("Bearer"), del("Bearer "), del("Bearer admin-token-0123456789"); a != 401 || b != 401 || c != 404 {
		t.Fatalf("after the refused reload: DELETE with an empty bearer %d and %d, with the admin token %d; want 401, 401, 404", a, b, c)
	}
}
