package history

import (
	"math"
	"slices"
)

// Metrics compared across runs, as the history API names them.
const (
	MetricDuration   = "duration_ms" // the task's end − start, ms
	MetricCPUMax     = "cpu_max"     // high-water mark of CPU, percent of one CPU
	MetricCPUSeconds = "cpu_seconds" // CPU time, seconds (see CPUSeconds)
	MetricMemoryMax  = "memory_max"  // high-water mark of memory, bytes
	MetricPIDsMax    = "pids_max"    // high-water mark of the process count
)

// Metrics lists every compared metric, in the order regressions are
// reported.
var Metrics = []string{MetricDuration, MetricCPUMax, MetricCPUSeconds, MetricMemoryMax, MetricPIDsMax}

// Value returns a task run's value of metric, and false when the run has
// no samples of its resource.
func (t *TaskRun) Value(metric string) (float64, bool) {
	var p *float64
	switch metric {
	case MetricDuration:
		return float64(t.EndMs - t.StartMs), true
	case MetricCPUMax:
		p = t.Max.CPU
	case MetricCPUSeconds:
		if t.Max.CPU != nil {
			return t.CPUSeconds, true
		}
	case MetricMemoryMax:
		p = t.Max.Memory
	case MetricPIDsMax:
		p = t.Max.PIDs
	}
	if p == nil {
		return 0, false
	}
	return *p, true
}

// Rule decides whether a run's value of a task's metric is a regression
// against the same task's values in the other runs of the window:
//
//	baseline = median(others)
//	spread   = 1.4826 × median(|others − baseline|)   (MAD, scaled to σ for normal noise)
//	regression ⇔ len(others) ≥ MinOthers
//	             ∧ value ≥ Factor × baseline
//	             ∧ value − baseline > K × spread
//	             ∧ value − baseline ≥ Floors[metric]
//
// Median and MAD ignore one odd run among the others, so a heavy run
// does not hide the next. The factor keeps a doubling of a very steady
// value (tiny spread) from passing on spread alone when it is small in
// relative terms; the spread keeps a noisy task from alarming on its
// usual swings; the floor, on the increase, keeps small values quiet (a
// 40 ms task taking 90 ms, a handful of MiB).
//
// A regression of duration_ms, cpu_max or cpu_seconds is contended
// (Regression.Contended) when the task's CPU stall in the run differs
// from the median stall of the same task in the other runs by more than
// MaxStall (see Contended): other work on the node, not the task, made
// it slow or bursty. It is still reported, with the stall figures, but it
// is no regression. A run more stalled than usual is contended for all
// three; a run less stalled than usual for cpu_max alone, as a task whose
// usual runs fought for the CPU peaks higher on a quiet node, while it
// runs faster and uses the same CPU time there. Memory and PID
// regressions are never contended. See judgedStall for which stall
// decides.
type Rule struct {
	Factor    float64            // default 1.5
	K         float64            // default 3
	MinOthers int                // default 3
	Floors    map[string]float64 // per metric, in its unit; see DefaultFloors
	// MaxStall (0–1) is how much of the wall time a task usually runs
	// unstalled that a change of stall must take or give for a run to be
	// contended (see Contended); 0 judges no contention. Default
	// DefaultMaxStall.
	MaxStall float64
}

// DefaultMaxStall is the default Rule.MaxStall: a task whose extra wait
// for a CPU took more than 10 % of the time it usually runs unstalled
// (so that the wait alone made it more than 1.11 times slower) was
// contended.
const DefaultMaxStall = 0.10

// Contended compares a run's stall share of a task (0–1) with the usual
// share of the other runs: more reports that the run's unstalled share
// 1 − share fell below (1 − maxStall) × (1 − usual), i.e. the extra wait
// alone slowed the task by more than 1 / (1 − maxStall); less that the
// usual unstalled share fell below (1 − maxStall) times the run's (the
// other runs were the slowed ones). Measuring the change against the
// unstalled time, not the wall time, keeps it visible on a node that is
// busy in every run, where shares crowd near 1.
func Contended(share, usual, maxStall float64) (more, less bool) {
	if maxStall <= 0 {
		return false, false
	}
	keep := 1 - maxStall
	return 1-share < keep*(1-usual), 1-usual < keep*(1-share)
}

// stallJudged reports whether a metric's regressions are judged against
// the task's stall (those that other work on the node can cause).
func stallJudged(metric string) bool {
	return metric == MetricDuration || metric == MetricCPUMax || metric == MetricCPUSeconds
}

// DefaultFloors are the smallest increases over the baseline that count:
// 1 s of duration, 20 points of CPU percent, 1 CPU second, 32 MiB of
// memory, 5 processes.
var DefaultFloors = map[string]float64{
	MetricDuration:   1000,
	MetricCPUMax:     20,
	MetricCPUSeconds: 1,
	MetricMemoryMax:  32 << 20,
	MetricPIDsMax:    5,
}

// DefaultRule returns the rule with its default factor 1.5, K 3, three
// other runs at least, DefaultFloors and DefaultMaxStall.
func DefaultRule() Rule {
	return Rule{Factor: 1.5, K: 3, MinOthers: 3, Floors: DefaultFloors, MaxStall: DefaultMaxStall}
}

// madScale makes the MAD an estimate of the standard deviation of normal
// noise.
const madScale = 1.4826

// Check returns the baseline of others and whether value is a regression
// of metric against them. It does not modify others. With fewer than
// MinOthers values the baseline is their median (NaN for none) and
// nothing is a regression.
func (r Rule) Check(metric string, value float64, others []float64) (baseline float64, regressed bool) {
	if len(others) == 0 {
		return math.NaN(), false
	}
	sorted := slices.Clone(others)
	slices.Sort(sorted)
	baseline = median(sorted)
	if len(others) < r.MinOthers {
		return baseline, false
	}
	dev := make([]float64, len(sorted))
	for i, v := range sorted {
		dev[i] = math.Abs(v - baseline)
	}
	slices.Sort(dev)
	spread := madScale * median(dev)
	inc := value - baseline
	return baseline, value >= r.Factor*baseline && inc > r.K*spread && inc >= r.Floors[metric] && inc > 0
}

// median of sorted, which is not empty.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
