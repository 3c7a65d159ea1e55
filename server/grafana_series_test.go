package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/ship"
	"github.com/peakline/peakline/server"
)

// grafanaRoundInterval rounds an interval as Grafana does before it
// becomes $__interval (its interval calculator's table of nice values).
func grafanaRoundInterval(d time.Duration) time.Duration {
	ms := d.Milliseconds()
	table := []struct {
		below int64
		round time.Duration
	}{
		{10, time.Millisecond}, {15, 10 * time.Millisecond}, {35, 20 * time.Millisecond}, {75, 50 * time.Millisecond},
		{150, 100 * time.Millisecond}, {350, 200 * time.Millisecond}, {750, 500 * time.Millisecond},
		{1500, time.Second}, {3500, 2 * time.Second}, {7500, 5 * time.Second}, {12500, 10 * time.Second},
		{17500, 15 * time.Second}, {25000, 20 * time.Second}, {45000, 30 * time.Second}, {90000, time.Minute},
		{210000, 2 * time.Minute}, {450000, 5 * time.Minute}, {870000, 10 * time.Minute}, {1350000, 15 * time.Minute},
		{2700000, 30 * time.Minute}, {5400000, time.Hour}, {9000000, 2 * time.Hour}, {16200000, 3 * time.Hour},
		{27000000, 6 * time.Hour}, {86400000, 12 * time.Hour},
	}
	for _, r := range table {
		if ms < r.below {
			return r.round
		}
	}
	return 24 * time.Hour
}

// grafanaQuery is a panel query as Grafana sends it for a time range:
// the step is $__interval, the range divided by the panel's data points
// rounded to a nice value and at least the data source's minimum
// interval (its timeInterval, 1s in provisioning/); start and end are
// aligned to the step; $__rate_interval is the larger of four minimum
// intervals and the interval plus one.
type grafanaQuery struct {
	rng  v1.Range
	fill *strings.Replacer
}

