package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The remote tests run against VictoriaMetrics single-node and
// Prometheus from ./bin by default. make test-scaleout
// (scripts/scaleout-test.sh) starts an engine that is too heavy to build
// for every run (Grafana Mimir, Thanos receive + query) and points the
// same tests at it through these variables; then they run against it
// alone. The names are not PEAKLINE_REMOTE_*: every serve flag is read
// from PEAKLINE_<FLAG>, so those would reconfigure each serve the tests
// start.
const (
	envRemoteEngine   = "PEAKLINE_TEST_REMOTE_ENGINE"    // a name for the subtests: mimir, thanos
	envRemoteWriteURL = "PEAKLINE_TEST_REMOTE_WRITE_URL" // serve --remote-write-url
	envRemoteQueryURL = "PEAKLINE_TEST_REMOTE_QUERY_URL" // serve --remote-query-url
)

// remoteEngines returns the engines the remote tests run against.
func remoteEngines(t *testing.T) []func(*testing.T) *engine {
	t.Helper()
	w, q := os.Getenv(envRemoteWriteURL), os.Getenv(envRemoteQueryURL)
	if w == "" && q == "" {
		return []func(*testing.T) *engine{startVictoriaMetrics, startPrometheus}
	}
	if w == "" || q == "" {
		t.Fatalf("%s and %s: set both (the engine's remote write URL and the base of its Prometheus API) or neither", envRemoteWriteURL, envRemoteQueryURL)
	}
	name := os.Getenv(envRemoteEngine)
	if name == "" {
		name = "external"
	}
	return []func(*testing.T) *engine{func(*testing.T) *engine {
		// Mimir and Thanos answer from their ingesters/receivers as soon
		// as a write is acknowledged, keep float64 values exactly, and
		// have no series delete API. Thanos query, though, asks a store
		// only for the times the store last said it holds, which it
		// learns every few seconds: after a backfill it must look again.
		flush := func(*testing.T) {}
		if name == "thanos" {
			flush = func(t *testing.T) { thanosStoresChecked(t, q, time.Now()) }
		}
		return &engine{name: name, writeURL: w, queryURL: q, flush: flush, noDelete: true}
	}}
}

// thanosStoresChecked waits (up to a minute) until Thanos query at base
// has checked every store it knows since after.
func thanosStoresChecked(t *testing.T, base string, after time.Time) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var doc struct {
			Data map[string][]struct {
				Name      string    `json:"name"`
				LastCheck time.Time `json:"lastCheck"`
			} `json:"data"`
		}
		resp, err := http.Get(base + "/api/v1/stores")
		must(t, err)
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		must(t, err)
		fresh, n := true, 0
		for _, stores := range doc.Data {
			for _, s := range stores {
				n++
				fresh = fresh && s.LastCheck.After(after)
			}
		}
		if n > 0 && fresh {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thanos query at %s: its stores not checked again within a minute: %+v", base, doc.Data)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRemoteBackfill: a job that ran hours ago, imported after the engine
// already holds a sample of now, is stored whole and reads back as the
// embedded store reads it. On an engine built on the Prometheus TSDB
// (Prometheus, Mimir, Thanos receive) that takes its out-of-order window
// (README, Scaling out); without it the engine refuses the old samples
// and import fails with the engine's reason.
func TestRemoteBackfill(t *testing.T) {
	const tree = "../testdata/ansible/runner-basic"
	data := t.TempDir()
	if out, err := run(t, "import", "--data", data, "--job", "backfill", tree); err != nil {
		t.Fatalf("import --data: %v\n%s", err, out)
	}
	want := serve(t, "--data", data).rawSamples(t, "backfill")
	if want == 0 {
		t.Fatalf("the embedded store holds no sample of %s", tree)
	}
	for _, start := range remoteEngines(t) {
		e := start(t)
		t.Run(e.name, func(t *testing.T) {
			a := replica(t, e, filepath.Join(t.TempDir(), "settings.json"))
			live := fmt.Sprintf(`{"job_id":"live-%s","series":[{"resource":"cpu","counter":1,"uuid":"u1","task":"t","t":[%d],"v":[1]}]}`,
				e.name, time.Now().Add(-time.Second).UnixMilli())
			req, _ := http.NewRequest(http.MethodPost, a.URL+"/api/v1/ingest", strings.NewReader(live))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Requested-With", "peakline")
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("ingest of a sample of now: %d %s", resp.StatusCode, msg)
			}
			e.flush(t)
			job := "backfill-" + e.name
			if out, err := run(t, "import", "--server", a.URL, "--job", job, tree); err != nil {
				t.Fatalf("import of a job hours older than the engine's newest sample: %v (is the engine's out-of-order window set? README, Scaling out)\n%s", err, out)
			}
			e.flush(t)
			if got := a.rawSamples(t, job); got != want {
				t.Fatalf("%s reads %d samples of the backfilled job, the embedded store %d", e.name, got, want)
			}
		})
	}
}
