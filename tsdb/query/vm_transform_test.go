package query_test

import "testing"

// The MetricsQL transforms, aggregations and syntax the translator adds
// (transform.go, transform_range.go, aggr.go, translate_mql.go) answer
// as VictoriaMetrics answers them. Series arguments are rollups with
// explicit windows: a bare selector ends at a gap sooner in
// VictoriaMetrics than in the Prometheus engine (see
// TestCompareWithVMBaseline). last_over_time keeps the metric name in
// both engines, max_over_time only in VictoriaMetrics.

const (
	cpu2m   = `last_over_time(peakline_cpu_percent[2m])`
	cpuMax  = `max_over_time(peakline_cpu_percent[2m])`
	reqs1m  = `last_over_time(peakline_test_requests_total[1m])`
	cpuGaps = `last_over_time(peakline_cpu_percent[1m])`
	// onePoint is cpuGaps at one step of vmSynthetic's range only.
	onePoint = cpuGaps + ` and on() (vector(time()) == 1772365800)`
	// vm1 leaves out the series that ends before the range does, which
	// VictoriaMetrics' instant queries still carry as empty series (it
	// carries every series with a sample in the lookback before the
	// instant; Peakline's instant answers only those with a value).
	vm1 = `last_over_time(peakline_cpu_percent{job_id="vm1"}[2m])`
	// u1 is the task whose series have no gap, also at the middle
	// instant (which lies in the gap of task u-2).
	u1 = `last_over_time({task_uuid="u-1"}[2m])`
	// req500 has a gap in the range, but none at its instants.
	req500 = `last_over_time(peakline_test_requests_total{code="500"}[1m])`
	// withOutlier adds a series far above the others.
	withOutlier = `union(` + cpu2m + `, label_set(vector(1e6), "task", "outlier"))`
)

func TestCompareWithVMTransforms(t *testing.T) { compareWithVM(t, transformCases) }

var transformCases = []vmCase{
	{query: `range_max(` + cpu2m + `)`},
	{query: `range_min(` + cpu2m + `)`},
	{query: `range_avg(` + cpu2m + `)`},
	{query: `range_sum(` + cpu2m + `)`},
	{query: `range_first(` + cpuGaps + `)`},
	{query: `range_last(` + cpuGaps + `)`},
	{query: `range_median(` + cpu2m + `)`},
	{query: `range_quantile(0.9, ` + cpu2m + `)`},
	{query: `range_stddev(` + u1 + `)`},
	{query: `range_stdvar(` + u1 + `)`},
	{query: `range_mad(` + cpu2m + `)`},
	{query: `range_zscore(` + cpu2m + `)`},
	{query: `range_normalize(` + cpu2m + `)`},
	{query: `range_linear_regression(` + cpu2m + `)`},
	{query: `range_trim_outliers(1, ` + cpu2m + `)`},
	{query: `range_trim_spikes(0.2, ` + cpu2m + `)`},
	{query: `range_trim_zscore(1, ` + cpu2m + `)`},
	{query: `range_max(` + cpuMax + `)`},
	{query: `range_first(` + cpuMax + `)`, keepsName: true},
	{query: `running_sum(` + cpuGaps + `)`},
	{query: `running_max(` + cpuGaps + `)`},
	{query: `running_min(` + cpuGaps + `)`},
	{query: `running_avg(` + cpu2m + `)`},
	{query: `keep_last_value(` + cpuGaps + `)`},
	{query: `keep_next_value(` + cpuGaps + `)`},
	{query: `interpolate(` + cpuGaps + `)`},
	// Series of one point over the range (at vmBase-10m): answered at
	// that point only (keep_next_value and keep_last_value fill around it).
	{query: `interpolate(` + onePoint + `)`},
	{query: `keep_next_value(` + onePoint + `)`},
	{query: `keep_last_value(` + onePoint + `)`},
	{query: `smooth_exponential(` + onePoint + `, 0.5)`},
	{query: `remove_resets(` + onePoint + `)`},
	{query: `remove_resets(` + reqs1m + `)`},
	{query: `smooth_exponential(` + cpu2m + `, 0.5)`},
	{query: `label_set(` + cpu2m + `, "x", "y", "task", "")`},
	{query: `label_del(` + cpu2m + `, "task", "task_uuid")`},
	{query: `label_keep(` + cpu2m + `, "job_id", "counter")`},
	{query: `label_copy(` + cpu2m + `, "task", "t", "nothing", "counter")`},
	{query: `label_move(` + cpu2m + `, "task", "t")`},
	{query: `label_transform(` + cpu2m + `, "task", "\\s+", "_")`},
	{query: `label_value(` + cpu2m + `, "counter")`},
	{query: `label_match(` + cpu2m + `, "task", "install.*")`},
	{query: `label_mismatch(` + cpu2m + `, "task", "install.*")`},
	{query: `label_uppercase(` + cpu2m + `, "task")`},
	{query: `label_lowercase(label_uppercase(` + cpu2m + `, "task"), "task")`},
	{query: `label_map(` + cpu2m + `, "task", "install packages", "install", "x", "y")`},
	{query: `labels_equal(label_copy(` + cpu2m + `, "counter", "c"), "counter", "c")`},
	{query: `sort_by_label(` + cpu2m + `, "task", "job_id")`},
	{query: `sort_by_label_desc(` + cpu2m + `, "counter")`},
	{query: `sort_by_label_numeric(` + cpu2m + `, "counter")`},
	{query: `sort_by_label_numeric_desc(` + cpu2m + `, "counter")`},
	{query: `limit_offset(1, 1, sort_by_label(` + u1 + `, "__name__"))`},
	{query: `union(` + cpu2m + `, ` + reqs1m + `)`},
	{query: `(` + cpu2m + `, ` + reqs1m + `)`},
	{query: `drop_empty_series(` + cpu2m + `)`},
	{query: `label_graphite_group(label_set(` + cpu2m + `, "__name__", "a.b.c"), 0, 2)`},
	{query: `bitmap_and(` + reqs1m + `, 6)`},
	{query: `bitmap_or(` + reqs1m + `, 1)`},
	{query: `bitmap_xor(` + reqs1m + `, 3)`},
	{query: `ru(sum(` + cpu2m + `) by (job_id), 400)`},
	{query: `timezone_offset("Europe/Berlin")`},
	{query: `drop_common_labels(` + u1 + `)`},
	{query: `drop_common_labels(` + u1 + `, ` + req500 + `)`},
}

