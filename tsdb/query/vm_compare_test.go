package query_test

// The comparison harness: MetricsQL queries are evaluated by Peakline's
// engine over a real on-disk store and by a real VictoriaMetrics
// single-node (built by make tools) loaded with the same samples, as an
// instant and as a range query, and the answers must be equal. Add cases
// with a table of vmCase and compareWithVM; one VictoriaMetrics process
// and one store serve every test of the package binary.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/tsdb"
	"github.com/peakline/peakline/tsdb/query"
)

// vmCase is one query both engines answer.
type vmCase struct {
	query string
	// keepsName marks a query whose series VictoriaMetrics answers with
	// their metric name where Peakline drops it (its documented rule for
	// some rollup and transform functions). The harness requires
	// VictoriaMetrics' series to carry __name__ and drops it before
	// comparing: nothing else is normalised.
	keepsName bool
	// span is the samples and times the query is evaluated over;
	// nil means vmSynthetic.
	span *vmSpan
}

// vmSpan is where a case is evaluated: a range query from start to end
// at step, and instant queries at end and at mid.
type vmSpan struct {
	start, mid, end time.Time
	step            time.Duration
}

// The metrics of the synthetic samples, for case tables.
const (
	vmCPU  = `peakline_cpu_percent`
	vmMem  = `peakline_memory_bytes`
	vmPIDs = `peakline_pids`
	vmReqs = `peakline_test_requests_total` // counters, one with a reset
)

// vmBase is the end of the synthetic samples (see vmSyntheticSeries).
var vmBase = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var (
	// vmSynthetic covers the synthetic series: gaps, a counter reset,
	// irregular intervals and repeated values.
	vmSynthetic = &vmSpan{start: vmBase.Add(-30 * time.Minute), mid: vmBase.Add(-11*time.Minute - 30*time.Second), end: vmBase, step: time.Minute}
	// vmAnsible covers the ansible-runner job of testdata/ansible/
	// runner-basic (job_id "demo2", samples every 250ms).
	vmAnsible = &vmSpan{start: time.UnixMilli(1796009976000), mid: time.UnixMilli(1796009983500), end: time.UnixMilli(1796009996000), step: 2 * time.Second}
)

// vmRelTol is how far two values may differ, relative to the larger:
// VictoriaMetrics keeps 12 significant digits of a stored value.
const vmRelTol = 1e-9

// compareWithVM runs every case as two instant queries and a range query
// on both engines and fails each case whose answers differ: other series,
// other timestamps, or values further apart than vmRelTol (NaN equals
// NaN). A case whose range query VictoriaMetrics answers with no series
// fails too: it would prove nothing.
func compareWithVM(t *testing.T, cases []vmCase) {
	t.Helper()
	fx := vmFixture(t)
	for _, c := range cases {
		span := c.span
		if span == nil {
			span = vmSynthetic
		}
		t.Run(c.query, func(t *testing.T) {
			evals := []struct {
				kind string
				at   *vmSpan
				step time.Duration
			}{
				{"instant at end", &vmSpan{end: span.end}, 0},
				{"instant at mid", &vmSpan{end: span.mid}, 0},
				{"range", span, span.step},
			}
			for _, ev := range evals {
				kind, step := ev.kind, ev.step
				want, err := fx.vm(c.query, ev.at, step)
				if err != nil {
					t.Errorf("%s: VictoriaMetrics: %v", kind, err)
					continue
				}
				if step > 0 && len(want) == 0 {
					t.Errorf("%s: VictoriaMetrics answered no series: the case proves nothing", kind)
				}
				if c.keepsName {
					if err := dropName(want); err != nil {
						t.Errorf("%s: VictoriaMetrics: %v", kind, err)
						continue
					}
				}
				got, promQL, err := fx.peakline(c.query, ev.at, step)
				if err != nil {
					t.Errorf("%s: Peakline: %v", kind, err)
					continue
				}
				if d := diffSeries(got, want); d != "" {
					t.Errorf("%s (as PromQL: %s): %s", kind, promQL, d)
				}
			}
		})
	}
}

// vmSeries is one series of an answer: its labels and its points.
type vmSeries struct {
	labels labels.Labels
	points []vmPoint
}

