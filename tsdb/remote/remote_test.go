package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/peakline/peakline/tsdb/remote/remotetest"
)

func TestParseTime(t *testing.T) {
	f := func(in string, want int64) {
		t.Helper()
		got, err := parseTime(in)
		if err != nil || got != want {
			t.Fatalf("parseTime(%q) = %d, %v; want %d", in, got, err, want)
		}
		if back := formatTime(want); back != in && in[len(in)-4] == '.' {
			t.Fatalf("formatTime(%d) = %q, want %q", want, back, in)
		}
	}
	f("1796012540.774", 1796012540774)
	f("1796012540.7", 1796012540700)
	f("1796012540", 1796012540000)
	f("0.001", 1)
	f("-1.500", -1500)
	for _, bad := range []string{"", "1.2345", "x", "1.x"} {
		if _, err := parseTime(bad); err == nil {
			t.Errorf("parseTime(%q) took it", bad)
		}
	}
}

func TestSelector(t *testing.T) {
	got := Selector([]*labels.Matcher{
		labels.MustNewMatcher(labels.MatchEqual, "job_id", `a"b\c`),
		labels.MustNewMatcher(labels.MatchNotRegexp, "task", "x|y"),
		labels.MustNewMatcher(labels.MatchEqual, "odd.name", "v"),
	})
	if want := `{job_id="a\"b\\c",task!~"x|y","odd.name"="v"}`; got != want {
		t.Fatalf("Selector = %s, want %s", got, want)
	}
}

// writeRecorder is an engine's remote write endpoint that answers the
// statuses in codes, one per request, and records the series it got.
type writeRecorder struct {
	codes  []int
	calls  atomic.Int32
	series [][]prompb.TimeSeries
}

func (w *writeRecorder) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	n := int(w.calls.Add(1)) - 1
	body, _ := io.ReadAll(r.Body)
	raw, err := snappy.Decode(nil, body)
	var req prompb.WriteRequest
	if err == nil {
		err = req.Unmarshal(raw)
	}
	if err != nil || r.Header.Get("Content-Encoding") != "snappy" || r.Header.Get("X-Prometheus-Remote-Write-Version") != "0.1.0" {
		http.Error(rw, "not remote write 1.0", http.StatusBadRequest)
		return
	}
	if r.Header.Get("X-Scope-OrgID") != "peakline" {
		http.Error(rw, "no tenant", http.StatusUnauthorized)
		return
	}
	w.series = append(w.series, req.Timeseries)
	code := w.codes[min(n, len(w.codes)-1)]
	if code/100 != 2 {
		http.Error(rw, "engine says no", code)
		return
	}
	rw.WriteHeader(code)
}

func TestWriteRetries(t *testing.T) {
	f := func(codes []int, wantCalls int, wantErr error) {
		t.Helper()
		rec := &writeRecorder{codes: codes}
		srv := httptest.NewServer(rec)
		defer srv.Close()
		var waits []time.Duration
		reg := prometheus.NewRegistry()
		c, err := New(Config{WriteURL: srv.URL + "/api/v1/write", QueryURL: srv.URL, WriteAttempts: 3, Registerer: reg,
			Header:     http.Header{"X-Scope-Orgid": {"peakline"}},
			MinBackoff: time.Second, MaxBackoff: 2 * time.Second,
			Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		app := c.Appender(context.Background())
		ls := labels.FromStrings("__name__", "peakline_pids", "job_id", "1")
		ref, _ := app.Append(0, ls, 1000, 3)
		if _, err := app.Append(ref, ls, 2000, 4); err != nil {
			t.Fatal(err)
		}
		err = app.Commit()
		if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
			t.Fatalf("codes %v: Commit = %v, want %v", codes, err, wantErr)
		}
		if got := int(rec.calls.Load()); got != wantCalls {
			t.Fatalf("codes %v: %d requests, want %d", codes, got, wantCalls)
		}
		if len(waits) != wantCalls-1 {
			t.Fatalf("codes %v: %d waits, want %d", codes, len(waits), wantCalls-1)
		}
		if got := testutil.ToFloat64(c.retries); got != float64(wantCalls-1) {
			t.Fatalf("codes %v: retries counted %v, want %d", codes, got, wantCalls-1)
		}
		for i, code := range codes[:min(wantCalls, len(codes))] {
			n := 1.0
			if i == len(codes)-1 {
				n = float64(wantCalls - i)
			}
			if got := testutil.ToFloat64(c.requests.WithLabelValues("write", strconv.Itoa(code))); got != n {
				t.Fatalf("codes %v: requests with code %d counted %v, want %v", codes, code, got, n)
			}
		}
		for i, w := range waits { // 1s then 2s (the cap), ±20%
			base := min(time.Second<<i, 2*time.Second)
			if w < base*8/10 || w > base*12/10 {
				t.Fatalf("codes %v: wait %d is %s, want %s ±20%%", codes, i, w, base)
			}
		}
		for _, got := range rec.series { // every attempt carries the same series
			want := []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "peakline_pids"}, {Name: "job_id", Value: "1"}},
				Samples: []prompb.Sample{{Timestamp: 1000, Value: 3}, {Timestamp: 2000, Value: 4}}}}
			if len(got) != 1 || fmt.Sprint(got[0].Labels) != fmt.Sprint(want[0].Labels) || fmt.Sprint(got[0].Samples) != fmt.Sprint(want[0].Samples) {
				t.Fatalf("codes %v: sent %v, want %v", codes, got, want)
			}
		}
	}
	f([]int{204}, 1, nil)
	f([]int{503, 429, 200}, 3, nil)
	f([]int{503}, 3, ErrUnavailable)
	f([]int{400}, 1, ErrRejected)
	f([]int{500, 422}, 2, ErrRejected)
}

