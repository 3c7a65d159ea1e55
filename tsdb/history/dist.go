package history

import (
	"math"
	"slices"
)

// Dist is the spread of one metric over the finished runs of a window
// that have it: the run count, the median, the 95th percentile and the
// maximum, in the metric's unit (see Metrics).
type Dist struct {
	Runs int     `json:"runs"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	Max  float64 `json:"max"`
}

// Dists holds a Dist per metric name (MetricDuration, …); a metric no
// finished run has is left out.
type Dists map[string]Dist

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of sorted (ascending, not
// empty) by linear interpolation between closest ranks, the rule of
// numpy's default and of PromQL's quantile_over_time: the value at rank
// q × (n − 1), counted from 0.
func Quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 1 {
		return sorted[0]
	}
	r := q * float64(len(sorted)-1)
	lo := int(math.Floor(r))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (r-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// distOf makes the Dist of vals; vals is sorted in place. It returns
// false for no values.
func distOf(vals []float64) (Dist, bool) {
	if len(vals) == 0 {
		return Dist{}, false
	}
	slices.Sort(vals)
	return Dist{Runs: len(vals), P50: Quantile(vals, 0.5), P95: Quantile(vals, 0.95), Max: vals[len(vals)-1]}, true
}

// RunValue returns the whole run's value of metric: its duration (end −
// start), the highest CPU, memory or PID peak of its tasks, or the sum of
// its tasks' CPU seconds; false when no task has the metric's resource.
// A run's memory peak is the highest of its tasks' peaks, so the peak
// of the job's cgroup as a whole.
func (r *Run) RunValue(metric string) (float64, bool) {
	if metric == MetricDuration {
		return float64(r.EndMs - r.StartMs), true
	}
	v, ok := 0.0, false
	for i := range r.Tasks {
		tv, has := r.Tasks[i].Value(metric)
		if !has {
			continue
		}
		switch {
		case metric == MetricCPUSeconds:
			v += tv
		case !ok || tv > v:
			v = tv
		}
		ok = true
	}
	return v, ok
}

// RunDists returns the spread of every metric over the whole runs (see
// RunValue) among runs that are finished (see Unfinished: a run still
// going has not reached its peaks yet).
func RunDists(runs []Run) Dists {
	out := Dists{}
	vals := make([]float64, 0, len(runs))
	for _, m := range Metrics {
		vals = vals[:0]
		for i := range runs {
			if Unfinished(runs[i].Status) {
				continue
			}
			if v, ok := runs[i].RunValue(m); ok {
				vals = append(vals, v)
			}
		}
		if d, ok := distOf(vals); ok {
			out[m] = d
		}
	}
	return out
}

// TaskDists returns the spread of every metric of task t (matched over
// runs by Match) over the finished runs it appears in.
func TaskDists(runs []Run, t Task) Dists {
	out := Dists{}
	vals := make([]float64, 0, len(runs))
	for _, m := range Metrics {
		vals = vals[:0]
		for ri, at := range t.At {
			if at < 0 || Unfinished(runs[ri].Status) {
				continue
			}
			if v, ok := runs[ri].Tasks[at].Value(m); ok {
				vals = append(vals, v)
			}
		}
		if d, ok := distOf(vals); ok {
			out[m] = d
		}
	}
	return out
}