type vmPoint struct {
	t int64 // unix ms
	v float64
}

// dropName removes __name__ from every series, which must carry it.
func dropName(ss []vmSeries) error {
	for i := range ss {
		if !ss[i].labels.Has(labels.MetricName) {
			return fmt.Errorf("series %s has no metric name, but the case says VictoriaMetrics keeps it", ss[i].labels)
		}
		ss[i].labels = ss[i].labels.DropMetricName()
	}
	sortSeries(ss)
	return nil
}

func sortSeries(ss []vmSeries) {
	slices.SortFunc(ss, func(a, b vmSeries) int { return labels.Compare(a.labels, b.labels) })
}

// diffSeries describes the first difference of two sorted answers, or
// returns "".
func diffSeries(got, want []vmSeries) string {
	names := func(ss []vmSeries) string {
		var b strings.Builder
		for _, s := range ss {
			fmt.Fprintf(&b, "\n\t%s (%d points)", s.labels, len(s.points))
		}
		return b.String()
	}
	if len(got) != len(want) {
		return fmt.Sprintf("Peakline answered %d series:%s\nVictoriaMetrics %d:%s", len(got), names(got), len(want), names(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !labels.Equal(g.labels, w.labels) {
			return fmt.Sprintf("series %d: Peakline %s, VictoriaMetrics %s\nPeakline:%s\nVictoriaMetrics:%s", i, g.labels, w.labels, names(got), names(want))
		}
		for j := 0; j < max(len(g.points), len(w.points)); j++ {
			var gp, wp *vmPoint
			if j < len(g.points) {
				gp = &g.points[j]
			}
			if j < len(w.points) {
				wp = &w.points[j]
			}
			switch {
			case gp == nil:
				return fmt.Sprintf("%s: Peakline has %d points, VictoriaMetrics also %s", g.labels, len(g.points), fmtPoint(*wp))
			case wp == nil:
				return fmt.Sprintf("%s: VictoriaMetrics has %d points, Peakline also %s", g.labels, len(w.points), fmtPoint(*gp))
			case gp.t != wp.t || !sameValue(gp.v, wp.v):
				return fmt.Sprintf("%s point %d: Peakline %s, VictoriaMetrics %s\nPeakline:        %s\nVictoriaMetrics: %s", g.labels, j, fmtPoint(*gp), fmtPoint(*wp), fmtPoints(g.points), fmtPoints(w.points))
			}
		}
	}
	return ""
}

func fmtPoint(p vmPoint) string {
	return fmt.Sprintf("%v@%s", p.v, time.UnixMilli(p.t).UTC().Format("15:04:05.000"))
}

func fmtPoints(ps []vmPoint) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmtPoint(p)
	}
	return strings.Join(s, " ")
}

// sameValue compares two values up to vmRelTol; NaN equals NaN.
func sameValue(a, b float64) bool {
	switch {
	case math.IsNaN(a) || math.IsNaN(b):
		return math.IsNaN(a) && math.IsNaN(b)
	case a == b: // infinities too
		return true
	}
	return math.Abs(a-b) <= vmRelTol*max(math.Abs(a), math.Abs(b))
}

// vmFix is the fixture shared by the package's tests: set up by the
// first compareWithVM, torn down by TestMain.
var vmFix struct {
	once    sync.Once
	fx      *vmFixtureT
	skip    string
	err     error
	cleanup []func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, f := range slices.Backward(vmFix.cleanup) {
		f()
	}
	os.Exit(code)
}

// vmFixtureT is a running VictoriaMetrics and a Peakline store holding
// the same samples.
type vmFixtureT struct {
	url    string
	client *http.Client
	engine *query.Engine
}

// vmFixture returns the shared fixture, starting it on first use. Without
// a victoria-metrics binary the test is skipped, except under CI
// (CI=true), where it fails.
func vmFixture(t *testing.T) *vmFixtureT {
	t.Helper()
	vmFix.once.Do(func() {
		bin := findVM()
		if bin == "" {
			vmFix.skip = "victoria-metrics not found in ./bin or PATH (run make tools)"
			return
		}
		vmFix.fx, vmFix.err = startVMFixture(bin)
	})
	switch {
	case vmFix.skip != "" && os.Getenv("CI") == "true":
		t.Fatalf("%s; CI=true, so this is a failure", vmFix.skip)
	case vmFix.skip != "":
		t.Skip(vmFix.skip)
	case vmFix.err != nil:
		t.Fatal(vmFix.err)
	}
	return vmFix.fx
}

