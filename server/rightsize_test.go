package server_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/peakline/peakline/tsdb"
)

// rightsizeDoc is the right-sizing answer as a client decodes it.
type rightsizeDoc struct {
	TemplateID string `json:"template_id"`
	Runs       int    `json:"runs"`
	RunsUsed   int    `json:"runs_used"`
	Confidence string `json:"confidence"`
	Memory     struct {
		RequestBytes int64 `json:"request_bytes"`
		LimitBytes   int64 `json:"limit_bytes"`
		MaxBytes     int64 `json:"max_bytes"`
		DrivenBy     *struct {
			Task  string `json:"task"`
			JobID string `json:"job_id"`
		} `json:"driven_by"`
	} `json:"memory"`
	CPU struct {
		RequestMillicores int64  `json:"request_millicores"`
		LimitMillicores   *int64 `json:"limit_millicores"`
	} `json:"cpu"`
	Forks struct {
		PerForkBytes     *int64 `json:"per_fork_bytes"`
		BaseBytes        *int64 `json:"base_bytes"`
		MaxForksForLimit *int   `json:"max_forks_for_limit"`
		LimitBytes       int64  `json:"limit_bytes"`
		Fit              struct {
			Runs int      `json:"runs"`
			R2   *float64 `json:"r2"`
		} `json:"fit"`
	} `json:"forks"`
	OOM []struct {
		JobID      string `json:"job_id"`
		Task       string `json:"task"`
		Counter    int64  `json:"counter"`
		LimitBytes int64  `json:"limit_bytes"`
	} `json:"oom"`
	AtCap []struct {
		JobID string `json:"job_id"`
	} `json:"at_cap"`
	PodSpecOverride string   `json:"pod_spec_override"`
	Notes           []string `json:"notes"`
}

// sizedTemplateRun stores run i of template 7 with forks forks on 8 hosts:
// "allocate cache" (counter 10+i) climbs to 100 + 50 × forks MiB (or to
// peakMiB when > 0), "say hello" holds 20 MiB; info holds the rest.
func sizedTemplateRun(t *testing.T, store *tsdb.Store, id string, i, forks int, peakMiB float64, info tsdb.JobInfo) {
	t.Helper()
	start := int64(1_796_010_000_000 + i*600_000)
	info.TemplateID, info.Status, info.Forks, info.Hosts = "7", "successful", fmt.Sprint(forks), "8"
	if peakMiB == 0 {
		peakMiB = 100 + 50*float64(forks)
	}
	if info.OOMKills != "" {
		info.Status = "failed"
	}
	b := &tsdb.Batch{JobID: id, Info: info, LastEvent: &tsdb.Event{Counter: 30, TimeMs: start + 6000}}
	for k, name := range []string{"allocate cache", "say hello"} {
		counter, uuid := int64(10+10*k+i), fmt.Sprintf("u%d-%d", i, k)
		t0 := start + int64(k)*3000
		b.Tasks = append(b.Tasks, tsdb.Task{Counter: counter, UUID: uuid, Name: name, StartMs: t0, Play: "web", Path: fmt.Sprintf("/runner/project/site.yml:%d", 10+10*k)})
		mem := tsdb.SeriesData{Resource: "memory", Counter: counter, UUID: uuid, Task: name}
		for j := range 8 {
			v := 20.0
			if k == 0 {
				v = peakMiB * float64(j+1) / 8
			}
			mem.Ts, mem.Vs = append(mem.Ts, t0+250*int64(j+1)), append(mem.Vs, v*(1<<20))
		}
		b.Series = append(b.Series, mem)
	}
	if _, err := store.Append(t.Context(), b); err != nil {
		t.Fatal(err)
	}
}

