package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// serveRemote serves a stateless server over the engine at engineURL.
func serveRemote(t *testing.T, engineURL string) *httptest.Server {
	t.Helper()
	srv, err := server.Open(server.Setup{
		Remote: tsdb.Remote{WriteURL: engineURL + "/api/v1/write", QueryURL: engineURL},
		Config: server.Config{SettingsPath: filepath.Join(t.TempDir(), "settings.json")},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs
}

// The engine's answers reach the client as an SRE expects: a 4xx of the
// engine is a 400 naming the engine's reason, an engine that cannot be
// reached a 503 with Retry-After, on the Peakline API and on the
// Prometheus API alike.
func TestRemoteEngineErrors(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"status":"error","errorType":"422","error":"cannot select more than -search.maxSamplesPerQuery=10 samples"}`)
	}))
	defer refusing.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens at its address now

	f := func(engine, path string, wantCode int, wantRetryAfter, wantBody string) {
		t.Helper()
		hs := serveRemote(t, engine)
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != wantCode || resp.Header.Get("Retry-After") != wantRetryAfter {
			t.Fatalf("GET %s: %d Retry-After %q, want %d %q; body %s", path, resp.StatusCode, resp.Header.Get("Retry-After"), wantCode, wantRetryAfter, body)
		}
		if got := strings.ReplaceAll(strings.ReplaceAll(string(body), engine, "ENGINE"), strings.TrimPrefix(engine, "http://"), "HOST"); got != wantBody {
			t.Fatalf("GET %s: body\n%s\nwant\n%s", path, got, wantBody)
		}
	}
	refusal := `HTTP 422: 422: cannot select more than -search.maxSamplesPerQuery=10 samples`
	f(refusing.URL, "/api/v1/jobs/42/graph", http.StatusBadRequest, "",
		`{"error":"read job \"42\": export {job_id=\"42\"}: refused by the engine: export: HTTP 422: {\"status\":\"error\",\"errorType\":\"422\",\"error\":\"cannot select more than -search.maxSamplesPerQuery=10 samples\"}"}`+"\n")
	f(refusing.URL, "/prometheus/api/v1/labels", http.StatusBadRequest, "",
		`{"status":"error","errorType":"bad_data","error":"list label names: `+refusal+`"}`+"\n")
	f(down.URL, "/prometheus/api/v1/query?query=up", http.StatusServiceUnavailable, "5",
		`{"status":"error","errorType":"unavailable","error":"expanding series: engine unavailable: ENGINE/api/v1/export: Post \"ENGINE/api/v1/export\": dial tcp HOST: connect: connection refused"}`+"\n")
}
