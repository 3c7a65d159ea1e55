package tsdb

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
)

// batchSeries is a batch as the labeled series remote write carries.
func batchSeries(b *Batch) []LabeledSeries {
	rows, _ := batchRows(b, 0)
	out := make([]LabeledSeries, len(rows))
	for i, r := range rows {
		out[i] = LabeledSeries{Labels: r.ls, Ts: r.ts, Vs: r.vs}
	}
	return out
}

// A job written as labeled series reads back like the same job appended
// as a batch, through the same duplicate rule, and drops the cache of
// exactly the jobs it touched.
func TestAppendSeriesLikeAppend(t *testing.T) {
	ctx := context.Background()
	start := testNow.Add(-time.Hour).UnixMilli()
	batched := openAt(t, t.TempDir(), Options{})
	labeled := openAt(t, t.TempDir(), Options{})
	for _, id := range []string{"a", "b"} {
		if _, err := batched.Append(ctx, exampleBatch(id, start)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := labeled.AppendSeries(ctx, append(batchSeries(exampleBatch("a", start)), batchSeries(exampleBatch("b", start))...))
	if want := (WriteResult{Samples: 144, Records: 8}); err != nil || res != want {
		t.Fatalf("AppendSeries = %+v, %v, want %+v", res, err, want)
	}
	for _, id := range []string{"a", "b"} {
		want, err := batched.ReadJob(ctx, id, minTime, maxTime)
		if err != nil {
			t.Fatal(err)
		}
		got, err := labeled.ReadJob(ctx, id, minTime, maxTime)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("job %s written as series:\n%+v\nappended:\n%+v", id, got, want)
		}
	}
	// Job b cached; a write to a alone leaves it cached.
	decodedBefore := labeled.cache.decoded.Load()
	again := batchSeries(exampleBatch("a", start))
	again[0].Vs = append([]float64{}, again[0].Vs...)
	again[0].Vs[3] = -1 // a conflict: the stored value stays
	res, err = labeled.AppendSeries(ctx, again)
	if want := (WriteResult{Duplicates: 71, Conflicts: 1}); err != nil || res != want {
		t.Fatalf("AppendSeries again = %+v, %v, want %+v", res, err, want)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := labeled.ReadJob(ctx, id, minTime, maxTime); err != nil {
			t.Fatal(err)
		}
	}
	if got := labeled.cache.decoded.Load() - decodedBefore; got != 1 {
		t.Fatalf("decoded %d jobs after writing a, want 1 (a only)", got)
	}
	job, _ := labeled.ReadJob(ctx, "a", minTime, maxTime)
	if got := job.Columns[0].Vs[3]; got != 103 {
		t.Fatalf("cpu[3] of a = %v, want the stored 103", got)
	}
}

// Peakline series hold finite floats: a staleness marker is dropped and
// counted, another non-finite value refuses the write; other metrics keep
// Prometheus semantics. Bad labels refuse the whole write.
func TestAppendSeriesValues(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, t.TempDir(), Options{})
	t0 := testNow.Add(-time.Hour).UnixMilli()
	stale := math.Float64frombits(value.StaleNaN)
	cpu := labels.FromStrings("__name__", MetricCPU, LabelJob, "j", LabelCounter, "3", LabelTaskUUID, "u", LabelTask, "t")
	other := labels.FromStrings("__name__", "up", "instance", "x")
	res, err := s.AppendSeries(ctx, []LabeledSeries{
		{Labels: cpu, Ts: []int64{t0, t0 + 1, t0 + 2}, Vs: []float64{5, 6, stale}},
		{Labels: other, Ts: []int64{t0, t0 + 1, t0 + 2}, Vs: []float64{1, math.Inf(1), stale}},
	})
	if want := (WriteResult{Samples: 5, Stale: 1}); err != nil || res != want {
		t.Fatalf("AppendSeries = %+v, %v, want %+v", res, err, want)
	}
	// Sent again: other's +Inf and marker are duplicates by their bits.
	res, err = s.AppendSeries(ctx, []LabeledSeries{{Labels: other, Ts: []int64{t0, t0 + 1, t0 + 2}, Vs: []float64{1, math.Inf(1), stale}}})
	if want := (WriteResult{Duplicates: 3}); err != nil || res != want {
		t.Fatalf("AppendSeries again = %+v, %v, want %+v", res, err, want)
	}
	f := func(series []LabeledSeries, reason, want string) {
		t.Helper()
		_, err := s.AppendSeries(ctx, series)
		var ref *Refusal
		if !errors.As(err, &ref) || !errors.Is(err, ErrInvalid) || ref.Reason != reason || ref.Msg != want {
			t.Fatalf("AppendSeries = %v, want %s: %s", err, reason, want)
		}
	}
	okSeries := LabeledSeries{Labels: other, Ts: []int64{t0 + 10}, Vs: []float64{1}}
	f([]LabeledSeries{okSeries, {Labels: cpu, Ts: []int64{t0 + 10}, Vs: []float64{math.Inf(1)}}}, ReasonNonFinite,
		"series[1].v[0]: peakline_cpu_percent must be a finite number, got +Inf")
	f([]LabeledSeries{okSeries, {Labels: cpu, Ts: []int64{t0 + 11, t0 + 10}, Vs: []float64{1, 2}}}, ReasonOutOfOrder,
		"series[1].t[1]: times must strictly increase, got "+itoa(t0+10)+" after "+itoa(t0+11))
	f([]LabeledSeries{{Labels: labels.FromStrings("__name__", MetricPIDs, LabelJob, "j", LabelCounter, "-1"), Ts: []int64{t0}, Vs: []float64{1}}}, ReasonPeaklineLabels,
		`series[0].labels: {__name__="peakline_pids", counter="-1", job_id="j"}: counter must be a decimal number >= 0, got "-1"`)
	f([]LabeledSeries{okSeries, {Labels: other, Ts: []int64{t0 * 1000}, Vs: []float64{1}}}, ReasonNotMilliseconds,
		"series[1].t[0]: "+itoa(t0*1000)+" looks like microseconds; send unix milliseconds")
	res, err = s.AppendSeries(ctx, []LabeledSeries{okSeries})
	if want := (WriteResult{Samples: 1}); err != nil || res != want {
		t.Fatalf("the series of the refused writes = %+v, %v, want %+v (nothing of them stored)", res, err, want)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// Native histograms of other metrics go through the same write; a
// Peakline series refuses them, and the head's refusal of a malformed one
// refuses the whole write.
func TestAppendSeriesHistograms(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, t.TempDir(), Options{})
	t0 := testNow.Add(-time.Hour).UnixMilli()
	good := &histogram.Histogram{Count: 3, ZeroCount: 3, ZeroThreshold: 0.001, Sum: 0}
	bad := &histogram.Histogram{Count: 1, ZeroCount: 5, ZeroThreshold: 0.001, Sum: 0}
	lat := labels.FromStrings("__name__", "latency", "instance", "x")
	other := labels.FromStrings("__name__", "up", "instance", "x")
	res, err := s.AppendSeries(ctx, []LabeledSeries{{Labels: lat, Hs: []HistogramSample{{T: t0, H: good}, {T: t0 + 1, FH: good.ToFloat(nil)}}}})
	if want := (WriteResult{Histograms: 2}); err != nil || res != want {
		t.Fatalf("AppendSeries = %+v, %v, want %+v", res, err, want)
	}
	f := func(series []LabeledSeries, reason, wantPrefix string) {
		t.Helper()
		_, err := s.AppendSeries(ctx, series)
		var ref *Refusal
		if !errors.As(err, &ref) || ref.Reason != reason || !strings.HasPrefix(ref.Msg, wantPrefix) {
			t.Fatalf("AppendSeries = %v, want %s: %s…", err, reason, wantPrefix)
		}
	}
	cpu := labels.FromStrings("__name__", MetricCPU, LabelJob, "j", LabelCounter, "3")
	f([]LabeledSeries{{Labels: cpu, Hs: []HistogramSample{{T: t0, H: good}}}}, ReasonHistogram,
		"series[0].histograms: peakline_cpu_percent holds floats only, got 1 histogram samples")
	f([]LabeledSeries{{Labels: other, Ts: []int64{t0 + 5}, Vs: []float64{1}}, {Labels: lat, Hs: []HistogramSample{{T: t0 + 5, H: bad}}}}, ReasonHistogram,
		"series[1].histograms[0]: append histogram of")
	res, err = s.AppendSeries(ctx, []LabeledSeries{{Labels: other, Ts: []int64{t0 + 5}, Vs: []float64{1}}})
	if want := (WriteResult{Samples: 1}); err != nil || res != want {
		t.Fatalf("the float series of the refused write = %+v, %v, want %+v (nothing of it stored)", res, err, want)
	}
}

// A write of more series than one commit holds is stored whole, counted
// exactly, and is all duplicates when sent again; on the head's
// out-of-order path too.
func TestAppendManySeriesInParts(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, t.TempDir(), Options{})
	recent := testNow.Add(-time.Minute).UnixMilli()
	if _, err := s.Append(ctx, manySeriesBatch("recent", recent, 1)); err != nil {
		t.Fatal(err)
	}
	n := maxAtomicSeries + commitSeries + 7 // past the atomic limit: committed in parts
	old := manySeriesBatch("old", testNow.Add(-5*time.Hour).UnixMilli(), n)
	if res, err := s.Append(ctx, old); err != nil || res != (AppendResult{Samples: n}) {
		t.Fatalf("append of %d series = %+v, %v", n, res, err)
	}
	if res, err := s.AppendSeries(ctx, batchSeries(old)); err != nil || res != (WriteResult{Duplicates: n}) {
		t.Fatalf("the same as labeled series = %+v, %v, want %d duplicates", res, err, n)
	}
	job, err := s.ReadJob(ctx, "old", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(job.Columns[0].Ts); got != n || len(job.Tasks) != n {
		t.Fatalf("job has %d cpu samples and %d tasks, want %d of each", got, len(job.Tasks), n)
	}
}

// Any series with a job id lists that job, so a metric outside the
// Peakline schema may not carry an id the API could not read or delete.
func TestAppendSeriesJobIDOfOtherMetrics(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, t.TempDir(), Options{})
	recent := testNow.Add(-time.Minute).UnixMilli()
	f := func(job string, wantErr string) {
		t.Helper()
		_, err := s.AppendSeries(ctx, []LabeledSeries{{Labels: labels.FromStrings(labels.MetricName, "node_cpu", LabelJob, job), Ts: []int64{recent}, Vs: []float64{1}}})
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("job_id %q: %v, want it stored", job, err)
		case wantErr != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("job_id %q: %v, want a refusal containing %q", job, err, wantErr)
		}
	}
	f("x\ny", "job_id must be at most 256 bytes of printable text")
	f(strings.Repeat("j", MaxJobIDLen+1), "job_id must be at most 256 bytes of printable text")
	f("fine-42", "")
	ids, err := s.JobIDs(ctx)
	if err != nil || len(ids) != 1 || ids[0] != "fine-42" {
		t.Fatalf("job ids = %q, %v; want only fine-42", ids, err)
	}
}

