package tsdb

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"

	"github.com/peakline/peakline/tsdb/remote/remotetest"
)

// startEngine runs ../bin/NAME with args (ADDR and DIR replaced) on a
// free loopback port and returns its base URL once readyPath answers
// 200 (see remotetest.Engine).
func startEngine(t *testing.T, name, readyPath string, args ...string) string {
	t.Helper()
	return remotetest.Engine(t, remotetest.Bin(t, filepath.Join("..", "bin", name)), readyPath, args...)
}

func openRemoteTest(t *testing.T, base string) *Store {
	t.Helper()
	s, err := OpenRemote(Remote{WriteURL: base + "/api/v1/write", QueryURL: base}, Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestRemoteStoreMatchesEmbedded writes the same batch to an embedded
// store and to one over VictoriaMetrics and reads both: the same append
// counts (a batch sent again is all duplicates), the same job, summary
// and span, also when the engine holds a copy of a series with a label
// of its own (a Thanos tenant), and the job is gone after Delete.
func TestRemoteStoreMatchesEmbedded(t *testing.T) {
	base := startEngine(t, "victoria-metrics", "/health", "-storageDataPath=DIR", "-retentionPeriod=100y",
		"-httpListenAddr=ADDR", "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=ERROR")
	flush := func() {
		resp, err := http.Get(base + "/internal/force_flush")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	ctx := context.Background()
	local, _ := openTest(t)
	rem := openRemoteTest(t, base)
	start := time.Date(2026, 11, 30, 3, 39, 35, 0, time.UTC).UnixMilli()
	b := exampleBatch("42", start)
	for i, s := range []*Store{local, rem} {
		res, err := s.Append(ctx, b)
		if want := (AppendResult{Samples: 72, Tasks: 4}); err != nil || res != want {
			t.Fatalf("store %d: first append = %+v, %v; want %+v", i, res, err, want)
		}
	}
	flush()
	for i, s := range []*Store{local, rem} {
		res, err := s.Append(ctx, b)
		if want := (AppendResult{Duplicates: 72}); err != nil || res != want {
			t.Fatalf("store %d: second append = %+v, %v; want %+v", i, res, err, want)
		}
	}
	// The engine's copy of the cpu series of task 3 under a tenant label.
	sd := b.Series[0]
	ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: MetricCPU}, {Name: LabelCounter, Value: "3"},
		{Name: LabelJob, Value: "42"}, {Name: LabelTask, Value: sd.Task}, {Name: LabelTaskUUID, Value: sd.UUID}, {Name: "tenant_id", Value: "t1"}}}
	for k := range sd.Ts {
		ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: sd.Ts[k], Value: sd.Vs[k]})
	}
	if err := rem.remote.Write(ctx, []prompb.TimeSeries{ts}); err != nil {
		t.Fatal(err)
	}
	flush()

	want, err := local.ReadJob(ctx, "42", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rem.ReadJob(ctx, "42", minTime, maxTime)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("remote job:\n%+v\nembedded job:\n%+v", got, want)
	}
	wantSpans, _ := local.Spans(ctx)
	gotSpans, err := rem.Spans(ctx)
	if err != nil || !reflect.DeepEqual(gotSpans, wantSpans) {
		t.Fatalf("remote spans %+v, %v; embedded %+v", gotSpans, err, wantSpans)
	}
	wantSum, _ := local.Summaries(ctx)
	gotSum, err := rem.Summaries(ctx)
	if err != nil || !reflect.DeepEqual(gotSum, wantSum) {
		t.Fatalf("remote summaries %+v, %v; embedded %+v", gotSum, err, wantSum)
	}

	if err := rem.Delete(ctx, "42"); err != nil {
		t.Fatal(err)
	}
	flush()
	if _, err := rem.ReadJob(ctx, "42", minTime, maxTime); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("read after delete: %v, want ErrJobNotFound", err)
	}
	if err := rem.Delete(ctx, "42"); !errors.Is(err, ErrJobNotFound) {
		t.Fatalf("second delete: %v, want ErrJobNotFound", err)
	}
}