// engineBin returns ../../bin/NAME (see remotetest.Bin).
func engineBin(t *testing.T, name string) string {
	t.Helper()
	return remotetest.Bin(t, filepath.Join("..", "..", "bin", name))
}

// startEngine runs bin with args (ADDR and DIR replaced) on a free
// loopback port and returns its base URL once readyPath answers 200.
func startEngine(t *testing.T, bin, readyPath string, args ...string) string {
	t.Helper()
	return remotetest.Engine(t, bin, readyPath, args...)
}

// TestEngines writes series through an Appender and reads them back
// through Querier and ChunkQuerier from real engines: VictoriaMetrics
// (export) and Prometheus with --query.max-samples below one series'
// samples (windows split). Series that differ only in a label the engine
// adds merge into one after Relabel, and Delete removes a job.
func TestEngines(t *testing.T) {
	type eng struct {
		name  string
		start func(t *testing.T) string
		flush func(base string)
	}
	engines := []eng{
		{"victoriametrics", func(t *testing.T) string {
			return startEngine(t, engineBin(t, "victoria-metrics"), "/health", "-storageDataPath=DIR", "-retentionPeriod=100y",
				"-httpListenAddr=ADDR", "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=ERROR")
		}, func(base string) {
			if resp, err := http.Get(base + "/internal/force_flush"); err == nil {
				resp.Body.Close()
			}
		}},
		{"prometheus", func(t *testing.T) string {
			bin := engineBin(t, "prometheus")
			cfg := filepath.Join(t.TempDir(), "prometheus.yml")
			if err := os.WriteFile(cfg, []byte("storage:\n  tsdb:\n    out_of_order_time_window: 100y\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			return startEngine(t, bin, "/-/ready", "--config.file="+cfg, "--storage.tsdb.path=DIR", "--web.listen-address=ADDR",
				"--web.enable-remote-write-receiver", "--web.enable-admin-api", "--query.max-samples=100", "--log.level=error")
		}, func(string) {}},
	}
	const n = 1000 // samples per series: ten times Prometheus' --query.max-samples
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			base := e.start(t)
			c, err := New(Config{WriteURL: base + "/api/v1/write", QueryURL: base,
				Relabel: func(ls labels.Labels) labels.Labels { return labels.NewBuilder(ls).Del("replica").Labels() }})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			t0 := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC).UnixMilli()
			app := c.Appender(ctx)
			for _, job := range []string{"a", "b"} {
				for _, replica := range []string{"1", "2"} {
					ls := labels.FromStrings("__name__", "peakline_cpu_percent", "job_id", job, "counter", "3", "replica", replica)
					var ref storage.SeriesRef
					for i := range n {
						// Replicas hold the same samples except replica 2
						// has every other one: the merge is their union.
						if replica == "2" && i%2 == 1 {
							continue
						}
						ref, _ = app.Append(ref, ls, t0+int64(i)*250, float64(i)+0.5)
					}
				}
			}
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
			e.flush(base)

			check := func(set storage.SeriesSet, wantJobs ...string) {
				t.Helper()
				var jobs []string
				for set.Next() {
					s := set.At()
					jobs = append(jobs, s.Labels().Get("job_id"))
					if s.Labels().Has("replica") {
						t.Fatalf("series %s kept the replica label", s.Labels())
					}
					it := s.Iterator(nil)
					i := 0
					for ; it.Next() == chunkenc.ValFloat; i++ {
						if ts, v := it.At(); ts != t0+int64(i)*250 || v != float64(i)+0.5 {
							t.Fatalf("%s sample %d: %d %v, want %d %v", s.Labels(), i, ts, v, t0+int64(i)*250, float64(i)+0.5)
						}
					}
					if i != n {
						t.Fatalf("%s: %d samples, want %d", s.Labels(), i, n)
					}
				}
				if err := set.Err(); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(jobs, wantJobs) {
					t.Fatalf("series of jobs %v, want %v", jobs, wantJobs)
				}
			}
			q, _ := c.Querier(t0-1000, t0+int64(n)*250)
			job := labels.MustNewMatcher(labels.MatchRegexp, "job_id", "a|b")
			check(q.Select(ctx, true, nil, job), "a", "b")
			cq, _ := c.ChunkQuerier(t0-1000, t0+int64(n)*250)
			check(storage.NewSeriesSetFromChunkSeriesSet(cq.Select(ctx, true, nil, job)), "a", "b")
			// Labels only (the series API): no samples.
			hints := &storage.SelectHints{Start: t0 - 1000, End: t0 + int64(n)*250, Func: "series"}
			want := []string{`{__name__="peakline_cpu_percent", counter="3", job_id="a"}`, `{__name__="peakline_cpu_percent", counter="3", job_id="b"}`}
			var got []string
			set := q.Select(ctx, true, hints, job)
			for set.Next() {
				if set.At().Iterator(nil).Next() != chunkenc.ValNone {
					t.Fatalf("series %s of the series API has samples", set.At().Labels())
				}
				got = append(got, set.At().Labels().String())
			}
			if set.Err() != nil || !slices.Equal(got, want) {
				t.Fatalf("series API: %v, %v; want %v", got, set.Err(), want)
			}
			got = nil
			cset := cq.Select(ctx, true, hints, job)
			for cset.Next() {
				if cset.At().Iterator(nil).Next() {
					t.Fatalf("chunk series %s of the series API has chunks", cset.At().Labels())
				}
				got = append(got, cset.At().Labels().String())
			}
			if cset.Err() != nil || !slices.Equal(got, want) {
				t.Fatalf("series API as chunks: %v, %v; want %v", got, cset.Err(), want)
			}
			vals, _, err := q.LabelValues(ctx, "job_id", nil)
			if err != nil || !slices.Equal(vals, []string{"a", "b"}) {
				t.Fatalf("LabelValues(job_id) = %v, %v; want [a b]", vals, err)
			}

			if err := c.Delete(ctx, labels.MustNewMatcher(labels.MatchEqual, "job_id", "a")); err != nil {
				t.Fatal(err)
			}
			e.flush(base)
			check(q.Select(ctx, true, nil, job), "b")
		})
	}
}

