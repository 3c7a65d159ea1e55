package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ansible"
	"github.com/peakline/peakline/collector/awx/awxtest"
	"github.com/peakline/peakline/collector/ship"
)

// reattrSrc is the real runner run whose samples the tests store without
// events and whose own job_events the fake AWX serves.
const reattrSrc = "../testdata/ansible/runner-basic"

// graphPoint is one raw sample as the graph API answers it.
type graphPoint struct {
	resource string
	ms       int64
	value    float64
	counter  int64
}

// storedGraph is what the server shows of a job: every raw sample (the
// graph at 10000 points, checked to hold all of them), task names by
// counter and the job's info (the jobs list's, which the graph agrees with).
type storedGraph struct {
	points []graphPoint
	names  map[int64]string
	info   map[string]string
}

// readGraph reads job from the server at base with token ("" none); nil
// when the server does not know the job.
func readGraph(t *testing.T, base, token, job string) *storedGraph {
	t.Helper()
	var g struct {
		Series []struct {
			Resource   string    `json:"resource"`
			RawSamples int       `json:"raw_samples"`
			T          []int64   `json:"t"`
			V          []float64 `json:"v"`
			Counter    []int64   `json:"counter"`
		} `json:"series"`
		Tasks []struct {
			Counter int64  `json:"counter"`
			Name    string `json:"name"`
		} `json:"tasks"`
		TemplateID   string `json:"template_id"`
		TemplateName string `json:"template_name"`
		Measured     string `json:"measured"`
	}
	if !getJSON(t, base+"/api/v1/jobs/"+job+"/graph?points=10000", token, &g) {
		return nil
	}
	var list struct {
		Jobs []storedJob `json:"jobs"`
	}
	getJSON(t, base+"/api/v1/jobs?q="+job, token, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].JobID != job {
		t.Fatalf("jobs list for %s: %+v", job, list.Jobs)
	}
	e := list.Jobs[0]
	if e.TemplateID != g.TemplateID || e.TemplateName != g.TemplateName || e.Measured != g.Measured {
		t.Fatalf("the jobs list says %+v, the graph template %q %q measured %q", e, g.TemplateID, g.TemplateName, g.Measured)
	}
	out := &storedGraph{names: map[int64]string{}, info: map[string]string{
		"template_id": e.TemplateID, "template_name": e.TemplateName, "status": e.Status, "playbook": e.Playbook, "measured": e.Measured}}
	for _, s := range g.Series {
		if s.RawSamples != len(s.T) {
			t.Fatalf("graph of %s: %s has %d of %d raw samples; the test needs them all", job, s.Resource, len(s.T), s.RawSamples)
		}
		for i := range s.T {
			out.points = append(out.points, graphPoint{s.Resource, s.T[i], s.V[i], s.Counter[i]})
		}
	}
	for _, task := range g.Tasks {
		out.names[task.Counter] = task.Name
	}
	return out
}

// getJSON GETs url with token and decodes the answer into dst; false on 404.
func getJSON(t *testing.T, url, token string, dst any) bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return false
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return true
}

// wantPoints are the samples of job j with their counters, in the
// graph's order (resource, then time).
func wantPoints(j *ansible.Job) []graphPoint {
	var out []graphPoint
	for _, s := range j.Series {
		for i := range s.Ts {
			out = append(out, graphPoint{s.Resource, s.Ts[i], s.Vs[i], s.Counter})
		}
	}
	order := map[string]int{ansible.ResourceCPU: 0, ansible.ResourceMemory: 1, ansible.ResourcePids: 2}
	slices.SortFunc(out, func(a, b graphPoint) int {
		return cmp.Or(cmp.Compare(order[a.resource], order[b.resource]), cmp.Compare(a.ms, b.ms))
	})
	return out
}