// Staleness markers anywhere in a Peakline series are dropped and the
// samples around them stored, the caller's slices left as they were.
func TestAppendSeriesStaleInside(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, t.TempDir(), Options{})
	t0 := testNow.Add(-time.Hour).UnixMilli()
	stale := math.Float64frombits(value.StaleNaN)
	cpu := labels.FromStrings("__name__", MetricCPU, LabelJob, "j", LabelCounter, "3", LabelTaskUUID, "u", LabelTask, "t")
	ts, vs := []int64{t0, t0 + 1, t0 + 2, t0 + 3, t0 + 4}, []float64{stale, 1, stale, 3, 4}
	res, err := s.AppendSeries(ctx, []LabeledSeries{{Labels: cpu, Ts: ts, Vs: vs}})
	if want := (WriteResult{Samples: 3, Stale: 2}); err != nil || res != want {
		t.Fatalf("AppendSeries = %+v, %v, want %+v", res, err, want)
	}
	if !reflect.DeepEqual(ts, []int64{t0, t0 + 1, t0 + 2, t0 + 3, t0 + 4}) || math.Float64bits(vs[0]) != value.StaleNaN || vs[3] != 3 {
		t.Fatalf("the caller's series changed: %v %v", ts, vs)
	}
	job, err := s.ReadJob(ctx, "j", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	if c := job.Columns[0]; !reflect.DeepEqual(c.Ts, []int64{t0 + 1, t0 + 3, t0 + 4}) || !reflect.DeepEqual(c.Vs, []float64{1, 3, 4}) {
		t.Fatalf("stored %v %v, want the samples at +1, +3, +4", c.Ts, c.Vs)
	}
}