// decodeExport reads export lines as encoding/json does, keys in any
// order, escapes included, and refuses a broken one.
func TestDecodeExport(t *testing.T) {
	decode := func(line string) ([]*series, error) {
		res, err := newBudget(1<<30, time.Second, prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})).reserve(context.Background(), "test")
		if err != nil {
			t.Fatal(err)
		}
		defer res.release()
		return decodeExport(newJSONStream(strings.NewReader(line)), res)
	}
	f := func(line, wantLabels string, wantTs []int64, wantVs []float64) {
		t.Helper()
		out, err := decode(line)
		if err != nil || len(out) != 1 {
			t.Fatalf("%s: %d series, %v", line, len(out), err)
		}
		s := out[0]
		if s.ls.String() != wantLabels || !slices.Equal(s.ts, wantTs) || !slices.Equal(s.vs, wantVs) {
			t.Fatalf("%s: %s %v %v, want %s %v %v", line, s.ls, s.ts, s.vs, wantLabels, wantTs, wantVs)
		}
	}
	f(`{"metric":{"__name__":"peakline_pids","task":"a,\"values\":[1]"},"values":[1,2.5,1e-7,-3],"timestamps":[1,2,3,4]}`+"\n",
		`{__name__="peakline_pids", task="a,\"values\":[1]"}`, []int64{1, 2, 3, 4}, []float64{1, 2.5, 1e-7, -3})
	f(`{"metric":{"job_id":"1"},"values":[],"timestamps":[]}`, `{job_id="1"}`, nil, nil)
	f(`{"timestamps":[5],"metric":{"job_id":"1"},"values":[0.5]}`, `{job_id="1"}`, []int64{5}, []float64{0.5})
	f(` { "metric" : { "task" : "caf\u00e9 \ud83d\ude00" } , "values" : [ 1 ] , "timestamps" : [ 7 ] , "extra" : [{"a":[1,"]"]}] } `,
		`{task="café 😀"}`, []int64{7}, []float64{1})
	for _, bad := range []string{`{"metric":{},"values":[1,2],"timestamps":[1]}`, `{"metric":{},"values":[x],"timestamps":[1]}`, `not json`,
		`{"metric":{},"values":[1],"timestamps":[1]`, `{"metric":{"a":"b}}`, `{"metric":{},"values":[1],"timestamps":[1.5]}`} {
		if out, err := decode(bad); !errors.Is(err, errSyntax) {
			t.Errorf("%s: took it as %v (%v), want a syntax error", bad, out, err)
		}
	}
}

