package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// TemplateRuns stores runs synthetic runs of one job template ("bench",
// id HistoryTemplate) in store: jobs run-000, run-001, … an hour apart
// and ending before workload.Start, each of tasks tasks ("task 0" … at site.yml:3, :6, …) with
// samplesPerResource samples per resource from workload.AnsibleJob (a
// seed per run, so the values vary from run to run).
func TemplateRuns(ctx context.Context, store *tsdb.Store, runs, tasks, samplesPerResource int, seed int64) error {
	for r := range runs {
		id := fmt.Sprintf("run-%03d", r)
		spec := workload.JobSpec{Tasks: tasks, SamplesPerResource: samplesPerResource, StartMs: workload.Start - int64(runs-r)*3_600_000}
		job := workload.AnsibleJob(id, spec, seed+int64(r))
		b := &tsdb.Batch{JobID: id, LastEvent: &tsdb.Event{Counter: job.LastCounter, TimeMs: job.LastEventMs},
			Info: tsdb.JobInfo{TemplateID: HistoryTemplate, TemplateName: "bench", Status: "successful", Playbook: "site.yml"}}
		for i, t := range job.Tasks {
			b.Tasks = append(b.Tasks, tsdb.Task{Counter: t.Counter, UUID: t.UUID, Name: fmt.Sprintf("task %d", i), StartMs: t.StartMs,
				Play: "bench", Path: fmt.Sprintf("/runner/project/site.yml:%d", 3*(i+1))})
		}
		for _, s := range job.Series {
			t := b.Tasks[s.Task]
			b.Series = append(b.Series, tsdb.SeriesData{Resource: s.Resource, Counter: t.Counter, UUID: t.UUID, Task: t.Name, Ts: s.Ts, Vs: s.Vs})
		}
		if _, err := store.Append(ctx, b); err != nil {
			return fmt.Errorf("store run %s: %w", id, err)
		}
	}
	return nil
}

// HistoryTemplate is the template id of TemplateRuns.
const HistoryTemplate = "9001"

type historyFlags struct {
	common
	runs, tasks, samples, requests int
}

func historyCommand() *cobra.Command {
	var f historyFlags
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Latency of a template's history (GET /api/v1/templates/{id}/history) from a warm store",
		Long: `history stores --runs runs of one template, each of --tasks tasks and
--samples samples per resource, compacted into blocks, and asks the server
handler (in process) for the template's history of all the runs, --requests
times after one untimed request that warms the store's job cache. It
prints the p50, p99 and max latency; the target is under 100 ms for 20
runs of 200 tasks.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runHistory(cmd, &f) },
	}
	fl := cmd.Flags()
	f.register(fl)
	fl.IntVar(&f.runs, "runs", 20, "runs of the template")
	fl.IntVar(&f.tasks, "tasks", 200, "tasks per run")
	fl.IntVar(&f.samples, "samples", 10_000, "samples per resource per run")
	fl.IntVar(&f.requests, "requests", 40, "timed requests")
	return cmd
}

func runHistory(cmd *cobra.Command, f *historyFlags) error {
	started := time.Now()
	ctx := cmd.Context()
	if f.quick && !cmd.Flags().Changed("requests") {
		f.requests = 10
	}
	if f.runs < 1 || f.runs > 100 || f.tasks < 1 || f.samples < f.tasks || f.requests < 1 {
		return usagef("--runs (1 to 100), --tasks (>= 1), --samples (>= --tasks) and --requests (>= 1): got %d, %d, %d, %d", f.runs, f.tasks, f.samples, f.requests)
	}
	dir, err := os.MkdirTemp("", "peakline-bench-history-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bar := f.bar(cmd, f.requests+2, "history")
	store, err := tsdb.Open(dir, tsdb.Options{}, nil, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := TemplateRuns(ctx, store, f.runs, f.tasks, f.samples, f.seed); err != nil {
		return err
	}
	if err := store.Compact(ctx); err != nil {
		return err
	}
	bar.Add(1)
	srv, err := server.New(server.Config{}, store, nil, nil)
	if err != nil {
		return err
	}
	var lat timed
	for i := -1; i < f.requests; i++ {
		t0 := time.Now()
		n, err := HistoryRequest(srv.Handler(), HistoryTemplate, f.runs)
		if err != nil {
			return err
		}
		if i >= 0 { // the first request warms the cache
			lat.d = append(lat.d, time.Since(t0))
			lat.bytes = int64(n)
		}
		bar.Add(1)
	}
	bar.Finish()
	name := fmt.Sprintf("%d runs × %d tasks, %s samples/resource/run", f.runs, f.tasks, workload.SizeName(f.samples))
	r := &Report{Title: "history: a template's runs task by task, warm store, in process"}
	r.Add(cost(name, "history", "target 100 ms", "p50 latency", "ms, lower is better", lat.p(50), 100),
		cost(name, "history", "target 100 ms", "p99 latency", "ms, lower is better", lat.p(99), 100),
		cost(name, "history", "target 100 ms", "max latency", "ms, lower is better", lat.p(100), 100))
	r.Note("answer size %d bytes (uncompressed JSON); 'speedup' here is the 100 ms target / the latency.", lat.bytes)
	return f.finish(cmd, r, started)
}

// HistoryRequest asks h for the history of template's last runs and
// returns the answer's size; an answer that is not 200, or that holds
// no tasks, is an error.
func HistoryRequest(h http.Handler, template string, last int) (int, error) {
	req := httptest.NewRequest(http.MethodGet, fmt.Sprintf("/api/v1/templates/%s/history?last=%d", template, last), nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return 0, fmt.Errorf("history: %d %s", rec.Code, rec.Body.String())
	}
	if n := rec.Body.Len(); n < 100 {
		return 0, fmt.Errorf("history: answer of %d bytes holds no tasks: %s", n, rec.Body.String())
	}
	return rec.Body.Len(), nil
}
