package query_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/peakline/peakline/tsdb/query"
)

// metricsqlTransforms and metricsqlAggregates are the metricsql
// package's own lists (transformFuncs in its transform.go, aggrFuncs in
// its aggr.go, v0.87.3; the transforms without "", union's other name).
var (
	metricsqlTransforms = strings.Fields(`
abs absent acos acosh asin asinh atan atanh bitmap_and bitmap_or bitmap_xor
buckets_limit ceil clamp clamp_max clamp_min cos cosh day_of_month
day_of_week day_of_year days_in_month deg drop_common_labels
drop_empty_series end exp floor histogram_avg histogram_fraction
histogram_quantile histogram_quantiles histogram_share histogram_stddev
histogram_stdvar hour interpolate keep_last_value keep_next_value label_copy
label_del label_graphite_group label_join label_keep label_lowercase
label_map label_match label_mismatch label_move label_replace label_set
label_transform label_uppercase label_value labels_equal limit_offset ln
log2 log10 minute month now pi prometheus_buckets rad rand rand_exponential
rand_normal range_avg range_first range_last range_linear_regression
range_mad range_max range_min range_normalize range_quantile range_stddev
range_stdvar range_sum range_trim_outliers range_trim_spikes
range_trim_zscore range_zscore remove_resets round running_avg running_max
running_min running_sum scalar sgn sin sinh smooth_exponential sort
sort_by_label sort_by_label_desc sort_by_label_numeric
sort_by_label_numeric_desc sort_desc sqrt start step tan tanh time timestamp
timezone_offset union vector year`)
	metricsqlAggregates = strings.Fields(`
any avg bottomk bottomk_avg bottomk_max bottomk_median bottomk_last
bottomk_min count count_values distinct geomean group histogram limitk mad
max median min mode outliers_iqr outliers_mad outliersk quantile quantiles
share stddev stdvar sum sum2 topk topk_avg topk_max topk_median topk_last
topk_min zscore`)
)

// promqlTransforms and promqlAggregates are those PromQL has itself: the
// engine's own implementation answers them, with Prometheus' semantics.
// (start, end and step are numbers in the translator; sort_by_label and
// sort_by_label_desc are registered with VictoriaMetrics' ordering.)
var (
	promqlTransforms = strings.Fields(`
abs absent acos acosh asin asinh atan atanh ceil clamp clamp_max clamp_min
cos cosh day_of_month day_of_week day_of_year days_in_month deg exp floor
histogram_avg histogram_fraction histogram_quantile histogram_stddev
histogram_stdvar hour label_join label_replace ln log2 log10 minute month pi
rad round scalar sgn sin sinh sort sort_desc sqrt tan tanh time timestamp
vector year`)
	promqlAggregates = strings.Fields(`
avg bottomk count count_values group max min quantile stddev stdvar sum topk`)
)

// leftOut are refused, and why (docs/grafana.md lists them).
var leftOut = map[string]string{
	"buckets_limit":    "it thins histogram buckets by their hits over the range: over VictoriaMetrics' buckets that nests functions of the whole range, which the engine evaluates over a shifted window",
	"rand":             "random numbers no comparison can hold to VictoriaMetrics'",
	"rand_exponential": "random numbers no comparison can hold to VictoriaMetrics'",
	"rand_normal":      "random numbers no comparison can hold to VictoriaMetrics'",
}

// Every transform and aggregation of metricsql is PromQL's own, added
// with a case compared with VictoriaMetrics, or left out with a reason
// and refused as bad_data naming it; docs/grafana.md's table counts them.
func TestTransformAndAggregateCoverage(t *testing.T) {
	store := openStore(t, testBase, labels.FromStrings("__name__", "a", "job_id", "1"))
	e := query.New(store.Queryable(), query.Options{})
	args := map[string]string{
		"start": "", "end": "", "step": "", "now": "", "pi": "", "time": "",
		"rand": "", "rand_exponential": "", "rand_normal": "", "timezone_offset": `"UTC"`,
		"limit_offset": "1, 0, a", "label_match": `a, "x", "y"`, "label_mismatch": `a, "x", "y"`,
		"label_transform": `a, "x", "y", "z"`, "label_value": `a, "x"`, "histogram_quantile": "0.5, a",
		"histogram_fraction": "0, 1, a", "histogram_quantiles": `"phi", 0.5, a`, "histogram_share": "1, a",
		"buckets_limit": "3, a", "bitmap_and": "a, 1", "bitmap_or": "a, 1", "bitmap_xor": "a, 1",
		"smooth_exponential": "a, 0.5", "range_quantile": "0.5, a", "range_trim_outliers": "1, a",
		"range_trim_spikes": "0.1, a", "range_trim_zscore": "1, a", "clamp": "a, 0, 1",
		"clamp_max": "a, 1", "clamp_min": "a, 1", "round": "a", "label_graphite_group": "a, 0",
		"quantile": "0.5, a", "quantiles": `"phi", 0.5, a`, "count_values": `"v", a`, "topk": "1, a",
		"bottomk": "1, a", "limitk": "1, a", "outliers_mad": "1, a", "outliersk": "1, a",
	}
	for _, prefix := range []string{"topk_", "bottomk_"} {
		for _, s := range []string{"avg", "max", "median", "last", "min"} {
			args[prefix+s] = "1, a"
		}
	}
	f := func(kind string, names, promql []string, total int, cases ...[]vmCase) {
		t.Helper()
		if len(names) != total {
			t.Fatalf("%d %s listed, metricsql v0.87.3 has %d", len(names), kind, total)
		}
		own := map[string]bool{}
		for _, n := range promql {
			own[n] = true
		}
		added, left := 0, 0
		for _, name := range names {
			a, ok := args[name]
			if !ok {
				a = "a"
			}
			q := name + "(" + a + ")"
			_, err := e.Translate(context.Background(), q, testBase.Add(-10*time.Minute), testBase, time.Minute)
			if why, ok := leftOut[name]; ok {
				left++
				checkLeftOut(t, q, name, why, err)
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", q, err)
				continue
			}
			if own[name] {
				continue
			}
			added++
			found := false
			for _, cs := range cases {
				for _, c := range cs {
					found = found || strings.Contains(c.query, name+"(")
				}
			}
			// start(), end() and step() are numbers; docs/grafana.md's
			// examples and the translation tests pin them.
			if !found && name != "start" && name != "end" && name != "step" && name != "now" {
				t.Errorf("%s: no case compares it with VictoriaMetrics", name)
			}
		}
		if added+left+len(promql) != total {
			t.Errorf("%s: %d added, %d left out, %d PromQL's own: not %d", kind, added, left, len(promql), total)
		}
	}
	f("transforms", metricsqlTransforms, promqlTransforms, 112, transformCases, syntaxCases, aggregateCases)
	f("aggregates", metricsqlAggregates, promqlAggregates, 37, aggregateCases)
}
