package server_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

const testEventsURL = "https://awx.example/api/v2/jobs/{job_id}/job_events/?counter__gte={counter_gte}&counter__lte={counter_lte}"

// newTestServer serves a fresh on-disk store over real HTTP on loopback.
func newTestServer(t *testing.T) (*httptest.Server, *tsdb.Store) {
	t.Helper()
	return newTestServerWith(t, tsdb.Options{}, nil)
}

// newTestServerWith is newTestServer with store options and a registry
// for the store's and the server's metrics (nil for none).
func newTestServerWith(t *testing.T, opts tsdb.Options, reg *prometheus.Registry) (*httptest.Server, *tsdb.Store) {
	t.Helper()
	var storeReg prometheus.Registerer
	if reg != nil {
		storeReg = reg
	}
	store, err := tsdb.Open(t.TempDir(), opts, nil, storeReg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{EventsURL: testEventsURL}, store, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		_ = store.Close()
	})
	return hs, store
}

// batchJSON is the ingest document, encoded here independently of the
// server's own types.
func batchJSON(j *workload.Job) []byte {
	type task struct {
		Counter int64  `json:"counter"`
		UUID    string `json:"uuid"`
		Name    string `json:"name"`
		Start   int64  `json:"start"`
	}
	type series struct {
		Resource string    `json:"resource"`
		Counter  int64     `json:"counter"`
		UUID     string    `json:"uuid"`
		Task     string    `json:"task"`
		T        []int64   `json:"t"`
		V        []float64 `json:"v"`
	}
	doc := struct {
		JobID     string           `json:"job_id"`
		Tasks     []task           `json:"tasks"`
		LastEvent map[string]int64 `json:"last_event"`
		Series    []series         `json:"series"`
	}{JobID: j.ID, LastEvent: map[string]int64{"counter": j.LastCounter, "time": j.LastEventMs}}
	for _, tk := range j.Tasks {
		doc.Tasks = append(doc.Tasks, task{tk.Counter, tk.UUID, tk.Name, tk.StartMs})
	}
	for _, s := range j.Series {
		tk := j.Tasks[s.Task]
		doc.Series = append(doc.Series, series{s.Resource, tk.Counter, tk.UUID, tk.Name, s.Ts, s.Vs})
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return b
}

func post(t *testing.T, url string, body []byte, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, url string, dst any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if dst != nil {
		if err := json.Unmarshal(b, dst); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, b)
		}
	}
	return resp.StatusCode
}

// graphDoc is the payload as a client decodes it.
type graphDoc struct {
	JobID     string `json:"job_id"`
	Points    int    `json:"points"`
	Algorithm string `json:"algorithm"`
	From, To  int64
	Series    []struct {
		Resource   string    `json:"resource"`
		Unit       string    `json:"unit"`
		RawSamples int       `json:"raw_samples"`
		T          []int64   `json:"t"`
		V          []float64 `json:"v"`
		Counter    []int64   `json:"counter"`
		Peak       *struct {
			T       int64   `json:"t"`
			V       float64 `json:"v"`
			Counter int64   `json:"counter"`
		} `json:"peak"`
	} `json:"series"`
	Tasks     []taskDoc `json:"tasks"`
	EventsURL string    `json:"events_url"`
}

// taskDoc is one task of the graph and tasks payloads as a client decodes it.
type taskDoc struct {
	Counter int64  `json:"counter"`
	UUID    string `json:"uuid"`
	Name    string `json:"name"`
	Start   int64  `json:"start"`
	End     int64  `json:"end"`
	Events  *struct {
		GTE int64 `json:"counter_gte"`
		LTE int64 `json:"counter_lte"`
	} `json:"events"`
	Samples map[string]int     `json:"samples"`
	Max     map[string]float64 `json:"max"`
	Mean    map[string]float64 `json:"mean"`
}

type rawSample struct {
	v       float64
	counter int64
}

