package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/api"
	"github.com/prometheus/common/config"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/server"
)

// TestSecurityPlainClientsWrite: PUT and DELETE from clients that send
// only Authorization are taken: plain net/http (as curl -X DELETE) and a
// client_golang API client whose round tripper adds the bearer token.
func TestSecurityPlainClientsWrite(t *testing.T) {
	env := newAuthEnv(t, server.SecurityConfig{})
	for i, id := range []string{"a", "b"} {
		job := workload.AnsibleJob(id, workload.JobSpec{Tasks: 2, SamplesPerResource: 10, StartMs: 1796009960000 + int64(i)*3600_000}, int64(i))
		if resp, body := do(t, "POST", env.hs.URL+"/api/v1/ingest", string(batchJSON(job)), map[string]string{"Content-Type": "application/json"}, bearer(ingestToken)); resp.StatusCode != 200 {
			t.Fatalf("ingest %s: %d %s", id, resp.StatusCode, body)
		}
	}
	f := func(method, path string, body io.Reader, want int, wantBody string) {
		t.Helper()
		req, _ := http.NewRequest(method, env.hs.URL+path, body)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want || string(b) != wantBody {
			t.Fatalf("%s %s: %d %q, want %d %q", method, path, resp.StatusCode, b, want, wantBody)
		}
	}
	f("PUT", "/api/v1/settings", strings.NewReader(`{"collection":"opt-in"}`), 200, `{"collection":"opt-in"}`+"\n")
	f("DELETE", "/api/v1/jobs/a", nil, 200, `{"job_id":"a","status":"deleted"}`+"\n")
	f("DELETE", "/api/v1/jobs/a", nil, 404, `{"error":"job not found: \"a\""}`+"\n")

	client, err := api.NewClient(api.Config{
		Address:      env.hs.URL,
		RoundTripper: config.NewAuthorizationCredentialsRoundTripper("Bearer", config.NewInlineSecret(adminToken), http.DefaultTransport),
	})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("DELETE", client.URL("/api/v1/jobs/:job", map[string]string{"job": "b"}).String(), nil)
	resp, body, err := client.Do(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(body) != `{"job_id":"b","status":"deleted"}`+"\n" {
		t.Fatalf("DELETE by the client_golang client: %d %q", resp.StatusCode, body)
	}
}