// findVM looks for the victoria-metrics binary where make tools puts it
// (bin/ at the module root), then in PATH; "" when there is none.
func findVM() string {
	dir, err := os.Getwd()
	for ; err == nil; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			for _, n := range []string{"victoria-metrics", "victoria-metrics-prod"} {
				p := filepath.Join(dir, "bin", n)
				if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
					return p
				}
			}
			break
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	for _, n := range []string{"victoria-metrics", "victoria-metrics-prod"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}

func startVMFixture(bin string) (*vmFixtureT, error) {
	dir, err := os.MkdirTemp("", "peakline-vmcompare-")
	if err != nil {
		return nil, err
	}
	vmFix.cleanup = append(vmFix.cleanup, func() { _ = os.RemoveAll(dir) })

	store, err := tsdb.Open(filepath.Join(dir, "peakline"), tsdb.Options{
		Now: func() time.Time { return vmAnsible.end.Add(time.Hour) },
	}, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	vmFix.cleanup = append(vmFix.cleanup, func() { _ = store.Close() })
	if err := loadPeakline(store); err != nil {
		return nil, err
	}
	stored, err := dumpStore(store)
	if err != nil {
		return nil, err
	}

	vmURL, stop, err := startVM(bin, filepath.Join(dir, "vm"))
	if err != nil {
		return nil, err
	}
	vmFix.cleanup = append(vmFix.cleanup, stop)
	fx := &vmFixtureT{url: vmURL, client: &http.Client{Timeout: time.Minute}, engine: query.New(store.Queryable(), query.Options{})}
	if err := fx.load(stored); err != nil {
		return nil, err
	}
	return fx, nil
}

// startVM runs VictoriaMetrics on a free loopback port and waits until it
// is healthy. stop ends it.
func startVM(bin, dir string) (vmURL string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin,
		"-storageDataPath="+dir,
		"-httpListenAddr="+addr,
		"-retentionPeriod=100y",
		"-search.latencyOffset=0s",
		"-search.disableCache",
		"-loggerLevel=ERROR",
	)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start victoria-metrics: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	vmURL = "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(vmURL + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return vmURL, stop, nil
			}
		}
		select {
		case err := <-done:
			return "", nil, fmt.Errorf("victoria-metrics exited before it was ready: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("victoria-metrics not ready after 60s:\n%s", logs.String())
		}
	}
}