// TestGraphInvariants checks the payload contract on random synthetic jobs.
func TestGraphInvariants(t *testing.T) {
	hs, _ := newTestServer(t)
	rng := rand.New(rand.NewPCG(7, 11))
	cases := 30
	if testing.Short() {
		cases = 8
	}
	for c := 0; c < cases; c++ {
		spec := workload.JobSpec{
			Tasks:              1 + rng.IntN(40),
			SamplesPerResource: rng.IntN(3000),
			StartMs:            1796009960000 - rng.Int64N(1e9), // in the past: the store refuses times ahead of its clock
		}
		if rng.IntN(4) == 0 {
			spec.Resources = []string{"memory"}
		}
		job := workload.AnsibleJob(fmt.Sprintf("job-%d", c), spec, int64(c))
		if code, body := post(t, hs.URL+"/api/v1/ingest", batchJSON(job), nil); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
		raw := map[string]map[int64]rawSample{}
		var span [2]int64
		span[0] = math.MaxInt64
		for _, s := range job.Series {
			if raw[s.Resource] == nil {
				raw[s.Resource] = map[int64]rawSample{}
			}
			for i, ts := range s.Ts {
				raw[s.Resource][ts] = rawSample{s.Vs[i], job.Tasks[s.Task].Counter}
				span[0], span[1] = min(span[0], ts), max(span[1], ts)
			}
		}
		for _, n := range []int{2, 3, 10, 100, 1000} {
			url := fmt.Sprintf("%s/api/v1/jobs/%s/graph?points=%d", hs.URL, job.ID, n)
			from, to := int64(math.MinInt64), int64(math.MaxInt64)
			if spec.SamplesPerResource > 0 && rng.IntN(3) == 0 {
				from = span[0] + rng.Int64N(span[1]-span[0]+1)
				to = from + rng.Int64N(span[1]-from+1)
				url += fmt.Sprintf("&from=%d&to=%d", from, to)
			}
			var g graphDoc
			if code := getJSON(t, url, &g); code != 200 {
				t.Fatalf("GET %s: %d", url, code)
			}
			checkGraph(t, url, &g, raw, job, n, from, to)
		}
	}
}

