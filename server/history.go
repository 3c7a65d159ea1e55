package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"weak"

	"github.com/labstack/echo/v4"

	"github.com/peakline/peakline/server/graphpayload"
	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/history"
)

// Bounds of GET /api/v1/templates/{id}/history.
const (
	defaultHistoryRuns = 20
	maxHistoryRuns     = 100
	// maxHistoryTasks caps the tasks of one answer; the answer's
	// tasks_omitted counts those left out.
	maxHistoryTasks = 1000
)

// DefaultRegressionFactor is the factor of the regression rule when
// Config.RegressionFactor is 0 (see history.Rule).
const DefaultRegressionFactor = 1.5

// errNoSuchRun marks a job= that is not a run of the template; the
// message of a noSuchRunError says which.
var errNoSuchRun = errors.New("not a run of the template")

type noSuchRunError struct{ job, template string }

func (e *noSuchRunError) Error() string {
	return fmt.Sprintf("job: %q is not a run of template %q", e.job, e.template)
}
func (e *noSuchRunError) Unwrap() error { return errNoSuchRun }

// templateHistory answers GET /api/v1/templates/{id}/history?last=N[&job=ID][&max_stall=SHARE]:
// the template's last N runs (default 20, at most 100) oldest first, or
// with job the N runs ending at that job; every task matched across them
// with its statistics per run, the spread of each metric over the runs,
// and the regressions the rule flags (package tsdb/history). The runs
// are read with the same per-job reads as the tasks payload, so a remote
// backend serves them too.
func (s *Server) templateHistory(c echo.Context) error {
	id, err := templateParam(c)
	if err != nil {
		return err
	}
	last, err := historyLast(c.QueryParam("last"))
	if err != nil {
		return err
	}
	rule := s.regressionRule()
	if rule.MaxStall, err = maxStallParam(c.QueryParam("max_stall")); err != nil {
		return err
	}
	runs, name, runsInAll, release, err := s.templateRuns(c, id, last, c.QueryParam("job"))
	if err != nil {
		return err
	}
	defer release()
	h := history.Build(id, name, runs, rule, maxHistoryTasks)
	h.RunsInAll = runsInAll
	return c.JSON(http.StatusOK, h)
}

// templateParam reads and checks the template id of the path.
func templateParam(c echo.Context) (string, error) {
	id, err := pathParam(c, "id")
	if err != nil {
		return "", badRequest("id: the template id in the path is not properly escaped: %v", err)
	}
	if err := checkTemplateID("id", id); err != nil {
		return "", err
	}
	return id, nil
}

// templateRuns reads the last runs of template id (oldest first), or
// with job the last runs ending at that job, each with its per-task
// statistics, the template's newest name, and how many runs the
// template has (all, or up to job) of which the window holds the last. The memory of the read is
// reserved in the heavy-read pool before it starts; the caller calls
// release once it has answered.
func (s *Server) templateRuns(c echo.Context, id string, last int, job string) (runs []history.Run, name string, runsInAll int, release func(), err error) {
	return s.readTemplateRuns(c.Request().Context(), id, last, job, func(what string, bytes int64) (func(), error) {
		return s.reads.reserve(c, what, bytes)
	})
}

// readTemplateRuns is templateRuns with the reservation made by reserve.
func (s *Server) readTemplateRuns(ctx context.Context, id string, last int, job string, reserve func(what string, bytes int64) (func(), error)) (runs []history.Run, name string, runsInAll int, release func(), err error) {
	ids, err := s.store.TemplateJobs(ctx, id)
	if err != nil {
		return nil, "", 0, nil, err
	}
	// Order the runs by their spans (chunk bounds, cached): only the runs
	// of the window are read.
	spans, err := s.store.Spans(ctx)
	if err != nil {
		return nil, "", 0, nil, err
	}
	ofTemplate := make(map[string]bool, len(ids))
	for _, jid := range ids {
		ofTemplate[jid] = true
	}
	runSpans := spans[:0]
	for _, sp := range spans {
		if ofTemplate[sp.ID] {
			runSpans = append(runSpans, sp)
		}
	}
	slices.SortFunc(runSpans, func(a, b tsdb.Span) int {
		return cmp.Or(cmp.Compare(a.FirstMs, b.FirstMs), cmp.Compare(a.ID, b.ID))
	})
	end := len(runSpans)
	if job != "" {
		i := slices.IndexFunc(runSpans, func(sp tsdb.Span) bool { return sp.ID == job })
		if i < 0 {
			return nil, "", 0, nil, &noSuchRunError{job: job, template: id}
		}
		end = i + 1
	}
	runsInAll = end
	runSpans = runSpans[max(0, end-last):end]
	sums := make([]tsdb.Summary, 0, len(runSpans))
	for _, sp := range runSpans {
		sum, err := s.store.Summary(ctx, sp.ID)
		if errors.Is(err, tsdb.ErrJobNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, "", 0, nil, err
		}
		sums = append(sums, sum)
	}
	// A job being written or deleted while its span was read can show an
	// empty span (sorted first); its summary has the true bounds.
	slices.SortFunc(sums, func(a, b tsdb.Summary) int {
		return cmp.Or(cmp.Compare(a.FirstMs, b.FirstMs), cmp.Compare(a.ID, b.ID))
	})
	// Reserve the memory of the runs, their matching and the answer
	// (and of reading the largest run, if the store's cache lacks it)
	// before any of it is done.
	var estimate int64
	maxSamples := 0
	for _, sum := range sums {
		estimate += int64(sum.Tasks) * historyTaskRunBytes
		samples := 0
		for _, r := range sum.Resources {
			samples += r.Samples
		}
		maxSamples = max(maxSamples, samples)
	}
	estimate += int64(maxSamples) * readSampleBytes
	release, err = reserve(fmt.Sprintf("the history of %d runs", len(sums)), estimate)
	if err != nil {
		return nil, "", 0, nil, err
	}
	runs = make([]history.Run, 0, len(sums))
	for _, sum := range sums {
		job, err := s.store.ReadJob(ctx, sum.ID, math.MinInt64, math.MaxInt64)
		if errors.Is(err, tsdb.ErrJobNotFound) {
			continue // deleted since its summary was read
		}
		if err != nil {
			release()
			return nil, "", 0, nil, err
		}
		runs = append(runs, s.runs.get(job, sum))
		if sum.Info.TemplateName != "" {
			name = sum.Info.TemplateName // the newest name wins
		}
	}
	// Runs deleted while the window was read are gone from the count too.
	return runs, name, runsInAll - (len(runSpans) - len(runs)), release, nil
}