// vmSyntheticSeries are the synthetic samples: three tasks of job
// vm1 and one of vm2 in the Peakline schema over the 40 minutes before
// vmBase, with two-decimal values (repeated ones among them), a
// four-minute gap, a series that starts late and ends early, and
// counters with a reset and a gap. Samples come every 9.5-10.5s, as a
// profiler's do, except for task 1's CPU (every 5-15s, task="install
// packages", counter="1", job_id="vm1"): VictoriaMetrics estimates the
// sample interval from the whole series, Peakline from the samples near
// the window, so functions that use the sample before the window may
// differ over such jitter (see rollup.go).
func vmSyntheticSeries() []tsdb.LabeledSeries {
	rng := rand.New(rand.NewPCG(16, 1))
	task := func(metric, job, counter, uuid, name string) labels.Labels {
		return labels.FromStrings("__name__", metric, "job_id", job, "counter", counter, "task_uuid", uuid, "task", name)
	}
	type gen struct {
		ls       labels.Labels
		from, to time.Duration // before vmBase
		gap      [2]time.Duration
		jitter   bool // 5-15s intervals instead of 9.5-10.5s
		value    func(i int, prev float64) float64
	}
	round2 := func(v float64) float64 { return math.Round(v*100) / 100 }
	gens := []gen{
		{ls: task(tsdb.MetricCPU, "vm1", "1", "u-1", "install packages"), from: 40 * time.Minute, jitter: true,
			value: func(int, float64) float64 { return round2(rng.Float64() * 200) }},
		{ls: task(tsdb.MetricCPU, "vm1", "2", "u-2", "restart service"), from: 40 * time.Minute, gap: [2]time.Duration{14 * time.Minute, 10 * time.Minute},
			value: func(int, float64) float64 { return float64(rng.IntN(5) * 25) }},
		{ls: task(tsdb.MetricCPU, "vm2", "1", "u-3", "install packages"), from: 17 * time.Minute, to: 3 * time.Minute,
			value: func(int, float64) float64 { return round2(rng.Float64()*50 - 10) }},
		{ls: task(tsdb.MetricMemory, "vm1", "1", "u-1", "install packages"), from: 40 * time.Minute,
			value: func(_ int, prev float64) float64 { return max(1e6, prev+float64(rng.IntN(2_000_000)-900_000)) }},
		{ls: task(tsdb.MetricPIDs, "vm1", "1", "u-1", "install packages"), from: 40 * time.Minute,
			value: func(i int, _ float64) float64 {
				if i%41 == 20 { // a fork storm: an outlier
					return 40
				}
				return float64(1 + rng.IntN(4))
			}},
		{ls: labels.FromStrings("__name__", "peakline_test_requests_total", "job_id", "vm1", "code", "200"), from: 40 * time.Minute,
			value: func(i int, prev float64) float64 {
				if i == 130 { // a restart
					return float64(rng.IntN(3))
				}
				return prev + float64(rng.IntN(7))
			}},
		{ls: labels.FromStrings("__name__", "peakline_test_requests_total", "job_id", "vm1", "code", "500"), from: 40 * time.Minute, gap: [2]time.Duration{25 * time.Minute, 22 * time.Minute},
			value: func(_ int, prev float64) float64 { return prev + round2(rng.Float64()) }},
	}
	out := make([]tsdb.LabeledSeries, 0, len(gens))
	for _, g := range gens {
		s := tsdb.LabeledSeries{Labels: g.ls}
		prev := 0.0
		for at, i := vmBase.Add(-g.from), 0; !at.After(vmBase.Add(-g.to)); i++ {
			if before := vmBase.Sub(at); before > g.gap[0] || before <= g.gap[1] {
				prev = g.value(i, prev)
				s.Ts = append(s.Ts, at.UnixMilli())
				s.Vs = append(s.Vs, prev)
			}
			if g.jitter {
				at = at.Add(5*time.Second + time.Duration(rng.IntN(10_000))*time.Millisecond)
			} else {
				at = at.Add(9500*time.Millisecond + time.Duration(rng.IntN(1000))*time.Millisecond)
			}
		}
		out = append(out, s)
	}
	return out
}

// loadPeakline stores the synthetic series and the ansible-runner job
// through the store's write paths.
func loadPeakline(store *tsdb.Store) error {
	ctx := context.Background()
	if _, err := store.AppendSeries(ctx, vmSyntheticSeries()); err != nil {
		return fmt.Errorf("append synthetic series: %w", err)
	}
	jobs, err := ansible.Read(filepath.Join("..", "..", "testdata", "ansible", "runner-basic"), ansible.ReadOptions{})
	if err != nil {
		return fmt.Errorf("read ansible job: %w", err)
	}
	for _, j := range jobs {
		b := &tsdb.Batch{JobID: j.ID}
		for _, tk := range j.Tasks {
			b.Tasks = append(b.Tasks, tsdb.Task{Counter: tk.Counter, UUID: tk.UUID, Name: tk.Name, StartMs: tk.StartMs})
		}
		if e := j.LastEvent; e != nil {
			b.LastEvent = &tsdb.Event{Counter: e.Counter, TimeMs: e.TimeMs}
		}
		for _, s := range j.Series {
			b.Series = append(b.Series, tsdb.SeriesData{Resource: s.Resource, Counter: s.Counter, UUID: s.UUID, Task: s.Task, Ts: s.Ts, Vs: s.Vs})
		}
		if _, err := store.Append(ctx, b); err != nil {
			return fmt.Errorf("append ansible job %s: %w", j.ID, err)
		}
	}
	return nil
}