// TestRemoteStoreRefusals: what the engine refuses is a Refusal, as the
// embedded head's refusals are; an engine without a delete API says so.
func TestRemoteStoreRefusals(t *testing.T) {
	// Prometheus without an out-of-order window and without the admin API.
	cfg := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(cfg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	base := startEngine(t, "prometheus", "/-/ready", "--config.file="+cfg, "--storage.tsdb.path=DIR",
		"--web.listen-address=ADDR", "--web.enable-remote-write-receiver", "--log.level=error")
	s := openRemoteTest(t, base)
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 3, 39, 35, 0, time.UTC).UnixMilli()
	if _, err := s.Append(ctx, exampleBatch("new", start)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctx, exampleBatch("old", start-3*time.Hour.Milliseconds()))
	var ref *Refusal
	if !errors.As(err, &ref) || ref.Reason != ReasonEngine || !errors.Is(err, ErrInvalid) {
		t.Fatalf("append of a job older than Prometheus' head: %v, want a Refusal of reason %s", err, ReasonEngine)
	}
	if err := s.Delete(ctx, "new"); !errors.Is(err, ErrDeleteUnsupported) {
		t.Fatalf("delete without --web.enable-admin-api: %v, want ErrDeleteUnsupported", err)
	}
}

func TestSchemaOnly(t *testing.T) {
	f := func(in labels.Labels, want string) {
		t.Helper()
		orig := in.String()
		if got := schemaOnly(in).String(); got != want {
			t.Fatalf("schemaOnly(%s) = %s, want %s", orig, got, want)
		}
		if in.String() != orig {
			t.Fatalf("schemaOnly changed its input to %s", in)
		}
	}
	f(labels.FromStrings("__name__", MetricPIDs, "counter", "3", "job_id", "1", "receive_replica", "r0", "task", "t", "task_uuid", "u", "tenant_id", "x"),
		`{__name__="peakline_pids", counter="3", job_id="1", task="t", task_uuid="u"}`)
	f(labels.FromStrings("__name__", MetricLastEvent, "job_id", "1"), `{__name__="peakline_job_last_event", job_id="1"}`)
	f(labels.FromStrings("__name__", "up", "job_id", "1", "tenant_id", "x"), `{__name__="up", job_id="1", tenant_id="x"}`)
}

// TestRemoteSpansPrometheus: the jobs list's spans from Prometheus equal
// the embedded store's chunk bounds, read with two queries where its
// experimental ts_of_first_over_time is on, else job by job.
func TestRemoteSpansPrometheus(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 3, 39, 35, 0, time.UTC).UnixMilli()
	local, _ := openTest(t)
	batches := []*Batch{exampleBatch("42", start), exampleBatch("43", start+60_000)}
	batches[1].LastEvent.TimeMs += 5000 // the last event is the newest time of job 43
	for _, b := range batches {
		if _, err := local.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	want, err := local.Spans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		features string
		wantFast int32
	}{{"", -1}, {"--enable-feature=promql-experimental-functions", 2}} {
		cfg := filepath.Join(t.TempDir(), "prometheus.yml")
		if err := os.WriteFile(cfg, []byte("storage:\n  tsdb:\n    out_of_order_time_window: 100y\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"--config.file=" + cfg, "--storage.tsdb.path=DIR", "--web.listen-address=ADDR",
			"--web.enable-remote-write-receiver", "--web.enable-admin-api", "--log.level=error"}
		if c.features != "" {
			args = append(args, c.features)
		}
		base := startEngine(t, "prometheus", "/-/ready", args...)
		rem := openRemoteTest(t, base)
		for _, b := range batches {
			if _, err := rem.Append(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		got, err := rem.Spans(ctx)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: spans %+v, %v; embedded %+v", c.features, got, err, want)
		}
		if fast := rem.spansFast.Load(); fast != c.wantFast {
			t.Fatalf("%q: spans read by way %d, want %d", c.features, fast, c.wantFast)
		}
		// Prometheus still names a deleted job's series in its head: a
		// replica with nothing cached does not list the job.
		if err := rem.Delete(ctx, "42"); err != nil {
			t.Fatal(err)
		}
		other := openRemoteTest(t, base)
		if got, err := other.Spans(ctx); err != nil || !reflect.DeepEqual(got, want[1:]) {
			t.Fatalf("%q: spans after deleting job 42: %+v, %v; want %+v", c.features, got, err, want[1:])
		}
	}
}

// TestOpenRemoteOptions: options a remote store cannot honour are refused
// by name before anything is contacted.
func TestOpenRemoteOptions(t *testing.T) {
	r := Remote{WriteURL: "http://127.0.0.1:1/api/v1/write", QueryURL: "http://127.0.0.1:1"}
	f := func(opts Options, want string) {
		t.Helper()
		s, err := OpenRemote(r, opts, nil, nil)
		if err == nil {
			s.Close()
		}
		if fmt.Sprint(err) != want {
			t.Fatalf("OpenRemote(%+v) = %v, want %s", opts, err, want)
		}
	}
	f(Options{CacheTTL: -time.Second}, "cache TTL: must not be negative, got -1s")
	f(Options{Retention: time.Hour}, "retention: a remote store keeps what its engine keeps; set the engine's retention instead")
	f(Options{CacheTTL: time.Second}, "<nil>")
}
