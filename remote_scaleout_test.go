package main

import (
	"os"
	"testing"
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
		// as a write is acknowledged (nothing to flush), keep float64
		// values exactly, and have no series delete API.
		return &engine{name: name, writeURL: w, queryURL: q, flush: func(*testing.T) {}, noDelete: true}
	}}
}
