package query_test

import "testing"

// Every MetricsQL rollup function the Prometheus engine lacks answers as
// VictoriaMetrics does over the same samples.
func TestRollupFunctionsMatchVM(t *testing.T) {
	compareWithVM(t, rollupCases)
}

// rollupCases has a case for each rollup function rollup.go adds (see
// TestRollupCoverage).
var rollupCases = []vmCase{
	{query: `median_over_time(` + vmCPU + `[3m])`, keepsName: true},
	{query: `mad_over_time(` + vmCPU + `[3m])`},
	{query: `tmax_over_time(` + vmCPU + `[5m])`},
	{query: `tmin_over_time(` + vmCPU + `[5m])`},
	{query: `tmax_over_time(` + vmCPU + `{task="burn some cpu"}[3s])`, span: vmAnsible},
	{query: `tfirst_over_time(` + vmMem + `[2m])`},
	{query: `tlast_over_time(` + vmMem + `[2m])`},
	{query: `range_over_time(` + vmCPU + `[4m])`},
	{query: `distinct_over_time(` + vmPIDs + `[2m])`},
	{query: `sum2_over_time(` + vmCPU + `[2m])`},
	{query: `geomean_over_time(` + vmPIDs + `[3m])`, keepsName: true},
	{query: `default_rollup(` + vmCPU + `[2m])`, keepsName: true},
	{query: `rate_over_sum(` + vmPIDs + `[2m])`},
	{query: `outlier_iqr_over_time(` + vmPIDs + `[5m])`},
	{query: `duration_over_time(` + vmCPU + `[5m], 12s)`},
	{query: `count_eq_over_time(` + vmPIDs + `[3m], 2)`},
	{query: `count_ne_over_time(` + vmPIDs + `[3m], 2)`},
	{query: `count_gt_over_time(` + vmCPU + `[3m], 100)`},
	{query: `count_le_over_time(` + vmCPU + `[3m], 50)`},
	{query: `share_eq_over_time(` + vmPIDs + `[3m], 1)`},
	{query: `share_gt_over_time(` + vmCPU + `[3m], 90)`},
	{query: `share_le_over_time(` + vmCPU + `[3m], 25)`},
	{query: `sum_eq_over_time(` + vmPIDs + `[3m], 3)`},
	{query: `sum_gt_over_time(` + vmCPU + `[3m], 100)`},
	{query: `sum_le_over_time(` + vmCPU + `[3m], 50)`},
	{query: `hoeffding_bound_lower(0.9, ` + vmCPU + `[3m])`, keepsName: true},
	{query: `hoeffding_bound_upper(0.9, ` + vmCPU + `[3m])`, keepsName: true},
	{query: `delta_prometheus(` + vmMem + `[3m])`},
	{query: `increase_prometheus(` + vmReqs + `[3m])`},
	{query: `rate_prometheus(` + vmReqs + `[3m])`},
	{query: `changes_prometheus(` + vmPIDs + `[3m])`},
	{query: `ascent_over_time(` + vmCPU + `[3m])`},
	{query: `descent_over_time(` + vmCPU + `[3m])`},
	{query: `increases_over_time(` + vmPIDs + `[3m])`},
	{query: `decreases_over_time(` + vmPIDs + `[3m])`},
	{query: `increase_pure(` + vmReqs + `[3m])`},
	{query: `lag(` + vmCPU + `[1m])`},
	{query: `lifetime(` + vmCPU + `[10m])`},
	{query: `scrape_interval(` + vmCPU + `[3m])`},
	{query: `tlast_change_over_time(` + vmPIDs + `[2m])`},
	{query: `deriv_fast(` + vmMem + `[2m])`},
	{query: `ideriv(` + vmMem + `[2m])`},
	{query: `integrate(` + vmCPU + `[2m])`},
	{query: `mode_over_time(` + vmPIDs + `[2m])`, keepsName: true},
	{query: `zscore_over_time(` + vmCPU + `[5m])`},
	{query: `holt_winters(` + vmMem + `[5m], 0.5, 0.3)`, keepsName: true},
	{query: `quantiles_over_time("phi", 0.1, 0.5, 0.99, ` + vmCPU + `[3m])`, keepsName: true},
	{query: `aggr_over_time(("min_over_time", "tmax_over_time", "median_over_time"), ` + vmCPU + `[3m])`},
	{query: `aggr_over_time("last_over_time", ` + vmPIDs + `[2m])`},
	{query: `rollup(` + vmCPU + `[3m])`, keepsName: true},
	{query: `rollup(` + vmCPU + `[3m], "max")`, keepsName: true},
	{query: `rollup_delta(` + vmMem + `[3m])`},
	{query: `rollup_increase(` + vmReqs + `[3m])`},
	{query: `rollup_deriv(` + vmMem + `[3m], "avg")`},
	{query: `rollup_rate(` + vmReqs + `[3m])`},
	{query: `rollup_scrape_interval(` + vmCPU + `[3m])`},
	{query: `rollup_candlestick(` + vmCPU + `[3m])`, keepsName: true},
	{query: `histogram_over_time(` + vmCPU + `[3m])`},
	{query: `histogram_over_time(` + vmPIDs + `[5m])`},
	{query: `histogram_over_time(` + vmCPU + `{task="burn some cpu"}[3s])`, span: vmAnsible},
	{query: `count_values_over_time("value", ` + vmPIDs + `[3m])`},
	{query: `timestamp_with_name(` + vmPIDs + `[1m])`},
	{query: `aggr_over_time(("iqr_over_time", "lag", "tmin_over_time"), ` + vmPIDs + `[2m])`},
}

// Offsets, @, subqueries, default windows and keep_metric_names reach the
// new functions as they reach PromQL's.
func TestRollupModifiersMatchVM(t *testing.T) {
	compareWithVM(t, []vmCase{
		{query: `lag(peakline_pids[1m] offset 5m)`},
		{query: `increase_pure(peakline_test_requests_total[3m] offset 2m)`},
		{query: `tmax_over_time(peakline_cpu_percent[3m] offset 1m)`},
		{query: `integrate(peakline_pids[2m] @ end())`},
		{query: `tmax_over_time(peakline_cpu_percent[5m] @ start())`},
		{query: `lifetime(peakline_pids[5m] @ 1772365800)`},
		{query: `tmax_over_time(max_over_time(peakline_cpu_percent[1m])[5m:1m])`},
		{query: `ascent_over_time(sum(peakline_pids)[5m:30s])`},
		{query: `integrate(sum(peakline_memory_bytes)[4m:1m])`},
		{query: `max_over_time(increase_pure(peakline_test_requests_total[1m])[10m:1m])`},
		{query: `max_over_time(lifetime(peakline_pids[2m])[10m:30s])`},
		{query: `max_over_time(tmax_over_time(peakline_pids[1m])[10m:1m])`},
		{query: `tmax_over_time(peakline_cpu_percent)`},
		{query: `lag(peakline_pids)`},
		{query: `increase_pure(peakline_test_requests_total)`},
		{query: `tmax_over_time(peakline_cpu_percent[5m]) keep_metric_names`},
		{query: `rollup(peakline_pids[5m]) keep_metric_names`},
		{query: `quantiles_over_time("q", 0.5, 0.9, peakline_pids[5m]) keep_metric_names`},
		{query: `sum(tmax_over_time(peakline_cpu_percent[5m])) by (job_id)`},
		{query: `max(tmax_over_time(peakline_cpu_percent{task="burn some cpu"}[2s])) by (task)`, span: vmAnsible},
	})
}
