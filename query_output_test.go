package main

import (
	"bytes"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
)

// The same answer prints the same, whether the embedded engine (query
// --data) or the Prometheus API (query --server) gave it: times in UTC
// to the millisecond, values in full.
func TestQueryOutputSameForBothEngines(t *testing.T) {
	ls := labels.FromStrings("__name__", "peakline_cpu_percent", "job_id", "demo2", "task", "burn some cpu")
	metric := model.Metric{"__name__": "peakline_cpu_percent", "job_id": "demo2", "task": "burn some cpu"}
	const t0 = 1796009976236
	f := func(name string, fromData, fromServer queryOut, want string, wantSeries int) {
		t.Helper()
		for engine, q := range map[string]queryOut{"--data": fromData, "--server": fromServer} {
			var b bytes.Buffer
			n, err := q.write(&b)
			if err != nil || b.String() != want || n != wantSeries {
				t.Errorf("%s from %s: %d series %q (%v), want %d series %q", name, engine, n, b.String(), err, wantSeries, want)
			}
		}
	}
	f("vector",
		queryOutOfPromQL(promql.Vector{{Metric: ls, T: t0, F: 93.46}}),
		queryOutOfModel(model.Vector{{Metric: metric, Timestamp: t0, Value: 93.46}}),
		`peakline_cpu_percent{job_id="demo2", task="burn some cpu"} => 93.46 @ 2026-11-30T03:39:36.236Z`+"\n", 1)
	f("matrix",
		queryOutOfPromQL(promql.Matrix{{Metric: ls, Floats: []promql.FPoint{{T: t0, F: 93.46}, {T: t0 + 250, F: 102.17}}}}),
		queryOutOfModel(model.Matrix{{Metric: metric, Values: []model.SamplePair{{Timestamp: t0, Value: 93.46}, {Timestamp: t0 + 250, Value: 102.17}}}}),
		`peakline_cpu_percent{job_id="demo2", task="burn some cpu"}`+"\n  2026-11-30T03:39:36.236Z  93.46\n  2026-11-30T03:39:36.486Z  102.17\n", 1)
	f("scalar",
		queryOutOfPromQL(promql.Scalar{T: t0, V: 2}),
		queryOutOfModel(&model.Scalar{Timestamp: t0, Value: 2}),
		"2 @ 2026-11-30T03:39:36.236Z\n", 1)
	f("nothing",
		queryOutOfPromQL(promql.Vector{}),
		queryOutOfModel(model.Vector{}),
		"", 0)
}