func checkGraph(t *testing.T, url string, g *graphDoc, raw map[string]map[int64]rawSample, job *workload.Job, n int, from, to int64) {
	t.Helper()
	if g.Points != n || g.JobID != job.ID {
		t.Fatalf("%s: points=%d job=%q", url, g.Points, g.JobID)
	}
	seen := map[string]bool{}
	referenced := map[int64]bool{}
	for _, s := range g.Series {
		seen[s.Resource] = true
		// The window's raw samples, in time order.
		var ts []int64
		for tt := range raw[s.Resource] {
			if tt >= from && tt <= to {
				ts = append(ts, tt)
			}
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		if s.RawSamples != len(ts) {
			t.Fatalf("%s %s: raw_samples=%d, want %d", url, s.Resource, s.RawSamples, len(ts))
		}
		if len(s.T) != len(s.V) || len(s.T) != len(s.Counter) || len(s.T) > n {
			t.Fatalf("%s %s: lengths t=%d v=%d counter=%d, n=%d", url, s.Resource, len(s.T), len(s.V), len(s.Counter), n)
		}
		if len(ts) <= n && len(s.T) != len(ts) {
			t.Fatalf("%s %s: %d points for %d raw samples <= n", url, s.Resource, len(s.T), len(ts))
		}
		for i, tt := range s.T {
			if i > 0 && tt <= s.T[i-1] {
				t.Fatalf("%s %s: times not strictly increasing at %d", url, s.Resource, i)
			}
			r, ok := raw[s.Resource][tt]
			if !ok || r.v != s.V[i] || r.counter != s.Counter[i] {
				t.Fatalf("%s %s: point %d (%d, %v, counter %d) is not the raw sample %+v", url, s.Resource, i, tt, s.V[i], s.Counter[i], r)
			}
			referenced[s.Counter[i]] = true
		}
		if len(ts) > 0 && n >= 2 && (s.T[0] != ts[0] || s.T[len(s.T)-1] != ts[len(ts)-1]) {
			t.Fatalf("%s %s: first/last not kept", url, s.Resource)
		}
		// The peak is the exact maximum (first one on ties).
		var peakT int64
		peakV := math.Inf(-1)
		for _, tt := range ts {
			if v := raw[s.Resource][tt].v; v > peakV {
				peakV, peakT = v, tt
			}
		}
		if s.Peak == nil || s.Peak.V != peakV || s.Peak.T != peakT || s.Peak.Counter != raw[s.Resource][peakT].counter {
			t.Fatalf("%s %s: peak %+v, want t=%d v=%v", url, s.Resource, s.Peak, peakT, peakV)
		}
		if n >= 4 {
			found := false
			for i := range s.T {
				found = found || (s.T[i] == peakT)
			}
			if !found && len(s.T) > 0 {
				t.Fatalf("%s %s: default algorithm dropped the peak", url, s.Resource)
			}
		}
	}
	for res, samples := range raw {
		inWindow := 0
		for tt := range samples {
			if tt >= from && tt <= to {
				inWindow++
			}
		}
		if inWindow > 0 && !seen[res] {
			t.Fatalf("%s: resource %s missing", url, res)
		}
	}
	if len(raw) < 3 && len(g.Series) > len(raw) {
		t.Fatalf("%s: absent resources must be omitted, got %d series", url, len(g.Series))
	}
	listed := map[int64]bool{}
	for _, tk := range g.Tasks {
		listed[tk.Counter] = true
		if tk.Events == nil || tk.Events.GTE != tk.Counter || tk.Events.LTE < tk.Counter {
			t.Fatalf("%s: task %d events %+v", url, tk.Counter, tk.Events)
		}
	}
	for c := range referenced {
		if !listed[c] {
			t.Fatalf("%s: a point refers to task %d, which the payload does not list", url, c)
		}
	}
	if !strings.Contains(g.EventsURL, "/jobs/"+job.ID+"/job_events/?counter__gte={counter_gte}") {
		t.Fatalf("%s: events_url %q", url, g.EventsURL)
	}
}

// TestTasksExact compares /tasks with statistics computed here from the
// generated samples, and checks event ranges end at the next task's start.
func TestTasksExact(t *testing.T) {
	hs, _ := newTestServer(t)
	job := workload.AnsibleJob("exact", workload.JobSpec{Tasks: 25, SamplesPerResource: 5000, StartMs: 1796009960000}, 3)
	if code, body := post(t, hs.URL+"/api/v1/ingest", batchJSON(job), nil); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	var doc struct {
		Tasks []taskDoc `json:"tasks"`
	}
	if code := getJSON(t, hs.URL+"/api/v1/jobs/exact/tasks", &doc); code != 200 {
		t.Fatalf("tasks: %d", code)
	}
	if len(doc.Tasks) != len(job.Tasks) {
		t.Fatalf("tasks = %d, want %d", len(doc.Tasks), len(job.Tasks))
	}
	for i, tk := range doc.Tasks {
		want := job.Tasks[i]
		if tk.Counter != want.Counter || tk.Start != want.StartMs {
			t.Fatalf("task %d = counter %d start %d, want %d %d", i, tk.Counter, tk.Start, want.Counter, want.StartMs)
		}
		wantLTE := job.LastCounter
		wantEnd := job.LastEventMs
		if i+1 < len(job.Tasks) {
			wantLTE = job.Tasks[i+1].Counter - 1
			wantEnd = job.Tasks[i+1].StartMs
		}
		if tk.Events == nil || tk.Events.GTE != want.Counter || tk.Events.LTE != wantLTE || tk.End != wantEnd {
			t.Fatalf("task %d: events %+v end %d, want [%d,%d] end %d", i, tk.Events, tk.End, want.Counter, wantLTE, wantEnd)
		}
		for _, s := range job.Series {
			if s.Task != i {
				continue
			}
			mx, sum := math.Inf(-1), 0.0
			for _, v := range s.Vs {
				mx = max(mx, v)
				sum += v
			}
			if tk.Samples[s.Resource] != len(s.Vs) || tk.Max[s.Resource] != mx || tk.Mean[s.Resource] != sum/float64(len(s.Vs)) {
				t.Fatalf("task %d %s: samples %d max %v mean %v, want %d %v %v", i, s.Resource,
					tk.Samples[s.Resource], tk.Max[s.Resource], tk.Mean[s.Resource], len(s.Vs), mx, sum/float64(len(s.Vs)))
			}
		}
	}
}

func TestBadRequests(t *testing.T) {
	hs, _ := newTestServer(t)
	job := workload.AnsibleJob("j1", workload.JobSpec{Tasks: 3, SamplesPerResource: 50, StartMs: 1796009960000}, 1)
	if code, body := post(t, hs.URL+"/api/v1/ingest", batchJSON(job), nil); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	get := func(path string, wantCode int, wantMsg string) {
		t.Helper()
		var e struct {
			Error string `json:"error"`
		}
		code := getJSON(t, hs.URL+path, &e)
		if code != wantCode || !strings.Contains(e.Error, wantMsg) {
			t.Fatalf("GET %s = %d %q, want %d with %q", path, code, e.Error, wantCode, wantMsg)
		}
	}
	get("/api/v1/jobs/j1/graph?points=0", 400, "points: must be an integer between 2 and 10000, got 0")
	get("/api/v1/jobs/j1/graph?points=abc", 400, `points: must be an integer, got "abc"`)
	get("/api/v1/jobs/j1/graph?points=10001", 400, "points")
	get("/api/v1/jobs/j1/graph?from=2000&to=1000", 400, "from: must not be after to")
	get("/api/v1/jobs/j1/graph?from=yesterday", 400, `from: must be a unix time in milliseconds, got "yesterday"`)
	get("/api/v1/jobs/j1/graph?algorithm=fancy", 400, `algorithm: must be one of`)
	get("/api/v1/jobs/nope/graph", 404, `job not found: "nope"`)
	get("/api/v1/jobs/nope/tasks", 404, `job not found`)

	postErr := func(body string, header map[string]string, wantCode int, wantMsg string) {
		t.Helper()
		code, resp := post(t, hs.URL+"/api/v1/ingest", []byte(body), header)
		if code != wantCode || !strings.Contains(resp, wantMsg) {
			t.Fatalf("POST %.60q = %d %s, want %d with %q", body, code, resp, wantCode, wantMsg)
		}
	}
	postErr(`{"job_id": "x", "series": [{"resource": "cpu", "t": [1,2], "v": [1]}]}`, nil, 400, "series[0]: t has 2 values but v has 1")
	postErr(`{"job_id": "x", "series": [{"resource": "disk", "t": [1], "v": [1]}]}`, nil, 400, "series[0].resource")
	postErr(`{"job_id": "x", "series": [{"resource": "cpu", "t": ["a"], "v": [1]}]}`, nil, 400, "series.t: must be int64")
	postErr(`{"job_id": "", "series": []}`, nil, 400, "job_id: is required")
	postErr(`{"job_id": "a\u001bb", "series": []}`, nil, 400, "job_id: has a control character (U+001B) at byte 1")
	postErr("{\"job_id\": \"j\xff\", \"series\": []}", nil, 400, "job_id: has an invalid UTF-8 sequence (or U+FFFD) at byte 1")
	postErr(`{"job_id": "x", "series": [{"resource": "cpu", "t": [1796009960000], "v": [null]}]}`, nil, 400, "must be a number, got null")
	// Times outside the store's admission window refuse the whole batch
	// (400: a collector must not retry it), saying what unit they look like.
	postErr(`{"job_id": "j1", "series": [{"resource": "cpu", "t": [1796009960000, 1796010000000000], "v": [1, 2]}]}`, nil, 400,
		"invalid batch: series[0].t[1]: 1796010000000000 looks like microseconds; send unix milliseconds")
	postErr(`{"job_id": "j1", "tasks": [{"counter": 1, "uuid": "u", "name": "n", "start": 946684799999}]}`, nil, 400,
		"invalid batch: tasks[0].start: 946684799999 is before 2000-01-01T00:00:00Z")
	postErr(`{"job_id": "x", "sries": []}`, nil, 400, `unknown field \"sries\"`)
	postErr(`{"job_id": "x"`, nil, 400, "body: JSON ends early")
	postErr(`{}`, map[string]string{"Content-Type": "text/plain"}, 415, "Content-Type must be application/json")
	postErr(`{}`, map[string]string{"Content-Encoding": "br"}, 415, "Content-Encoding must be gzip or identity")
	postErr(`not gzip`, map[string]string{"Content-Encoding": "gzip"}, 400, "Content-Encoding is gzip but the body is not")

	// Nothing above changed the stored job.
	var g graphDoc
	if code := getJSON(t, hs.URL+"/api/v1/jobs/j1/graph", &g); code != 200 || len(g.Series) != 3 || g.Series[0].RawSamples != 50 {
		t.Fatalf("job j1 after bad requests: %d, %d series", code, len(g.Series))
	}
	var jobs struct {
		Jobs []struct {
			JobID string `json:"job_id"`
		} `json:"jobs"`
	}
	if getJSON(t, hs.URL+"/api/v1/jobs", &jobs); len(jobs.Jobs) != 1 || jobs.Jobs[0].JobID != "j1" {
		t.Fatalf("jobs after bad requests: %+v", jobs)
	}
}

// A gzip bomb is refused once its decoded size passes the limit.
func TestIngestDecodedLimit(t *testing.T) {
	store, err := tsdb.Open(t.TempDir(), tsdb.Options{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	srv, err := server.New(server.Config{MaxDecodedBytes: 1 << 20}, store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write([]byte(`{"job_id": "x", "series": [{"resource": "cpu", "task": "`))
	_, _ = zw.Write(bytes.Repeat([]byte("a"), 8<<20))
	_ = zw.Close()
	code, body := post(t, hs.URL+"/api/v1/ingest", buf.Bytes(), map[string]string{"Content-Encoding": "gzip"})
	if code != 413 || !strings.Contains(body, "decoded size exceeds 1048576 bytes") {
		t.Fatalf("gzip bomb: %d %s", code, body)
	}
}

func TestDeleteAndList(t *testing.T) {
	hs, _ := newTestServer(t)
	for i, id := range []string{"old", "new"} {
		job := workload.AnsibleJob(id, workload.JobSpec{Tasks: 2, SamplesPerResource: 20, StartMs: 1796009960000 + int64(i)*3600_000}, int64(i))
		if code, body := post(t, hs.URL+"/api/v1/ingest", batchJSON(job), map[string]string{}); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
	}
	var jobs struct {
		Jobs []struct {
			JobID   string         `json:"job_id"`
			Tasks   int            `json:"tasks"`
			Samples map[string]int `json:"samples"`
		} `json:"jobs"`
	}
	getJSON(t, hs.URL+"/api/v1/jobs", &jobs)
	if len(jobs.Jobs) != 2 || jobs.Jobs[0].JobID != "new" || jobs.Jobs[1].Tasks != 2 || jobs.Jobs[1].Samples["pids"] != 20 {
		t.Fatalf("jobs = %+v, want new first", jobs)
	}
	req, _ := http.NewRequest(http.MethodDelete, hs.URL+"/api/v1/jobs/old", nil)
	req.Header.Set("X-Peakline-CSRF", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("delete: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if code := getJSON(t, hs.URL+"/api/v1/jobs/old/graph", nil); code != 404 {
		t.Fatalf("graph of deleted job: %d", code)
	}
	getJSON(t, hs.URL+"/api/v1/jobs", &jobs)
	if len(jobs.Jobs) != 1 || jobs.Jobs[0].JobID != "new" {
		t.Fatalf("jobs after delete = %+v", jobs)
	}
}

func TestGzipResponse(t *testing.T) {
	hs, _ := newTestServer(t)
	job := workload.AnsibleJob("z", workload.JobSpec{Tasks: 5, SamplesPerResource: 2000, StartMs: 1796009960000}, 5)
	if code, body := post(t, hs.URL+"/api/v1/ingest", batchJSON(job), nil); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/api/v1/jobs/z/graph", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Content-Encoding = %q, want gzip", resp.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var g graphDoc
	if err := json.NewDecoder(zr).Decode(&g); err != nil || len(g.Series) != 3 {
		t.Fatalf("gzip body: %v, %d series", err, len(g.Series))
	}
}

// Job ids with characters that must be escaped in a path work.
func TestEscapedJobIDs(t *testing.T) {
	hs, _ := newTestServer(t)
	for _, id := range []string{"ansible-perf-2026-11-30T03:39:20.072139", "team/a b", "50%off"} {
		job := workload.AnsibleJob(id, workload.JobSpec{Tasks: 2, SamplesPerResource: 10, StartMs: 1796009960000}, 1)
		if code, body := post(t, hs.URL+"/api/v1/ingest", batchJSON(job), nil); code != 200 {
			t.Fatalf("ingest %q: %d %s", id, code, body)
		}
		var g graphDoc
		if code := getJSON(t, hs.URL+"/api/v1/jobs/"+url.PathEscape(id)+"/graph", &g); code != 200 || g.JobID != id {
			t.Fatalf("graph of %q: %d, job_id %q", id, code, g.JobID)
		}
		req, _ := http.NewRequest(http.MethodDelete, hs.URL+"/api/v1/jobs/"+url.PathEscape(id), nil)
		req.Header.Set("X-Peakline-CSRF", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("delete %q: %v %v", id, resp, err)
		}
		resp.Body.Close()
	}
}