// reattrFixture is the runner's job read whole (the reference: its own
// events attribute its samples) and read without events, as job 4242 whose
// samples an agent stored with counter 0 while AWX was down, measured
// from the process tree; the latter written as a batch file to import.
type reattrFixture struct {
	whole, bare *ansible.Job
	bareFile    string
	events      string // the runner's job_events dir, served by the fake AWX
}

func newReattrFixture(t *testing.T) reattrFixture {
	t.Helper()
	whole, err := ansible.Read(reattrSrc, ansible.ReadOptions{JobID: "4242"})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := ansible.Read(reattrSrc, ansible.ReadOptions{JobID: "4242", Events: []ansible.JobEvent{}})
	if err != nil {
		t.Fatal(err)
	}
	bare[0].Info = ansible.JobInfo{Status: "running", Measured: ansible.MeasuredProcessTree}
	for _, task := range bare[0].Tasks {
		if task.Counter != 0 {
			t.Fatalf("the bare job has counter %d", task.Counter)
		}
	}
	file := filepath.Join(t.TempDir(), "bare.json")
	var b strings.Builder
	for _, batch := range ship.Batches(bare[0], 0) {
		line, err := json.Marshal(&batch)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return reattrFixture{whole: whole[0], bare: bare[0], bareFile: file, events: filepath.Join(reattrSrc, "artifacts", "demo2", "job_events")}
}

// newReattrAWX is a fake AWX holding job 4242 with the runner's events.
func newReattrAWX(t *testing.T, fx reattrFixture) (*awxtest.Server, string) {
	t.Helper()
	awxSrv := awxtest.NewServer(awxtest.Options{Token: "awx-read-token"})
	t.Cleanup(awxSrv.Close)
	awxSrv.AddJob(awxtest.Job{ID: 4242, Name: "perf demo run", Status: "successful", TemplateID: 77, TemplateName: "perf demo",
		Playbook: "perf.yml", ExecutionNode: "exec-1", EventProcessingFinished: true}, fx.events)
	tokenFile := filepath.Join(t.TempDir(), "awx-token")
	if err := os.WriteFile(tokenFile, []byte("awx-read-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return awxSrv, tokenFile
}

// checkStored checks that the server holds job 4242 as want: every sample
// with its exact time and value, each under want's counter, the names of
// want's tasks of known counter, and the info given.
func checkStored(t *testing.T, g *storedGraph, want *ansible.Job, info map[string]string) {
	t.Helper()
	if g == nil {
		t.Fatal("the server does not hold job 4242")
	}
	wp := wantPoints(want)
	if !slices.Equal(g.points, wp) || len(wp) == 0 {
		t.Fatalf("stored samples\n%v\nwant\n%v", g.points, wp)
	}
	for _, task := range want.Tasks {
		if task.Counter != 0 && g.names[task.Counter] != task.Name { // counter 0: several tasks
			t.Fatalf("task %d is named %q, want %q", task.Counter, g.names[task.Counter], task.Name)
		}
	}
	for k, v := range info {
		if g.info[k] != v {
			t.Fatalf("job info %v, want %s=%q", g.info, k, v)
		}
	}
}

// TestReattrData stores a job's samples without events (counter 0), as an
// agent does when AWX is down, then re-attributes it in the embedded store
// with import --awx-url --job and no PATH: the store then holds the very
// same samples under the runner's own counters and names, with AWX's
// template and the measurement kept; the refusals change nothing.
func TestReattrData(t *testing.T) {
	fx := newReattrFixture(t)
	awxSrv, awxToken := newReattrAWX(t, fx)
	data := t.TempDir()
	if out, err := run(t, "import", "--data", data, fx.bareFile); err != nil {
		t.Fatalf("import the bare job: %v\n%s", err, out)
	}
	before := func() {
		t.Helper()
		s := serve(t, "--data", data)
		checkStored(t, readGraph(t, s.URL, "", "4242"), fx.bare, map[string]string{"measured": "process-tree", "template_id": ""})
		s.stop(t)
	}
	before()

	// Refusals: no samples stored; AWX's events far from the samples.
	awxSrv.AddJob(awxtest.Job{ID: 4243, Status: "successful", EventProcessingFinished: true}, fx.events)
	out, err := run(t, "import", "--data", data, "--awx-url", awxSrv.URL, "--awx-token-file", awxToken, "--job", "4243")
	if want := "--job 4243: Peakline holds no samples of job 4243"; err == nil || !strings.Contains(out, want) {
		t.Fatalf("no samples: %v, output %q, want %q", err, out, want)
	}
	early := shiftedEvents(t, fx.events, -24*time.Hour)
	awxSrv.AddJob(awxtest.Job{ID: 4242, Status: "successful", EventProcessingFinished: true}, early)
	keep := filepath.Join(t.TempDir(), "kept.json")
	out, err = run(t, "import", "--data", data, "--awx-url", awxSrv.URL, "--awx-token-file", awxToken, "--job", "4242", "--keep", keep)
	if want := "none of the " + fmt.Sprint(fx.bare.Samples()) + " samples lies within the events of AWX job 4242"; err == nil || !strings.Contains(out, want) || !strings.Contains(out, "--force") {
		t.Fatalf("events elsewhere: %v, output %q, want %q and --force", err, out, want)
	}
	if _, err := os.Stat(keep); !os.IsNotExist(err) {
		t.Fatalf("a refused run kept a file: %v", err)
	}
	before()

	awxSrv.AddJob(awxtest.Job{ID: 4242, Name: "perf demo run", Status: "successful", TemplateID: 77, TemplateName: "perf demo",
		Playbook: "perf.yml", EventProcessingFinished: true}, fx.events)
	out, err = run(t, "import", "--data", data, "--awx-url", awxSrv.URL, "--awx-token-file", awxToken, "--job", "4242", "--keep", keep)
	if err != nil {
		t.Fatalf("re-attribute: %v\n%s", err, out)
	}
	for _, want := range []string{
		"job 4242: the re-attributed job is kept in " + keep,
		fmt.Sprintf("tasks before: %d", len(fx.bare.Tasks)),
		fmt.Sprintf("after: %d (AWX's task starts)", len(fx.whole.Tasks)),
		fmt.Sprintf("stored re-attributed and checked: %d samples", fx.whole.Samples()),
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("the output does not say %q:\n%s", want, out)
		}
	}
	for _, task := range fx.whole.Tasks {
		if !strings.Contains(out, fmt.Sprintf("task %d %q:", task.Counter, task.Name)) {
			t.Fatalf("the output does not name task %d %q:\n%s", task.Counter, task.Name, out)
		}
	}
	s := serve(t, "--data", data)
	info := map[string]string{"template_id": "77", "template_name": "perf demo", "status": "successful", "playbook": "perf.yml", "measured": "process-tree"}
	checkStored(t, readGraph(t, s.URL, "", "4242"), fx.whole, info)
	s.stop(t)
}

// shiftedEvents copies the job_events dir src with every created time
// moved by d.
func shiftedEvents(t *testing.T, src string, d time.Duration) string {
	t.Helper()
	dst, _ := copyEvents(t, src, func(ev map[string]any) {
		ms, err := ansible.ParseCreated(ev["created"].(string))
		if err != nil {
			t.Fatal(err)
		}
		ev["created"] = time.UnixMilli(ms).Add(d).UTC().Format("2006-01-02T15:04:05.000000")
	})
	return dst
}

// TestReattrServer does the same through a running server with tokens: a
// read-only token reads the job but is refused the delete, which leaves
// the job untouched and names the scope; an admin token re-attributes it;
// and the kept copy restores the job after it is deleted.
func TestReattrServer(t *testing.T) {
	fx := newReattrFixture(t)
	awxSrv, awxToken := newReattrAWX(t, fx)
	dir := t.TempDir()
	authFile := filepath.Join(dir, "auth.yml")
	if err := os.WriteFile(authFile, []byte("tokens:\n  - name: ops\n    token: admin-token-123456\n    scopes: [admin]\n  - name: grafana\n    token: read-token-1234567\n    scopes: [read]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := func(name, token string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	admin, read := tokenFile("admin.token", "admin-token-123456"), tokenFile("read.token", "read-token-1234567")
	// A query may hold 10 samples: the read pages through the job.
	s := serve(t, "--data", t.TempDir(), "--auth-file", authFile, "--query-max-samples", "10")
	if out, err := run(t, "import", "--server", s.URL, "--token-file", admin, fx.bareFile); err != nil {
		t.Fatalf("import the bare job: %v\n%s", err, out)
	}
	checkStored(t, readGraph(t, s.URL, "read-token-1234567", "4242"), fx.bare, map[string]string{"measured": "process-tree"})

	keepRefused := filepath.Join(t.TempDir(), "refused.json")
	out, err := run(t, "import", "--server", s.URL, "--token-file", read, "--awx-url", awxSrv.URL, "--awx-token-file", awxToken, "--job", "4242", "--keep", keepRefused)
	for _, want := range []string{`needs the "admin" scope`, "--token-file " + read, "the stored job is unchanged"} {
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("read-only token: %v, output %q, want %q", err, out, want)
		}
	}
	checkStored(t, readGraph(t, s.URL, "read-token-1234567", "4242"), fx.bare, map[string]string{"measured": "process-tree", "template_id": ""})
	if _, err := os.Stat(keepRefused); err != nil || !strings.Contains(out, "kept in "+keepRefused) {
		t.Fatalf("the copy kept before the refused delete: %v; output %q", err, out)
	}

	keep := filepath.Join(t.TempDir(), "kept.json")
	out, err = run(t, "import", "--server", s.URL, "--token-file", admin, "--awx-url", awxSrv.URL, "--awx-token-file", awxToken, "--job", "4242", "--keep", keep)
	if err != nil {
		t.Fatalf("re-attribute: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("stored re-attributed and checked: %d samples", fx.whole.Samples()); !strings.Contains(out, want) {
		t.Fatalf("the output does not say %q:\n%s", want, out)
	}
	info := map[string]string{"template_id": "77", "template_name": "perf demo", "status": "successful", "playbook": "perf.yml", "measured": "process-tree"}
	checkStored(t, readGraph(t, s.URL, "read-token-1234567", "4242"), fx.whole, info)
	// 72 samples at most 10 a query: the reads were refused whole and paged.
	if ok, refused := queryCount(t, s.URL, "200"), queryCount(t, s.URL, "422"); ok < 2*((fx.whole.Samples()+9)/10) || refused < 1 {
		t.Fatalf("%d queries answered and %d refused, want the reads paged in windows of at most 10 samples", ok, refused)
	}

	// The kept copy restores the job.
	req, err := http.NewRequest(http.MethodDelete, s.URL+"/api/v1/jobs/4242", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer admin-token-123456")
	req.Header.Set("X-Peakline-CSRF", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || readGraph(t, s.URL, "read-token-1234567", "4242") != nil {
		t.Fatalf("delete: %s, or the job is still there", resp.Status)
	}
	if out, err := run(t, "import", "--server", s.URL, "--token-file", admin, keep); err != nil {
		t.Fatalf("import the kept copy: %v\n%s", err, out)
	}
	checkStored(t, readGraph(t, s.URL, "read-token-1234567", "4242"), fx.whole, info)
}

// queryCount is the number of Prometheus instant queries the server at
// base answered with code, from its own request metrics.
func queryCount(t *testing.T, base, code string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer read-token-1234567")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "peakline_http_request_duration_seconds_count{") &&
			strings.Contains(line, `route="/prometheus/api/v1/query"`) && strings.Contains(line, `code="`+code+`"`) {
			var v int
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			n += v
		}
	}
	return n
}
