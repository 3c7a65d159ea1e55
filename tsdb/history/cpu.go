package history

import "slices"

// CPUSeconds integrates a CPU column (percent of one CPU; ts in unix ms,
// strictly increasing; task[i] the index of the task sample i belongs
// to) into CPU seconds per task, dst[k] for task k < nTasks (dst is
// grown to nTasks, zeroed, and returned).
//
// A CPU sample is the usage over the interval that ends at it (as the
// cgroup_perf_recap plugin and the live sampler compute it), so sample
// i adds vs[i]/100 × (ts[i] − ts[i−1]) seconds to its task. The first
// sample counts the column's median interval; an interval longer than
// four median intervals (the collector was paused) counts four, so a gap
// does not turn one sample into minutes of CPU. The first sample of a
// task (its task differs from the previous sample's) counts at most one
// median interval: the cgroup_perf_recap plugin starts each task's
// sampling afresh, so that sample is the usage over one poll interval
// after the task started, not since the previous task's last sample
// (counting that gap over-counted a task's CPU seconds by up to half on
// real runs; a live sampler's interval at a task change is one interval
// anyway).
func CPUSeconds(dst []float64, ts []int64, vs []float64, task []int32, nTasks int) []float64 {
	dst = slices.Grow(dst[:0], nTasks)[:nTasks]
	clear(dst)
	if len(ts) == 0 {
		return dst
	}
	typical := MedianInterval(ts)
	for i, v := range vs {
		k := task[i]
		if k < 0 || int(k) >= nTasks {
			continue
		}
		dt := typical
		if i > 0 {
			limit := 4 * typical
			if task[i] != task[i-1] {
				limit = typical
			}
			dt = min(ts[i]-ts[i-1], limit)
		}
		dst[k] += v / 100 * float64(dt) / 1000
	}
	return dst
}

// MedianInterval is the median of the intervals between consecutive
// times; 0 for fewer than two.
func MedianInterval(ts []int64) int64 {
	if len(ts) < 2 {
		return 0
	}
	d := make([]int64, len(ts)-1)
	for i := range d {
		d[i] = ts[i+1] - ts[i]
	}
	slices.Sort(d)
	return d[len(d)/2]
}