// Delete asks the engine's delete API: under the query base, or for a
// VictoriaMetrics cluster (base /select/<tenant>/prometheus) at
// vmselect's /delete/<tenant>/prometheus; Prometheus' tombstones are
// cleaned after; a 404 is ErrDeleteUnsupported.
func TestDeletePaths(t *testing.T) {
	f := func(base string, status int, wantPaths []string, wantErr error) {
		t.Helper()
		var paths []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = r.ParseForm()
			paths = append(paths, r.Method+" "+r.URL.Path+" "+r.Form.Get("match[]"))
			w.WriteHeader(status)
		}))
		defer srv.Close()
		c, err := New(Config{WriteURL: srv.URL + "/w", QueryURL: srv.URL + base})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Delete(context.Background(), labels.MustNewMatcher(labels.MatchEqual, "job_id", "7"))
		if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
			t.Fatalf("%s: %v, want %v", base, err, wantErr)
		}
		if !slices.Equal(paths, wantPaths) {
			t.Fatalf("%s: asked %q, want %q", base, paths, wantPaths)
		}
	}
	f("", 204, []string{`POST /api/v1/admin/tsdb/delete_series {job_id="7"}`, "POST /api/v1/admin/tsdb/clean_tombstones "}, nil)
	f("/select/3/prometheus", 204, []string{`POST /delete/3/prometheus/api/v1/admin/tsdb/delete_series {job_id="7"}`}, nil)
	f("/prometheus", 404, []string{`POST /prometheus/api/v1/admin/tsdb/delete_series {job_id="7"}`}, ErrDeleteUnsupported)
}