// dumpStore reads every series back from the store: what VictoriaMetrics
// gets is what Peakline stored.
func dumpStore(store *tsdb.Store) ([]vmSeries, error) {
	q, err := store.Queryable().Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, fmt.Errorf("open querier: %w", err)
	}
	defer q.Close()
	set := q.Select(context.Background(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".+"))
	var out []vmSeries
	for set.Next() {
		s := vmSeries{labels: set.At().Labels().Copy()}
		it := set.At().Iterator(nil)
		for it.Next() != 0 {
			ts, v := it.At()
			s.points = append(s.points, vmPoint{t: ts, v: v})
		}
		if err := it.Err(); err != nil {
			return nil, fmt.Errorf("read %s: %w", s.labels, err)
		}
		out = append(out, s)
	}
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("select every series: %w", err)
	}
	return out, nil
}

// load imports the series into VictoriaMetrics, flushes them to be
// searchable and checks that it stored them all.
func (fx *vmFixtureT) load(series []vmSeries) error {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, s := range series {
		line := struct {
			Metric     map[string]string `json:"metric"`
			Values     []float64         `json:"values"`
			Timestamps []int64           `json:"timestamps"`
		}{Metric: s.labels.Map()}
		for _, p := range s.points {
			line.Values = append(line.Values, p.v)
			line.Timestamps = append(line.Timestamps, p.t)
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
	}
	if _, err := fx.do(http.MethodPost, "/api/v1/import", &body); err != nil {
		return err
	}
	if _, err := fx.do(http.MethodGet, "/internal/force_flush", nil); err != nil {
		return err
	}
	// The export must give back every sample.
	raw, err := fx.do(http.MethodGet, "/api/v1/export?"+url.Values{"match[]": {`{__name__=~".+"}`}}.Encode(), nil)
	if err != nil {
		return err
	}
	var got []vmSeries
	dec := json.NewDecoder(bytes.NewReader(raw))
	for dec.More() {
		var line struct {
			Metric     map[string]string `json:"metric"`
			Values     []float64         `json:"values"`
			Timestamps []int64           `json:"timestamps"`
		}
		if err := dec.Decode(&line); err != nil {
			return fmt.Errorf("decode export: %w", err)
		}
		s := vmSeries{labels: labels.FromMap(line.Metric)}
		for i := range line.Values {
			s.points = append(s.points, vmPoint{t: line.Timestamps[i], v: line.Values[i]})
		}
		got = append(got, s)
	}
	want := slices.Clone(series)
	sortSeries(got)
	sortSeries(want)
	if d := diffSeries(want, got); d != "" {
		return fmt.Errorf("VictoriaMetrics does not export what was imported (read \"Peakline\" as imported): %s", d)
	}
	return nil
}

func (fx *vmFixtureT) do(method, path string, body io.Reader) ([]byte, error) {
	req, err := http.NewRequest(method, fx.url+path, body)
	if err != nil {
		return nil, err
	}
	resp, err := fx.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(raw))
	}
	return raw, nil
}

