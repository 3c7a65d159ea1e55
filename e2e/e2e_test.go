package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/testscale"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// peaklineBin builds the peakline binary once per test run, or returns
// PEAKLINE_TEST_BIN when set: a machine with no Go toolchain (make test-v2's
// guest) runs the tests against a binary built elsewhere.
func peaklineBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PEAKLINE_TEST_BIN"); p != "" {
		return p
	}
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "peakline-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "peakline")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/peakline/peakline").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// burnSeconds is how long a test playbook's CPU burner runs: 2 s,
// scaled, in whole seconds.
func burnSeconds(t testing.TB) string {
	return strconv.Itoa(int(testscale.Scaled(t, 2*time.Second).Round(time.Second) / time.Second))
}

// run runs the binary and returns its combined output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(peaklineBin(t), args...).CombinedOutput()
	return string(out), err
}

// runCodeWithin runs the binary as runCode does, failing the test when it
// has not ended within d (a command that should refuse its flags at once).
func runCodeWithin(t *testing.T, d time.Duration, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(peaklineBin(t), args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("peakline %q still ran after %s; stderr:\n%s", args, d, errOut.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// served is a running `peakline serve`.
type served struct {
	URL string
	cmd *exec.Cmd
	out *lockedBuffer // its stderr
}

// logs is what serve has logged so far.
func (s *served) logs() string { return s.out.String() }

// lockedBuffer is a buffer a process writes into while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var servingRE = regexp.MustCompile(`serving on (https?://[^ /]+)/`)

// serve starts `peakline serve` on a free loopback port.
func serve(t *testing.T, args ...string) *served {
	t.Helper()
	cmd := exec.Command(peaklineBin(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, out: logs}
	t.Cleanup(func() { s.stop(t) })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
			s.URL = m[1]
			break
		}
	}
	if s.URL == "" {
		t.Fatalf("serve did not print its URL; stderr:\n%s", logs.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return s
}

// stop sends SIGTERM and waits for a clean exit.
func (s *served) stop(t *testing.T) {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve exited with %v; stderr:\n%s", err, s.out.String())
		}
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Errorf("serve did not stop within 30s of SIGTERM")
	}
}

// rawSamples is the number of samples the server holds of job, over
// every resource, as its graph payload counts them.
func (s *served) rawSamples(t *testing.T, job string) int {
	t.Helper()
	var g graphDoc
	code, body := s.get(t, "/api/v1/jobs/"+url.PathEscape(job)+"/graph?points=10000")
	if code != 200 || json.Unmarshal(body, &g) != nil {
		t.Fatalf("graph of %s: %d %s", job, code, body)
	}
	n := 0
	for _, sr := range g.Series {
		n += sr.RawSamples
	}
	return n + s.stallSamples(t, job)
}

// stallSamples is the number of stall samples (cpu_stall, …: no series of
// the graph) the server holds of job in the last day, counted through its
// Prometheus API, one metric at a time (count_over_time drops the name,
// and the metrics share their other labels).
func (s *served) stallSamples(t *testing.T, job string) int {
	t.Helper()
	return stallSamplesVia(t, func(path string) (int, []byte) { return s.get(t, path) }, job)
}

// stallSamplesVia counts job's stall samples with get, which answers a
// GET of path on the server.
func stallSamplesVia(t *testing.T, get func(path string) (int, []byte), job string) int {
	t.Helper()
	total := 0
	for _, metric := range []string{"peakline_cpu_stall_seconds", "peakline_memory_stall_seconds", "peakline_cpu_throttled_seconds",
		"peakline_node_cpu_stall_seconds", "peakline_node_load_per_cpu"} {
		q := fmt.Sprintf(`sum(count_over_time(%s{job_id=%q}[1d]))`, metric, job)
		code, body := get("/prometheus/api/v1/query?query=" + url.QueryEscape(q))
		var r struct {
			Data struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		if code != 200 || json.Unmarshal(body, &r) != nil {
			t.Fatalf("count the stall samples of %s: %d %s", job, code, body)
		}
		if len(r.Data.Result) == 0 {
			continue
		}
		v, _ := r.Data.Result[0].Value[1].(string)
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("count the stall samples of %s: %q", job, v)
		}
		total += n
	}
	return total
}

func (s *served) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

const eventsTemplate = "https://awx.example/api/v2/jobs/{job_id}/job_events/?counter__gte={counter_gte}&counter__lte={counter_lte}"

// TestGolden imports the bundled real trees and compares the graph and
// tasks payloads with golden files (go test -run TestGolden -update).
func TestGolden(t *testing.T) {
	data := t.TempDir()
	trees := []string{"../testdata/ansible/runner-basic", "../testdata/ansible/recap-csv", "../testdata/ansible/runner-loops"}
	out, err := run(t, append([]string{"import", "--data", data}, trees...)...)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	s := serve(t, "--data", data, "--events-url", eventsTemplate)
	var jobs struct {
		Jobs []struct {
			JobID string `json:"job_id"`
		} `json:"jobs"`
	}
	code, body := s.get(t, "/api/v1/jobs")
	if code != 200 || json.Unmarshal(body, &jobs) != nil || len(jobs.Jobs) != 3 {
		t.Fatalf("jobs: %d %s", code, body)
	}
	for _, j := range jobs.Jobs {
		for _, q := range []string{"graph?points=1000", "graph?points=10", "graph?points=4&algorithm=lttb", "tasks"} {
			code, body := s.get(t, "/api/v1/jobs/"+j.JobID+"/"+q)
			if code != 200 {
				t.Fatalf("%s %s: %d %s", j.JobID, q, code, body)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, body, "", "  "); err != nil {
				t.Fatal(err)
			}
			name := strings.NewReplacer("?", "_", "=", "-", "&", "_", ":", "-").Replace(j.JobID + "_" + q)
			golden(t, filepath.Join("../testdata", "golden", name+".json"), pretty.Bytes())
		}
	}
	code, body = s.get(t, "/api/v1/jobs")
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, body, "", "  ")
	golden(t, filepath.Join("../testdata", "golden", "jobs.json"), pretty.Bytes())
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the served payload; diff it with -update and git diff:\n%s", path, firstDiff(want, got))
	}
}

