package query_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/peakline/peakline/tsdb/query"
)

// metricsqlRollups is the metricsql package's own list of rollup
// functions (rollupFuncs in its rollup.go, v0.87.3).
var metricsqlRollups = strings.Fields(`
absent_over_time aggr_over_time ascent_over_time avg_over_time changes
changes_prometheus count_eq_over_time count_gt_over_time count_le_over_time
count_ne_over_time count_over_time count_values_over_time decreases_over_time
default_rollup delta delta_prometheus deriv deriv_fast descent_over_time
distinct_over_time duration_over_time first_over_time geomean_over_time
histogram_over_time hoeffding_bound_lower hoeffding_bound_upper holt_winters
idelta ideriv increase increase_prometheus increase_pure increases_over_time
integrate irate lag last_over_time lifetime mad_over_time max_over_time
median_over_time min_over_time mode_over_time outlier_iqr_over_time
predict_linear present_over_time quantile_over_time quantiles_over_time
range_over_time rate rate_prometheus rate_over_sum resets rollup
rollup_candlestick rollup_delta rollup_deriv rollup_increase rollup_rate
rollup_scrape_interval scrape_interval share_gt_over_time share_le_over_time
share_eq_over_time stale_samples_over_time stddev_over_time stdvar_over_time
sum_eq_over_time sum_gt_over_time sum_le_over_time sum_over_time
sum2_over_time tfirst_over_time timestamp timestamp_with_name
tlast_change_over_time tlast_over_time tmax_over_time tmin_over_time
zscore_over_time`)

// promqlRollups are the rollups PromQL has itself: the engine's own
// implementation answers them (with Prometheus' semantics).
var promqlRollups = map[string]bool{
	"absent_over_time": true, "avg_over_time": true, "changes": true, "count_over_time": true,
	"delta": true, "deriv": true, "first_over_time": true, "idelta": true, "increase": true,
	"irate": true, "last_over_time": true, "max_over_time": true, "min_over_time": true,
	"predict_linear": true, "present_over_time": true, "quantile_over_time": true, "rate": true,
	"resets": true, "stddev_over_time": true, "stdvar_over_time": true, "sum_over_time": true,
	"timestamp": true,
}

// leftOutRollups are refused, and why (docs/grafana.md lists them).
var leftOutRollups = map[string]string{
	// The engine hides staleness markers from functions, and Peakline's
	// own series never store them.
	"stale_samples_over_time": "staleness markers",
}

// Every rollup of metricsql is PromQL's own, added with a case compared
// with VictoriaMetrics, or left out with a reason and refused as bad_data
// naming it.
func TestRollupCoverage(t *testing.T) {
	if len(metricsqlRollups) != 80 {
		t.Fatalf("%d rollups listed, metricsql v0.87.3 has 80", len(metricsqlRollups))
	}
	store := openStore(t, testBase, labels.FromStrings("__name__", "a", "job_id", "1"))
	e := query.New(store.Queryable(), query.Options{})
	args := map[string]string{
		"aggr_over_time": `("max_over_time", "lag"), a[5m]`, "count_values_over_time": `"v", a[5m]`,
		"quantiles_over_time": `"phi", 0.5, 0.9, a[5m]`, "quantile_over_time": `0.5, a[5m]`,
		"hoeffding_bound_lower": `0.9, a[5m]`, "hoeffding_bound_upper": `0.9, a[5m]`,
		"holt_winters": `a[5m], 0.5, 0.5`, "predict_linear": `a[5m], 60`,
	}
	added := 0
	for _, name := range metricsqlRollups {
		a, ok := args[name]
		switch {
		case ok:
		case strings.HasPrefix(name, "count_") && name != "count_over_time",
			strings.HasPrefix(name, "share_"), strings.HasPrefix(name, "sum_") && name != "sum_over_time",
			name == "duration_over_time":
			a = `a[5m], 1`
		default:
			a = `a[5m]`
		}
		q := name + "(" + a + ")"
		_, err := e.Translate(context.Background(), q, testBase.Add(-10*time.Minute), testBase, time.Minute)
		if why, ok := leftOutRollups[name]; ok {
			checkLeftOut(t, q, name, why, err)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", q, err)
			continue
		}
		if promqlRollups[name] {
			continue
		}
		added++
		found := false
		for _, c := range rollupCases {
			if strings.Contains(c.query, name+"(") || strings.Contains(c.query, `"`+name+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no case in rollupCases compares it with VictoriaMetrics", name)
		}
	}
	// docs/grafana.md's table counts these.
	if want := 80 - len(promqlRollups) - len(leftOutRollups); added != want {
		t.Errorf("%d rollups added, want %d", added, want)
	}
}

// checkLeftOut checks what translating q, a call of the left-out function
// name, answered: a bad_data error naming the function; why, the reason
// the function is left out, must be given.
func checkLeftOut(t *testing.T, q, name, why string, err error) {
	t.Helper()
	var qe *query.Error
	if !errors.As(err, &qe) || qe.Type != query.ErrBadData || !strings.Contains(err.Error(), `"`+name+`"`) || why == "" {
		t.Errorf("%s (left out): %v, want bad_data naming it", q, err)
	}
}
