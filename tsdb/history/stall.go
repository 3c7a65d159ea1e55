package history

import "math"

// Stall signals: each task's share of its wall time spent stalled, as
// the collector measured it (see package tsdb's stall resources).
const (
	StallCPU       = "cpu"       // the job's tasks waited for a CPU
	StallMemory    = "memory"    // the job's tasks waited on memory
	StallThrottled = "throttled" // the job's CPU limit held it back
	StallNodeCPU   = "node_cpu"  // some task on the node waited for a CPU
	// StallNodeLoad is no share: the node's mean 1-minute load average
	// per CPU over the task, measured where the kernel has no PSI.
	StallNodeLoad = "node_load"
)

// stallOf maps a stall resource's wire name to its signal.
var stallOf = map[string]string{
	"cpu_stall":      StallCPU,
	"memory_stall":   StallMemory,
	"cpu_throttled":  StallThrottled,
	"node_cpu_stall": StallNodeCPU,
	"node_load":      StallNodeLoad,
}

// StallShareSignal returns the signal of a stall resource (its wire name,
// "cpu_stall") whose samples are seconds stalled, so that a share of wall
// time can be made of them; false for node_load and other resources.
func StallShareSignal(resource string) (string, bool) {
	sig, ok := stallOf[resource]
	return sig, ok && sig != StallNodeLoad
}

// StallColumn is one stall resource of a job: its wire name, its samples'
// values and the index of the task each belongs to.
type StallColumn struct {
	Resource string
	Vs       []float64
	Task     []int32
}

// Waited returns each task's stall figures (nil for a task with none):
// for the seconds-valued resources, the sum of the task's samples (the
// seconds stalled during the intervals the task owns) over its wall time
// durMs[k], at most 1; for node_load, the mean of its samples. A task of
// zero duration gets no share. Columns of other resources are ignored.
func Waited(cols []StallColumn, durMs []int64) []map[string]float64 {
	out := make([]map[string]float64, len(durMs))
	sum := make([]float64, len(durMs))
	n := make([]int, len(durMs))
	for _, c := range cols {
		sig, ok := stallOf[c.Resource]
		if !ok {
			continue
		}
		clear(sum)
		clear(n)
		for i, v := range c.Vs {
			if k := c.Task[i]; k >= 0 && int(k) < len(durMs) {
				sum[k] += v
				n[k]++
			}
		}
		for k := range durMs {
			if n[k] == 0 {
				continue
			}
			var v float64
			if sig == StallNodeLoad {
				v = sum[k] / float64(n[k])
			} else {
				if durMs[k] <= 0 {
					continue
				}
				v = min(sum[k]/(float64(durMs[k])/1000), 1)
			}
			if out[k] == nil {
				out[k] = map[string]float64{}
			}
			out[k][sig] = round4(v)
		}
	}
	return out
}

// judgedStall is the share that decides whether a task was contended:
// the job's own CPU stall, or where the run has none, the node's (its
// CPU pressure, or without PSI 1 − 1/load per CPU: the share of time a
// runnable task waits when the load is spread evenly over the CPUs).
// ok is false without any figure.
func judgedStall(w map[string]float64) (signal string, share float64, ok bool) {
	if v, ok := w[StallCPU]; ok {
		return StallCPU, v, true
	}
	if v, ok := w[StallNodeCPU]; ok {
		return StallNodeCPU, v, true
	}
	if l, ok := w[StallNodeLoad]; ok {
		return StallNodeLoad, max(0, 1-1/math.Max(l, 1e-9)), true
	}
	return "", 0, false
}

// round4 rounds a share to four decimals (a hundredth of a percent).
func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }
