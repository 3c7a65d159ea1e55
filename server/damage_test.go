package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// damageJob is a one-task job of 40 samples per resource from startMs.
func damageJob(id string, startMs int64) *tsdb.Batch {
	b := &tsdb.Batch{JobID: id, Tasks: []tsdb.Task{{Counter: 3, UUID: id + "-task", Name: "work", StartMs: startMs}}}
	for _, r := range tsdb.Resources {
		sd := tsdb.SeriesData{Resource: r.Name, Counter: 3, UUID: id + "-task", Task: "work"}
		for k := int64(0); k < 40; k++ {
			sd.Ts = append(sd.Ts, startMs+k*1000)
			sd.Vs = append(sd.Vs, float64(k))
		}
		b.Series = append(b.Series, sd)
	}
	return b
}

// serveStore serves store until the test ends; reg is the registry the
// store was opened with, as serve wires it.
func serveStore(t *testing.T, store *tsdb.Store, reg *prometheus.Registry) *httptest.Server {
	t.Helper()
	srv, err := server.New(server.Config{}, store, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs
}

// blockOf returns the block dir whose time range holds ms.
func blockOf(t *testing.T, dir string, ms int64) string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var m struct{ MinTime, MaxTime int64 }
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if ms >= m.MinTime && ms < m.MaxTime {
			return filepath.Join(dir, e.Name())
		}
	}
	t.Fatalf("no block holds %d", ms)
	return ""
}

// TestDamagedJobDoesNotFailTheList: a chunk of job b damaged under a
// running server makes b's entry carry an error, while a is listed whole
// and the list answers 200. After a restart the damaged block is
// quarantined and /healthz answers degraded (still 200) naming it, and
// /metrics counts it.
func TestDamagedJobDoesNotFailTheList(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	store, err := tsdb.Open(dir, tsdb.Options{}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	startA := time.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	startB := time.Now().Add(-20 * 24 * time.Hour).UnixMilli()
	for _, b := range []*tsdb.Batch{damageJob("a", startA), damageJob("b", startB)} {
		if _, err := store.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
		if err := store.Compact(ctx); err != nil { // one block per job
			t.Fatal(err)
		}
	}
	blockB := blockOf(t, dir, startB)
	if blockB == blockOf(t, dir, startA) {
		t.Fatal("jobs a and b share a block")
	}
	hs := serveStore(t, store, reg)
	chunk := filepath.Join(blockB, "chunks", "000001")
	raw, err := os.ReadFile(chunk)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x40
	if err := os.WriteFile(chunk, raw, 0o644); err != nil {
		t.Fatal(err)
	}

	var list struct {
		Jobs []struct {
			JobID   string         `json:"job_id"`
			Samples map[string]int `json:"samples"`
			Error   string         `json:"error"`
		} `json:"jobs"`
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs", &list); code != 200 {
		t.Fatalf("GET /api/v1/jobs: %d, want 200", code)
	}
	if len(list.Jobs) != 2 {
		t.Fatalf("listed %+v, want a and b", list.Jobs)
	}
	for _, j := range list.Jobs {
		switch j.JobID {
		case "a":
			if j.Error != "" || j.Samples["cpu"] != 40 || j.Samples["memory"] != 40 || j.Samples["pids"] != 40 {
				t.Fatalf("job a: %+v, want 40 samples per resource and no error", j)
			}
		case "b":
			if !strings.Contains(j.Error, "checksum") || len(j.Samples) != 0 {
				t.Fatalf("job b: %+v, want a checksum error and no samples", j)
			}
		default:
			t.Fatalf("unexpected job %q", j.JobID)
		}
	}
	var health map[string]any
	if code := getJSON(t, hs.URL+"/healthz", &health); code != 200 || health["status"] != "ok" {
		t.Fatalf("/healthz before the restart: %d %v, want 200 ok", code, health)
	}
	hs.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	reg = prometheus.NewRegistry()
	store, err = tsdb.Open(dir, tsdb.Options{}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	hs = serveStore(t, store, reg)
	var degraded struct {
		Status      string `json:"status"`
		Quarantined []struct {
			ULID   string `json:"ulid"`
			Reason string `json:"reason"`
			MinMs  int64  `json:"min_time"`
		} `json:"quarantined"`
	}
	if code := getJSON(t, hs.URL+"/healthz", &degraded); code != 200 {
		t.Fatalf("/healthz: %d, want 200", code)
	}
	if degraded.Status != "degraded" || len(degraded.Quarantined) != 1 || degraded.Quarantined[0].ULID != filepath.Base(blockB) ||
		degraded.Quarantined[0].Reason != tsdb.ReasonChunks || degraded.Quarantined[0].MinMs > startB {
		t.Fatalf("/healthz: %+v, want degraded with block %s (%s)", degraded, filepath.Base(blockB), tsdb.ReasonChunks)
	}
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, metrics := resp.StatusCode, "\n"+string(body)
	if code != 200 || !strings.Contains(metrics, "\npeakline_quarantined_blocks 1\n") {
		t.Fatalf("/metrics (%d) lacks peakline_quarantined_blocks 1", code)
	}
}