func TestCompareWithVMAggregates(t *testing.T) { compareWithVM(t, aggregateCases) }

var aggregateCases = []vmCase{
	{query: `median(` + cpu2m + `)`},
	{query: `median(` + cpu2m + `) by (job_id)`},
	{query: `mode(` + cpu2m + `) by (task)`},
	{query: `distinct(` + cpu2m + `) without (counter, task_uuid)`},
	{query: `geomean(` + cpu2m + `) by (job_id)`},
	{query: `mad(` + cpu2m + `)`},
	{query: `sum2(` + cpu2m + `) by (job_id)`},
	{query: `share(` + cpu2m + `) by (job_id)`},
	{query: `zscore(` + cpu2m + `)`},
	{query: `outliers_mad(0.5, ` + cpu2m + `)`},
	{query: `outliers_iqr(` + withOutlier + `)`},
	{query: `outliersk(1, ` + u1 + `)`},
	{query: `outliersk(1, ` + u1 + `) without (counter)`},
	{query: `topk_max(1, ` + u1 + `)`},
	{query: `bottomk_min(1, ` + u1 + `) without (job_id)`},
	{query: `topk_avg(3, last_over_time(peakline_memory_bytes[5s]), "rest") by (job_id)`, span: vmAnsible},
	{query: `quantiles("q", 0.25, 0.75, ` + cpu2m + `) by (job_id)`},
	{query: `topk_max(1, ` + cpu2m + `)`},
	{query: `topk_max(1, ` + cpu2m + `, "other=rest")`},
	{query: `topk_min(1, ` + cpu2m + `) by (job_id)`},
	{query: `topk_avg(2, ` + cpu2m + `)`},
	{query: `topk_median(1, ` + cpu2m + `)`},
	{query: `topk_last(1, ` + cpu2m + `)`},
	{query: `bottomk_max(1, ` + cpu2m + `)`},
	{query: `bottomk_min(1, ` + cpu2m + `, "rest")`},
	{query: `bottomk_avg(1, ` + cpu2m + `) by (job_id)`},
	{query: `bottomk_median(2, ` + cpu2m + `)`},
	{query: `bottomk_last(1, ` + cpu2m + `)`},
	{query: `any(` + cpu2m + `) by (counter, job_id)`},
	{query: `histogram(` + cpu2m + `)`},
	{query: `histogram_quantile(0.9, histogram(` + cpu2m + `))`},
	{query: `histogram_share(50, histogram(` + cpu2m + `))`},
	{query: `histogram_share(20, sum(histogram_over_time(peakline_cpu_percent[5m])) by (vmrange, job_id), "b")`},
	{query: `histogram_quantiles("phi", 0.5, 0.99, histogram(` + cpu2m + `) by (job_id))`},
	{query: `prometheus_buckets(histogram_over_time(peakline_cpu_percent[5m]))`},
	{query: `histogram_quantile(0.5, sum(histogram_over_time(peakline_cpu_percent[5m])) by (vmrange))`},
	{query: `histogram(` + withOutlier + `) by (job_id)`},
	{query: `histogram(last_over_time(peakline_memory_bytes[5s])) by (job_id)`, span: vmAnsible},
	// Range transforms over rollups without a window (the step's), over
	// samples 0.5-1.5s apart at a 2s step, as Grafana asks for them.
	{query: `range_max(last_over_time(peakline_cpu_percent))`, span: vmAnsible},
	{query: `running_sum(max_over_time(peakline_pids))`, span: vmAnsible},
	{query: `interpolate(last_over_time(peakline_memory_bytes))`, span: vmAnsible},
	{query: `label_set(time(), "a", "b")`},
	{query: `limitk(5, ` + cpu2m + `)`},
	{query: `sum(` + cpu2m + `, ` + reqs1m + `) by (job_id)`},
}

