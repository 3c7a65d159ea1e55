package history

import (
	"cmp"
	"math"
	"slices"
)

// History is the answer of GET /api/v1/templates/{id}/history.
type History struct {
	TemplateID   string      `json:"template_id"`
	TemplateName string      `json:"template_name"`
	Runs         []RunEntry  `json:"runs"`  // oldest first
	Tasks        []TaskEntry `json:"tasks"` // see the package doc for the order
	// TasksOmitted counts the tasks past the answer's cap (MaxTasks of
	// Build), left out from the end of the order.
	TasksOmitted int `json:"tasks_omitted"`
	// MinOthers is the rule's Rule.MinOthers: the other runs a run
	// needs before anything is flagged in it.
	MinOthers int `json:"min_others"`
	// RunsInAll counts the runs of the template the window was taken
	// from (all of them, or those up to the job it ends at); the window
	// holds the last len(Runs). Build sets it to len(runs): a caller
	// that cut the window sets it.
	RunsInAll int `json:"runs_in_all"`
	// Dists is the spread of each metric over the whole finished runs of
	// the window (see RunDists).
	Dists Dists `json:"distribution"`
}

// RunEntry is one run of the window.
type RunEntry struct {
	JobID  string `json:"job_id"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"`
	Status string `json:"status"`
}

// TaskEntry is one task across the runs it appears in.
type TaskEntry struct {
	Key         string         `json:"key"`
	Name        string         `json:"name"`
	Play        string         `json:"play"`
	Role        string         `json:"role"`
	TaskPath    string         `json:"task_path"`
	Runs        []TaskRunEntry `json:"runs"`        // one per run it appears in, oldest first
	Regressions []Regression   `json:"regressions"` // in run order, then Metrics order
	// Dists is the spread of each metric of the task over the finished
	// runs it appears in (see TaskDists).
	Dists Dists `json:"distribution"`
}

// TaskRunEntry is one task in one run: its counter there, duration, CPU
// seconds, and exact max and mean per resource with samples.
type TaskRunEntry struct {
	JobID      string   `json:"job_id"`
	Counter    int64    `json:"counter"`
	Start      int64    `json:"start"`
	DurationMs int64    `json:"duration_ms"`
	CPUSeconds *float64 `json:"cpu_seconds,omitempty"` // absent without CPU samples
	Max        Stats    `json:"max"`
	Mean       Stats    `json:"mean"`
	// Waited is the share of the task's wall time stalled, by signal
	// ("cpu", "memory", "throttled", "node_cpu"; "node_load" is the mean
	// load per CPU); absent when the run measured none.
	Waited map[string]float64 `json:"waited,omitempty"`
}

// Regression is a run's value of a task's metric that the Rule flags.
// Factor is Value / Baseline rounded to two decimals, null when the
// baseline is 0.
type Regression struct {
	JobID    string   `json:"job_id"`
	Metric   string   `json:"metric"`
	Value    float64  `json:"value"`
	Baseline float64  `json:"baseline"`
	Factor   *float64 `json:"factor"`
	// Contended marks a value the rule flags that the task's stall
	// explains (see Rule): reported, but no regression. Stall holds the
	// figures that decided.
	Contended bool        `json:"contended,omitempty"`
	Stall     *Contention `json:"stall,omitempty"`
}

// Contention is why a flagged value is contended: the task's stall share
// of signal in the run against the median of the other runs.
type Contention struct {
	Signal   string  `json:"signal"`   // StallCPU, StallNodeCPU or StallNodeLoad (then 1 − 1/load)
	Share    float64 `json:"share"`    // of the task's wall time, 0–1
	Baseline float64 `json:"baseline"` // median share of the other runs (0 where they measured none)
}

// Build matches the tasks of runs (oldest first), flags regressions with
// rule and returns the history document holding at most maxTasks tasks
// (<= 0: all). It does not modify runs; the document shares the runs'
// Max and Mean figures.
func Build(templateID, templateName string, runs []Run, rule Rule, maxTasks int) History {
	h := History{TemplateID: templateID, TemplateName: templateName, Runs: make([]RunEntry, len(runs)), Tasks: []TaskEntry{},
		MinOthers: rule.MinOthers, RunsInAll: len(runs), Dists: RunDists(runs)}
	for i, r := range runs {
		h.Runs[i] = RunEntry{JobID: r.JobID, Start: r.StartMs, End: r.EndMs, Status: r.Status}
	}
	tasks := Match(runs)
	if maxTasks > 0 && len(tasks) > maxTasks {
		h.TasksOmitted = len(tasks) - maxTasks
		tasks = tasks[:maxTasks]
	}
	for _, t := range tasks {
		e := TaskEntry{Key: t.Key, Name: t.Name, Play: t.Play, Role: t.Role, TaskPath: t.Path, Runs: []TaskRunEntry{}, Regressions: Flag(runs, t, rule), Dists: TaskDists(runs, t)}
		for ri, at := range t.At {
			if at < 0 {
				continue
			}
			tr := &runs[ri].Tasks[at]
			re := TaskRunEntry{JobID: runs[ri].JobID, Counter: tr.Counter, Start: tr.StartMs, DurationMs: tr.EndMs - tr.StartMs, Max: tr.Max, Mean: tr.Mean, Waited: tr.Waited}
			if tr.Max.CPU != nil {
				s := tr.CPUSeconds
				re.CPUSeconds = &s
			}
			e.Runs = append(e.Runs, re)
		}
		h.Tasks = append(h.Tasks, e)
	}
	return h
}