func TestTemplateRightsize(t *testing.T) {
	hs, store := newTestServer(t)
	for i, forks := range []int{1, 2, 3, 4, 5} {
		sizedTemplateRun(t, store, fmt.Sprint(1001+i), i, forks, 0, tsdb.JobInfo{})
	}
	// Killed in "allocate cache" (counter 15) at a limit of 300 MiB.
	sizedTemplateRun(t, store, "1006", 5, 5, 300, tsdb.JobInfo{MemoryLimit: fmt.Sprint(300 << 20), OOMKills: "1", OOMCounter: "15"})
	var got rightsizeDoc
	if code := getJSON(t, hs.URL+"/api/v1/templates/7/rightsize", &got); code != 200 {
		t.Fatalf("rightsize: %d", code)
	}
	// Peaks on 100 + 50 × forks MiB: 50 MiB per fork over 100 MiB (the
	// killed run is left out of the fit). The peaks give 350 MiB × 1.15
	// = 402.5 MiB, more than the kill's bump max(300 + 100, 300 × 1.2) =
	// 400 MiB: 403 MiB.
	if got.Runs != 6 || got.RunsUsed != 6 || got.TemplateID != "7" {
		t.Errorf("runs %d used %d", got.Runs, got.RunsUsed)
	}
	if got.Forks.PerForkBytes == nil || *got.Forks.PerForkBytes != 50<<20 || *got.Forks.BaseBytes != 100<<20 || got.Forks.Fit.Runs != 5 || *got.Forks.Fit.R2 != 1 {
		t.Errorf("forks %+v", got.Forks)
	}
	if got.Memory.RequestBytes != 403<<20 || got.Memory.LimitBytes != 403<<20 || got.Memory.MaxBytes != 350<<20 {
		t.Errorf("memory %+v", got.Memory)
	}
	if len(got.OOM) != 1 || got.OOM[0].JobID != "1006" || got.OOM[0].Task != "allocate cache" || got.OOM[0].Counter != 15 || got.OOM[0].LimitBytes != 300<<20 {
		t.Errorf("oom %+v", got.OOM)
	}
	if got.Memory.RequestBytes <= got.OOM[0].LimitBytes {
		t.Errorf("memory %d not above the OOM limit %d", got.Memory.RequestBytes, got.OOM[0].LimitBytes)
	}
	if d := got.Memory.DrivenBy; d == nil || d.Task != "allocate cache" || d.JobID != "1005" {
		t.Errorf("driven by %+v", d)
	}
	if got.CPU.LimitMillicores != nil || got.CPU.RequestMillicores != 0 {
		t.Errorf("cpu %+v without CPU samples", got.CPU)
	}
	if !strings.Contains(got.PodSpecOverride, "memory: 403Mi") || got.Confidence != "medium" {
		t.Errorf("pod spec %q, confidence %s", got.PodSpecOverride, got.Confidence)
	}

	// The OOM bump wins when the kill was at a limit above the peaks.
	sizedTemplateRun(t, store, "1007", 6, 5, 600, tsdb.JobInfo{MemoryLimit: fmt.Sprint(600 << 20), OOMKills: "2", OOMCounter: "16"})
	if code := getJSON(t, hs.URL+"/api/v1/templates/7/rightsize?last=3&limit=1Gi", &got); code != 200 {
		t.Fatalf("rightsize: %d", code)
	}
	// max(600 + 100, 600 × 1.2) = 720 MiB; the last 3 runs are 1005..1007,
	// of which only 1005 fits: no fit, so no fork bound.
	if got.Runs != 3 || got.Memory.RequestBytes != 720<<20 || len(got.OOM) != 2 || got.Forks.LimitBytes != 1<<30 || got.Forks.PerForkBytes != nil {
		t.Errorf("last 3: runs %d memory %d oom %d forks %+v", got.Runs, got.Memory.RequestBytes, len(got.OOM), got.Forks)
	}

	var empty rightsizeDoc
	if code := getJSON(t, hs.URL+"/api/v1/templates/99/rightsize", &empty); code != 200 || empty.RunsUsed != 0 || empty.PodSpecOverride != "" || empty.Confidence != "low" {
		t.Errorf("no runs: %d %+v", code, empty)
	}
	bad := func(query string, wantCode int, wantMsg string) {
		t.Helper()
		var e struct{ Error string }
		if code := getJSON(t, hs.URL+query, &e); code != wantCode || !strings.Contains(e.Error, wantMsg) {
			t.Errorf("%s: %d %q, want %d %q", query, code, e.Error, wantCode, wantMsg)
		}
	}
	bad("/api/v1/templates/7/rightsize?last=0", 400, "last: must be a whole number of runs from 1 to 100")
	bad("/api/v1/templates/7/rightsize?limit=12x", 400, "limit: must be a memory size in bytes")
	bad("/api/v1/templates/7/rightsize?limit=0", 400, "limit: must be")
	bad("/api/v1/templates/7/rightsize?limit=2000Ti", 400, "limit: must be")
	bad("/api/v1/templates/"+strings.Repeat("7", 129)+"/rightsize", 400, "id: must be a job template id")
}

// A job info field that must be a number refuses anything else, naming
// the field, and stores nothing of the batch.
func TestJobInfoSizingRefused(t *testing.T) {
	_, store := newTestServer(t)
	for _, info := range []tsdb.JobInfo{{Forks: "five"}, {MemoryLimit: "-1"}, {OOMCounter: "1.5"}, {Hosts: strings.Repeat("9", 21)}} {
		_, err := store.Append(t.Context(), &tsdb.Batch{JobID: "x", Info: info})
		if err == nil {
			t.Errorf("%+v stored", info)
		}
	}
	if ids, _ := store.JobIDs(t.Context()); len(ids) != 0 {
		t.Errorf("jobs %q stored", ids)
	}
}