func TestCompareWithVMSyntax(t *testing.T) { compareWithVM(t, syntaxCases) }

var syntaxCases = []vmCase{
	{query: req500 + ` default 0`},
	{query: cpuGaps + ` default sum(` + cpu2m + `) by (job_id, counter, task_uuid, task)`},
	{query: cpuGaps + ` if ` + cpuGaps + ` > 50`},
	{query: cpuGaps + ` ifnot ` + cpuGaps + ` > 50`},
	{query: cpuGaps + ` if 1`},
	{query: `sum(` + cpu2m + `) by (job_id) limit 5`},
	{query: `topk_max(1, ` + cpu2m + `) by (job_id) limit 5`},
	{query: `share(` + cpu2m + `) by (job_id) limit 2`},
	{query: `last_over_time({__name__="peakline_pids" or task="restart service"}[2m])`},
	{query: `count_over_time({job_id="vm2" or code="500"}[5m])`},
	{query: cpu2m + ` * on(job_id, counter) group_left(task_uuid) prefix "mem_" ` + `label_del(last_over_time(peakline_memory_bytes[2m]), "task")`},
	{query: cpu2m + ` or 1`},
	{query: `(` + cpu2m + ` + 1) keep_metric_names`},
	{query: `(` + u1 + ` * on(task_uuid) group_left() ` + `last_over_time(peakline_pids{task_uuid="u-1"}[2m])) keep_metric_names`},
	{query: `abs(` + cpu2m + ` - 100) keep_metric_names`},
	{query: `(last_over_time(peakline_memory_bytes[2m]) / on(task_uuid) last_over_time(peakline_pids[2m])) keep_metric_names`},
	{query: `(last_over_time(peakline_memory_bytes[2m]) > bool on(task_uuid) last_over_time(peakline_pids[2m])) keep_metric_names`},
	{query: `sum(` + cpu2m + `) by (job_id) offset 5m`},
	{query: `(` + cpuGaps + ` * 2) offset 90s`},
	{query: `sum(` + cpu2m + `) by (job_id) @ end()`},
	{query: `sum(` + cpu2m + `) by (job_id) @ (end() - 10m)`},
	{query: `max_over_time(peakline_test_requests_total[5m] @ (start() + 20m))`, keepsName: true},
	{query: cpuGaps + ` + on(job_id, counter) fill(0) last_over_time(peakline_memory_bytes[1m])`},
	{query: `last_over_time(peakline_pids[1m]) - ignoring(task, task_uuid) fill_left(1000) ` + cpuGaps},
	{query: cpuGaps + ` / on(job_id, counter) fill_right(2) last_over_time(peakline_pids[1m])`},
	{query: cpuGaps + ` > on(job_id, counter) fill_right(50) last_over_time(peakline_pids[1m])`},
	{query: cpuGaps + ` > bool on(job_id, counter) fill(3) last_over_time(peakline_pids[1m])`},
}

// The queries of docs/ and of the Grafana dashboard's task table.
func TestCompareWithVMDashboard(t *testing.T) {
	compareWithVM(t, []vmCase{
		{query: `max by (counter, task, task_uuid) (tmax_over_time(peakline_memory_bytes{job_id="demo2"}[20s]) * 1000)`, span: vmAnsible},
		{query: `max by (counter, task, task_uuid) (tmax_over_time(peakline_cpu_percent{job_id="demo2"}[20s]) * 1000)`, span: vmAnsible},
		{query: `max by (task) (tmax_over_time(peakline_memory_bytes{job_id="demo2"}[10s]))`, span: vmAnsible},
		{query: `range_max(max_over_time(peakline_cpu_percent{job_id="demo2"}[5s]))`, span: vmAnsible},
	})
}