// Flag returns the regressions of task t across runs: for each run where
// the task has a value of a metric, that value checked by rule against
// the task's values of the metric in the other finished runs (see
// Unfinished: a run still going is checked, but its values, cut short,
// are no baseline for the others).
//
// The baseline values of a metric are sorted once; the median of the
// others is read from them skipping the run's own value, and only a
// value that passes the factor and the floor against it goes through
// rule.Check (which also decides on the spread), so a quiet task costs
// one sort per metric.
func Flag(runs []Run, t Task, rule Rule) []Regression {
	out := []Regression{}
	vals := make([]float64, len(runs))
	has := make([]bool, len(runs))
	finished := make([]bool, len(runs))
	for ri, r := range runs {
		finished[ri] = !Unfinished(r.Status)
	}
	sorted := make([]float64, 0, len(runs))
	var others []float64
	for _, m := range Metrics {
		sorted = sorted[:0]
		for ri, at := range t.At {
			has[ri] = false
			if at >= 0 {
				if vals[ri], has[ri] = runs[ri].Tasks[at].Value(m); has[ri] && finished[ri] {
					sorted = append(sorted, vals[ri])
				}
			}
		}
		if len(sorted) < rule.MinOthers || len(sorted) < 1 {
			continue
		}
		slices.Sort(sorted)
		for ri := range runs {
			if !has[ri] {
				continue
			}
			var base float64
			if finished[ri] {
				if len(sorted)-1 < rule.MinOthers || len(sorted) < 2 {
					continue
				}
				k, _ := slices.BinarySearch(sorted, vals[ri])
				base = medianWithout(sorted, k)
			} else {
				base = median(sorted)
			}
			if inc := vals[ri] - base; !(vals[ri] >= rule.Factor*base && inc >= rule.Floors[m] && inc > 0) {
				continue
			}
			others = others[:0]
			for rj := range runs {
				if rj != ri && has[rj] && finished[rj] {
					others = append(others, vals[rj])
				}
			}
			base, bad := rule.Check(m, vals[ri], others)
			if !bad {
				continue
			}
			r := Regression{JobID: runs[ri].JobID, Metric: m, Value: vals[ri], Baseline: base}
			if base > 0 {
				f := math.Round(vals[ri]/base*100) / 100
				r.Factor = &f
			}
			if rule.MaxStall > 0 && stallJudged(m) {
				r.Stall = contention(runs, t, ri, finished, m, rule.MaxStall)
				r.Contended = r.Stall != nil
			}
			out = append(out, r)
		}
	}
	sortByRun(out, runs)
	return out
}

// contention returns the stall figures of task t in run ri when its
// stall share and the median share (of the same signal) of the other
// finished runs make its finding of metric contended (see Rule and
// Contended), else nil.
func contention(runs []Run, t Task, ri int, finished []bool, metric string, maxStall float64) *Contention {
	sig, share, ok := judgedStall(runs[ri].Tasks[t.At[ri]].Waited)
	if !ok {
		return nil
	}
	var others []float64
	for rj, at := range t.At {
		if rj == ri || at < 0 || !finished[rj] {
			continue
		}
		if s, v, ok := judgedStall(runs[rj].Tasks[at].Waited); ok && s == sig {
			others = append(others, v)
		}
	}
	base := 0.0
	if len(others) > 0 {
		slices.Sort(others)
		base = median(others)
	}
	if more, less := Contended(share, base, maxStall); !more && !(less && metric == MetricCPUMax) {
		return nil
	}
	return &Contention{Signal: sig, Share: round4(share), Baseline: round4(base)}
}

// Unfinished reports whether a run with status is still going (AWX's
// new, pending, waiting and running): its last task is cut short and its
// figures are lower than they will be, so it is no baseline for other
// runs. Its own values are still checked: a task that already ran longer
// or higher than usual will not get better by finishing. Any other
// status, "" (unknown) included, counts as finished.
func Unfinished(status string) bool {
	switch status {
	case "new", "pending", "waiting", "running":
		return true
	}
	return false
}

// medianWithout is the median of sorted without its element k.
func medianWithout(sorted []float64, k int) float64 {
	n := len(sorted) - 1
	at := func(j int) float64 {
		if j >= k {
			j++
		}
		return sorted[j]
	}
	if n%2 == 1 {
		return at(n / 2)
	}
	return (at(n/2-1) + at(n/2)) / 2
}

// sortByRun orders regressions by run (as in runs), keeping the metric
// order within a run.
func sortByRun(rs []Regression, runs []Run) {
	pos := make(map[string]int, len(runs))
	for i, r := range runs {
		pos[r.JobID] = i
	}
	slices.SortStableFunc(rs, func(a, b Regression) int { return cmp.Compare(pos[a.JobID], pos[b.JobID]) })
}