func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < min(len(al), len(bl)); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d lines", len(al), len(bl))
}

// rawRecord is one line of a profiling JSON-seq file.
type rawRecord struct {
	Timestamp float64 `json:"timestamp"`
	TaskName  string  `json:"task_name"`
	TaskUUID  string  `json:"task_uuid"`
	Value     float64 `json:"value"`
}

// taskStart is a task start event read straight from job_events.
type taskStart struct {
	counter int64
	uuid    string
	ms      int64
}

// TestRunnerTreeExact recomputes, from the raw ansible-runner files and
// without any Peakline code, each task's samples, max and mean and each
// resource's peak, and compares them exactly with what the server says.
func TestRunnerTreeExact(t *testing.T) {
	for _, tree := range []string{"runner-basic", "runner-loops"} {
		t.Run(tree, func(t *testing.T) {
			root := filepath.Join("../testdata", "ansible", tree)
			idents, _ := filepath.Glob(filepath.Join(root, "artifacts", "*"))
			if len(idents) != 1 {
				t.Fatalf("%s: want one ident, got %v", root, idents)
			}
			ident := filepath.Base(idents[0])
			starts := readTaskStarts(t, filepath.Join(idents[0], "job_events"))

			type acc struct {
				n        int
				sum, max float64
				ts       []int64
				vs       []float64
			}
			want := map[int64]map[string]*acc{} // counter → resource
			files, _ := filepath.Glob(filepath.Join(root, "profiling_data", "*.json"))
			type sample struct {
				ms int64
				v  float64
			}
			perResource := map[string][]sample{}
			for _, f := range files {
				res := strings.TrimSuffix(f[strings.LastIndex(f, "-")+1:], ".json")
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, rec := range bytes.Split(b, []byte{0x1e}) {
					rec = bytes.TrimSpace(rec)
					if len(rec) == 0 {
						continue
					}
					var r rawRecord
					if err := json.Unmarshal(rec, &r); err != nil {
						t.Fatalf("%s: %v", f, err)
					}
					v := r.Value
					if res == "memory" {
						v *= 1 << 20
					}
					perResource[res] = append(perResource[res], sample{int64(math.Round(r.Timestamp * 1000)), v})
				}
			}
			for res, ss := range perResource {
				sort.Slice(ss, func(i, j int) bool { return ss[i].ms < ss[j].ms })
				for _, s := range ss {
					// The last task start at or before the sample.
					var counter int64
					for _, st := range starts {
						if st.ms <= s.ms {
							counter = st.counter
						}
					}
					if want[counter] == nil {
						want[counter] = map[string]*acc{}
					}
					a := want[counter][res]
					if a == nil {
						a = &acc{max: math.Inf(-1)}
						want[counter][res] = a
					}
					a.n++
					a.sum += s.v
					a.max = max(a.max, s.v)
				}
			}

			data := t.TempDir()
			if out, err := run(t, "import", "--data", data, root); err != nil {
				t.Fatalf("import: %v\n%s", err, out)
			}
			srv := serve(t, "--data", data)
			var tasks struct {
				Tasks []struct {
					Counter int64              `json:"counter"`
					Samples map[string]int     `json:"samples"`
					Max     map[string]float64 `json:"max"`
					Mean    map[string]float64 `json:"mean"`
				} `json:"tasks"`
			}
			code, body := srv.get(t, "/api/v1/jobs/"+ident+"/tasks")
			if code != 200 || json.Unmarshal(body, &tasks) != nil {
				t.Fatalf("tasks: %d %s", code, body)
			}
			if len(tasks.Tasks) != len(starts) {
				t.Fatalf("%d tasks served, %d task starts in job_events", len(tasks.Tasks), len(starts))
			}
			for i, tk := range tasks.Tasks {
				if tk.Counter != starts[i].counter {
					t.Fatalf("task %d has counter %d, job_events say %d", i, tk.Counter, starts[i].counter)
				}
				for res, a := range want[tk.Counter] {
					if tk.Samples[res] != a.n || tk.Max[res] != a.max || tk.Mean[res] != a.sum/float64(a.n) {
						t.Errorf("task %d %s: samples %d max %v mean %v, raw files say %d %v %v",
							tk.Counter, res, tk.Samples[res], tk.Max[res], tk.Mean[res], a.n, a.max, a.sum/float64(a.n))
					}
				}
				if len(tk.Samples) != len(want[tk.Counter]) {
					t.Errorf("task %d has samples of %v, raw files of %d resources", tk.Counter, tk.Samples, len(want[tk.Counter]))
				}
			}
			var graph graphDoc
			code, body = srv.get(t, "/api/v1/jobs/"+ident+"/graph")
			if code != 200 || json.Unmarshal(body, &graph) != nil {
				t.Fatalf("graph: %d %s", code, body)
			}
			for _, s := range graph.Series {
				best, bestCounter := math.Inf(-1), int64(0)
				for c, m := range want {
					if a := m[s.Resource]; a != nil && (a.max > best || (a.max == best && c < bestCounter)) {
						best, bestCounter = a.max, c
					}
				}
				if s.Peak == nil {
					t.Errorf("%s has no peak, raw files say %v in task %d", s.Resource, best, bestCounter)
				} else if s.Peak.V != best || s.Peak.Counter != bestCounter {
					t.Errorf("%s peak %v in task %d, raw files say %v in task %d", s.Resource, s.Peak.V, s.Peak.Counter, best, bestCounter)
				}
			}
		})
	}
}

// readTaskStarts reads the task, handler and cleanup task starts of a
// job_events dir, ordered by created time.
func readTaskStarts(t *testing.T, dir string) []taskStart {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var out []taskStart
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			Counter   int64  `json:"counter"`
			Event     string `json:"event"`
			Created   string `json:"created"`
			EventData struct {
				TaskUUID string `json:"task_uuid"`
			} `json:"event_data"`
		}
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		switch ev.Event {
		case "playbook_on_task_start", "playbook_on_handler_task_start", "playbook_on_cleanup_task_start":
		default:
			continue
		}
		created, err := time.Parse("2006-01-02T15:04:05.999999", ev.Created)
		if err != nil {
			t.Fatalf("%s: created %q: %v", f, ev.Created, err)
		}
		out = append(out, taskStart{ev.Counter, ev.EventData.TaskUUID, created.UnixMilli()})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].ms < out[j].ms || out[i].ms == out[j].ms && out[i].counter < out[j].counter
	})
	return out
}