func newGrafanaQuery(job string, from, to time.Time, dataPoints int) grafanaQuery {
	const minInterval = time.Second
	step := max(minInterval, grafanaRoundInterval(to.Sub(from)/time.Duration(dataPoints)))
	dur := func(d time.Duration) string {
		if d%time.Second == 0 {
			return fmt.Sprintf("%ds", int64(d/time.Second))
		}
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return grafanaQuery{
		rng: v1.Range{Start: from.Truncate(step), End: to.Truncate(step), Step: step},
		fill: strings.NewReplacer(`$job`, job, `$__interval`, dur(step), `$__rate_interval`, dur(max(4*minInterval, step+minInterval)),
			`$__range`, dur(to.Sub(from).Truncate(time.Second))),
	}
}

// The shipped dashboard's resource panels, queried as Grafana queries
// them over real ansible-runner jobs (imported through the collector's
// client into a real server, read back with the Prometheus client)
// for typical time ranges, draw each task's real samples only: every
// point is the last sample of the task in the step before it, so no
// point comes later than one step after the task's last sample and no
// sample is drawn twice (the legend's max and mean are over real
// samples). Raw selectors drew five minutes of a finished task's last
// value.
func TestGrafanaTaskSeriesEnd(t *testing.T) {
	b, err := os.ReadFile("../web/grafana/dashboards/peakline.json")
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	metricOf := map[string]string{"CPU": "cpu", "Memory": "memory", "PIDs": "pids"}

	env := newPromEnv(t, server.Config{})
	ctx := context.Background()
	var jobs []*ansible.Job
	for _, tree := range []string{"../testdata/ansible/runner-loops", "../testdata/ansible/runner-basic", "../testdata/ansible/template-runs/1003"} {
		read, err := ansible.Read(tree, ansible.ReadOptions{})
		if err != nil {
			t.Fatalf("read %s: %v", tree, err)
		}
		for _, j := range read {
			for _, batch := range ship.Batches(j, 0) {
				if err := (&ship.Client{BaseURL: env.hs.URL}).Send(ctx, &batch); err != nil {
					t.Fatalf("import %s: %v", j.ID, err)
				}
			}
			jobs = append(jobs, j)
		}
	}

	checked := 0
	for _, j := range jobs {
		first, last := int64(1<<62), int64(0)
		for _, s := range j.Series {
			first, last = min(first, s.Ts[0]), max(last, s.Ts[len(s.Ts)-1])
		}
		// Typical ranges: the job and five minutes after it (the span
		// the raw selectors filled), at a full-width panel's and a
		// small panel's data points; the dashboard's default six hours.
		ranges := []struct {
			from, to time.Time
			points   int
		}{
			{time.UnixMilli(first).Add(-time.Minute), time.UnixMilli(last).Add(5 * time.Minute), 1800},
			{time.UnixMilli(first).Add(-10 * time.Second), time.UnixMilli(last).Add(10 * time.Second), 300},
			{time.UnixMilli(last).Add(-6 * time.Hour).Add(time.Minute), time.UnixMilli(last).Add(time.Minute), 1800},
		}
		for _, r := range ranges {
			gq := newGrafanaQuery(j.ID, r.from, r.to, r.points)
			for _, p := range d.Panels {
				resource, ok := metricOf[p.Title]
				if !ok {
					continue
				}
				if len(p.Targets) != 1 || p.Targets[0].Instant {
					t.Fatalf("panel %s: want one range query, got %+v", p.Title, p.Targets)
				}
				q := gq.fill.Replace(p.Targets[0].Expr)
				m := res(env.api.QueryRange(ctx, q, gq.rng)).must(t).(model.Matrix)
				checkTaskSeries(t, fmt.Sprintf("job %s, %s over %s at step %s: %s", j.ID, p.Title, r.to.Sub(r.from), gq.rng.Step, q), j, resource, m, gq.rng)
				checked++
			}
		}
	}
	if want := len(jobs) * 3 * 3; checked != want {
		t.Fatalf("checked %d panel queries, want %d (3 resource panels, 3 ranges, %d jobs)", checked, want, len(jobs))
	}
}

// checkTaskSeries checks a resource panel's answer against the job's
// samples of resource: one series per task that has samples in the
// range, each point the value of the task's last sample in the step up
// to it.
func checkTaskSeries(t *testing.T, what string, j *ansible.Job, resource string, m model.Matrix, rng v1.Range) {
	t.Helper()
	stepMs := rng.Step.Milliseconds()
	type key struct{ counter, uuid string }
	src := map[key]ansible.Series{}
	for _, s := range j.Series {
		if s.Resource == resource {
			src[key{fmt.Sprint(s.Counter), s.UUID}] = s
		}
	}
	if len(src) == 0 {
		t.Fatalf("%s: the job has no %s samples", what, resource)
	}
	drawn := map[key]map[int64]bool{}
	for _, s := range m {
		k := key{string(s.Metric["counter"]), string(s.Metric["task_uuid"])}
		task, ok := src[k]
		if !ok || string(s.Metric["job_id"]) != j.ID || string(s.Metric["task"]) != task.Task {
			t.Fatalf("%s: series %v is no task of the job with %s samples", what, s.Metric, resource)
		}
		drawn[k] = map[int64]bool{}
		lastMs := task.Ts[len(task.Ts)-1]
		for _, pt := range s.Values {
			at := int64(pt.Timestamp)
			drawn[k][at] = true
			if at >= lastMs+stepMs {
				t.Fatalf("%s: task %s (%s) has a point at %d, %d ms after its last sample at %d (step %d ms)", what, k.counter, task.Task, at, at-lastMs, lastMs, stepMs)
			}
			// The last sample in (at - step, at].
			i, _ := slices.BinarySearch(task.Ts, at+1)
			if i == 0 || task.Ts[i-1] <= at-stepMs {
				t.Fatalf("%s: task %s has a point at %d with no sample in the step before it", what, k.counter, at)
			}
			if want := task.Vs[i-1]; float64(pt.Value) != want {
				t.Fatalf("%s: task %s at %d = %v, want its sample at %d, %v", what, k.counter, at, pt.Value, task.Ts[i-1], want)
			}
		}
	}
	// And every step that holds a sample of a task has its point: the
	// steps are multiples of the step, start and end among them.
	startMs, endMs := rng.Start.UnixMilli(), rng.End.UnixMilli()
	for k, task := range src {
		for _, ts := range task.Ts {
			if ts <= startMs-stepMs || ts > endMs {
				continue
			}
			if at := (ts + stepMs - 1) / stepMs * stepMs; !drawn[k][at] {
				t.Fatalf("%s: task %s (%s) has a sample at %d but no point at %d", what, k.counter, task.Task, ts, at)
			}
		}
	}
}