// maxStallParam parses max_stall=SHARE (0 to 1; history.Rule.MaxStall):
// how much of a task's usual unstalled time a change of its CPU stall
// must take for a duration or CPU finding to be contended; 0 judges
// none. Default history.DefaultMaxStall.
func maxStallParam(v string) (float64, error) {
	if v == "" {
		return history.DefaultMaxStall, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return 0, badRequest("max_stall: must be a share from 0 to 1 (0: judge no contention), got %q", v)
	}
	return f, nil
}

// historyLast parses last=N.
func historyLast(v string) (int, error) {
	return countParam("last", v, defaultHistoryRuns, maxHistoryRuns, "whole number of runs")
}

// historyRun turns a job read in full into a run of its template: every
// task with the exact max and mean of the tasks payload
// (graphpayload.Summaries) and its CPU seconds.
func historyRun(job *tsdb.Job, sum tsdb.Summary) history.Run {
	cols, spans := graphInput(job)
	var lastCounter int64
	if job.LastEvent != nil {
		lastCounter = job.LastEvent.Counter
	}
	stats := graphpayload.Summaries(cols, spans, lastCounter)
	waited := jobWaited(job)
	var cpu []float64
	for _, c := range job.Columns {
		if c.Resource.Name == "cpu" {
			cpu = history.CPUSeconds(nil, c.Ts, c.Vs, c.Task, len(job.Tasks))
		}
	}
	run := history.Run{JobID: job.ID, StartMs: sum.FirstMs, EndMs: sum.LastMs, Status: sum.Info.Status, Tasks: make([]history.TaskRun, len(job.Tasks)),
		Sizing: sizingOf(job.Info)}
	for i, t := range job.Tasks {
		tr := history.TaskRun{Counter: t.Counter, Name: t.Name, Play: t.Play, Role: t.Role, Path: t.Path,
			StartMs: t.StartMs, EndMs: t.EndMs, Max: history.StatsOf(stats[i].Max), Mean: history.StatsOf(stats[i].Mean)}
		if cpu != nil {
			tr.CPUSeconds = cpu[i]
		}
		if waited != nil {
			tr.Waited = waited[i]
		}
		run.Tasks[i] = tr
	}
	return run
}

// runCache keeps the history.Run of each job computed from the *tsdb.Job
// the store handed out. The store hands out the same *Job for a job read
// in full until the job is written, deleted or evicted, so an entry is
// good while the job ReadJob returns is the one it was computed from; a
// weak pointer tells, without keeping an evicted job in memory. Safe for
// concurrent use.
type runCache struct {
	mu sync.Mutex
	m  map[string]runEntry
}

type runEntry struct {
	job weak.Pointer[tsdb.Job]
	run history.Run
}

// maxRunCache bounds the jobs runCache remembers; past it, it starts
// over.
const maxRunCache = 4096

func newRunCache() *runCache { return &runCache{m: map[string]runEntry{}} }

// get returns the run of job, computing it on a miss.
func (c *runCache) get(job *tsdb.Job, sum tsdb.Summary) history.Run {
	c.mu.Lock()
	e, ok := c.m[job.ID]
	c.mu.Unlock()
	if ok && e.job.Value() == job {
		return e.run
	}
	run := historyRun(job, sum)
	c.mu.Lock()
	if len(c.m) >= maxRunCache {
		clear(c.m)
	}
	c.m[job.ID] = runEntry{job: weak.Make(job), run: run}
	c.mu.Unlock()
	return run
}

// regressionRule is the default rule with the configured factor.
func (s *Server) regressionRule() history.Rule {
	r := history.DefaultRule()
	r.Factor = s.cfg.RegressionFactor
	return r
}