// TestDeleteAdminDisabled: Prometheus without --web.enable-admin-api
// answers 500 "admin APIs disabled"; the error says which flag to set.
func TestDeleteAdminDisabled(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"status":"error","errorType":"unavailable","error":"admin APIs disabled"}`)
	}))
	defer srv.Close()
	c, err := New(Config{WriteURL: srv.URL + "/api/v1/write", QueryURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Delete(context.Background(), labels.MustNewMatcher(labels.MatchEqual, "job_id", "7"))
	want := "the engine has no series delete API (" + srv.URL + " answered HTTP 500, admin APIs disabled): start Prometheus with --web.enable-admin-api, or delete the series with the engine's own tools"
	if !errors.Is(err, ErrDeleteUnsupported) || err.Error() != want {
		t.Fatalf("Delete = %v, want %s", err, want)
	}
}

// TestResponseBounded: an answer longer than MaxResponseBytes fails the
// read with ErrTooLarge naming the engine and the bound, whether the engine streams it
// to the API decoder or to the export reader; an answer of exactly the
// bound is read.
func TestResponseBounded(t *testing.T) {
	labelsBody := `{"status":"success","data":["job_id","task"]}` // 45 bytes
	exportBody := `{"metric":{"__name__":"m","job_id":"1"},"values":[1,2],"timestamps":[1000,2000]}` + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/export" {
			io.WriteString(w, exportBody)
			return
		}
		io.WriteString(w, labelsBody)
	}))
	defer srv.Close()
	f := func(maxBytes int64, wantLabels, wantExport string) {
		t.Helper()
		c, err := New(Config{WriteURL: srv.URL + "/api/v1/write", QueryURL: srv.URL, MaxResponseBytes: maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		q, _ := c.Querier(0, 10_000)
		names, _, err := q.LabelNames(context.Background(), nil)
		if got := strings.ReplaceAll(fmt.Sprint(names, err), srv.URL, "ENGINE"); got != wantLabels || (err != nil) != errors.Is(err, ErrTooLarge) {
			t.Fatalf("max %d: LabelNames = %s, want %s", maxBytes, got, wantLabels)
		}
		set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "job_id", "1"))
		n := 0
		for set.Next() {
			n++
		}
		got := strings.ReplaceAll(fmt.Sprint(n, set.Err()), srv.URL, "ENGINE")
		if got != wantExport || (set.Err() != nil) != errors.Is(set.Err(), ErrTooLarge) {
			t.Fatalf("max %d: Select = %s, want %s", maxBytes, got, wantExport)
		}
	}
	f(int64(len(exportBody)), "[job_id task] <nil>", "1 <nil>")
	f(45, "[job_id task] <nil>", `0 export {job_id="1"}: engine answer too large: ENGINE/api/v1/export: more than 45 bytes, the most one answer may take; read a shorter time range`)
	f(44, `[] list label names: engine answer too large: ENGINE/api/v1/labels: more than 44 bytes, the most one answer may take; read a shorter time range`,
		`0 export {job_id="1"}: engine answer too large: ENGINE/api/v1/export: more than 44 bytes, the most one answer may take; read a shorter time range`)
}

// TestWriteTooOld: Prometheus' refusal of samples behind its head names
// the out-of-order window to set; other refusals are passed as they are.
func TestWriteTooOld(t *testing.T) {
	f := func(answer, want string) {
		t.Helper()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, answer, http.StatusBadRequest)
		}))
		defer srv.Close()
		c, err := New(Config{WriteURL: srv.URL + "/api/v1/write", QueryURL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Write(context.Background(), []prompb.TimeSeries{{Labels: []prompb.Label{{Name: "__name__", Value: "m"}}, Samples: []prompb.Sample{{Timestamp: 1000, Value: 1}}}})
		if !errors.Is(err, ErrRejected) || err.Error() != want {
			t.Fatalf("Write answered %q: %v, want %s", answer, err, want)
		}
	}
	f("out of bounds", "refused by the engine: remote write: HTTP 400: out of bounds (the engine takes no samples this old: give it an out-of-order window, e.g. Prometheus storage.tsdb.out_of_order_time_window, Mimir -ingester.out-of-order-time-window)")
	f("invalid labels", "refused by the engine: remote write: HTTP 400: invalid labels")
}

// TestReadStatus: an engine answering 503 or 429 to a read or a delete
// is unavailable (try later), 504 or 408 timed out, another 5xx failed;
// another 4xx is a refusal.
func TestReadStatus(t *testing.T) {
	f := func(code int, want error) {
		t.Helper()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "busy", code)
		}))
		defer srv.Close()
		c, err := New(Config{WriteURL: srv.URL + "/api/v1/write", QueryURL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		q, _ := c.Querier(0, 10_000)
		set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "job_id", "1"))
		for set.Next() {
		}
		wantMsg := fmt.Sprintf("%v: HTTP %d: busy", "export", code)
		if err := set.Err(); !errors.Is(err, want) || !strings.HasSuffix(err.Error(), wantMsg) {
			t.Fatalf("export answered %d: %v, want %v ending %q", code, err, want, wantMsg)
		}
		err = c.Delete(context.Background(), labels.MustNewMatcher(labels.MatchEqual, "job_id", "1"))
		if wantMsg = fmt.Sprintf("delete: HTTP %d: busy", code); !errors.Is(err, want) || !strings.HasSuffix(err.Error(), wantMsg) {
			t.Fatalf("delete answered %d: %v, want %v ending %q", code, err, want, wantMsg)
		}
	}
	f(http.StatusServiceUnavailable, ErrUnavailable)
	f(http.StatusTooManyRequests, ErrUnavailable)
	f(http.StatusInternalServerError, ErrFailed)
	f(http.StatusBadGateway, ErrFailed)
	f(http.StatusGatewayTimeout, ErrTimeout)
	f(http.StatusRequestTimeout, ErrTimeout)
	f(http.StatusBadRequest, ErrRejected)
}