func secs(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

// vm evaluates a query in VictoriaMetrics: an instant query at span.end
// when step is 0, else a range query over span.
func (fx *vmFixtureT) vm(q string, span *vmSpan, step time.Duration) ([]vmSeries, error) {
	params := url.Values{"query": {q}, "nocache": {"1"}}
	path := "/api/v1/query?"
	if step == 0 {
		params.Set("time", secs(span.end))
	} else {
		path = "/api/v1/query_range?"
		params.Set("start", secs(span.start))
		params.Set("end", secs(span.end))
		params.Set("step", strconv.FormatFloat(step.Seconds(), 'f', -1, 64))
	}
	raw, err := fx.do(http.MethodGet, path+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Data struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	var out []vmSeries
	switch resp.Data.ResultType {
	case "scalar":
		var p [2]any
		if err := json.Unmarshal(resp.Data.Result, &p); err != nil {
			return nil, fmt.Errorf("decode scalar: %w", err)
		}
		pt, err := vmPointOf(p)
		if err != nil {
			return nil, err
		}
		out = append(out, vmSeries{labels: labels.EmptyLabels(), points: []vmPoint{pt}})
	case "vector", "matrix":
		var rs []struct {
			Metric map[string]string `json:"metric"`
			Value  *[2]any           `json:"value"`
			Values [][2]any          `json:"values"`
		}
		if err := json.Unmarshal(resp.Data.Result, &rs); err != nil {
			return nil, fmt.Errorf("decode %s: %w", resp.Data.ResultType, err)
		}
		for _, r := range rs {
			s := vmSeries{labels: labels.FromMap(r.Metric)}
			if r.Value != nil {
				r.Values = append(r.Values, *r.Value)
			}
			for _, p := range r.Values {
				pt, err := vmPointOf(p)
				if err != nil {
					return nil, err
				}
				s.points = append(s.points, pt)
			}
			out = append(out, s)
		}
	default:
		return nil, fmt.Errorf("result type %q", resp.Data.ResultType)
	}
	sortSeries(out)
	return out, nil
}

func vmPointOf(p [2]any) (vmPoint, error) {
	ts, ok := p[0].(float64)
	vs, ok2 := p[1].(string)
	if !ok || !ok2 {
		return vmPoint{}, fmt.Errorf("point %v is not [time, \"value\"]", p)
	}
	v, err := strconv.ParseFloat(vs, 64)
	if err != nil {
		return vmPoint{}, fmt.Errorf("point %v: %w", p, err)
	}
	return vmPoint{t: int64(math.Round(ts * 1000)), v: v}, nil
}

// peakline evaluates a query with Peakline's engine, as vm does.
func (fx *vmFixtureT) peakline(q string, span *vmSpan, step time.Duration) ([]vmSeries, string, error) {
	var (
		res *query.Result
		err error
	)
	if step == 0 {
		res, err = fx.engine.Instant(context.Background(), q, span.end)
	} else {
		res, err = fx.engine.Range(context.Background(), q, span.start, span.end, step)
	}
	if err != nil {
		return nil, "", err
	}
	defer res.Close()
	out, err := seriesOf(res.Value)
	return out, res.PromQL, err
}

// seriesOf converts an engine answer; a scalar is one series without
// labels, as VictoriaMetrics answers it.
func seriesOf(v parser.Value) ([]vmSeries, error) {
	var out []vmSeries
	switch v := v.(type) {
	case promql.Scalar:
		out = append(out, vmSeries{labels: labels.EmptyLabels(), points: []vmPoint{{t: v.T, v: v.V}}})
	case promql.Vector:
		for _, s := range v {
			if s.H != nil {
				return nil, fmt.Errorf("%s: histogram sample", s.Metric)
			}
			out = append(out, vmSeries{labels: s.Metric.Copy(), points: []vmPoint{{t: s.T, v: s.F}}})
		}
	case promql.Matrix:
		for _, s := range v {
			if len(s.Histograms) > 0 {
				return nil, fmt.Errorf("%s: histogram samples", s.Metric)
			}
			vs := vmSeries{labels: s.Metric.Copy()}
			for _, p := range s.Floats {
				vs.points = append(vs.points, vmPoint{t: p.T, v: p.F})
			}
			out = append(out, vs)
		}
	default:
		return nil, fmt.Errorf("answer of type %s", v.Type())
	}
	sortSeries(out)
	return out, nil
}

// PromQL's own *_over_time functions: both engines answer them alike,
// so the harness is right only if these agree. (A bare selector is not
// among them: VictoriaMetrics ends a series at a gap longer than its
// sample interval, Prometheus only after 5m of lookback.)
func TestCompareWithVMBaseline(t *testing.T) {
	compareWithVM(t, []vmCase{
		{query: `max_over_time(peakline_cpu_percent[3m])`, keepsName: true},
		{query: `min_over_time(peakline_memory_bytes[2m])`, keepsName: true},
		{query: `sum_over_time(peakline_pids[90s])`},
		{query: `count_over_time(peakline_cpu_percent[1m])`},
		{query: `sum by (job_id) (max_over_time(peakline_cpu_percent[2m]))`},
		{query: `max_over_time(peakline_cpu_percent{task="burn some cpu"}[5s])`, keepsName: true, span: vmAnsible},
	})
}
