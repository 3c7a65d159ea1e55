package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// postStallRun stores run i of template 9 over the JSON ingest: one task
// of durMs at 50 % CPU that waited for a CPU for cpuShare of its time.
func postStallRun(t *testing.T, base, id string, i int, durMs int64, cpuShare float64) {
	t.Helper()
	start := 1_796_030_000_000 + int64(i)*600_000
	var ts, cpu, stall []string
	for at := start + 250; at <= start+durMs; at += 250 {
		ts = append(ts, fmt.Sprint(at))
		cpu = append(cpu, "50")
		stall = append(stall, fmt.Sprint(0.25*cpuShare))
	}
	series := func(res string, vs []string) string {
		return fmt.Sprintf(`{"resource":%q,"counter":3,"uuid":"u%d","task":"fork sleepers","t":[%s],"v":[%s]}`, res, i, strings.Join(ts, ","), strings.Join(vs, ","))
	}
	body := fmt.Sprintf(`{"job_id":%q,"template_id":"9","status":"successful",
		"tasks":[{"counter":3,"uuid":"u%d","name":"fork sleepers","start":%d,"play":"p","task_path":"/runner/project/site.yml:4"}],
		"last_event":{"counter":9,"time":%d},
		"series":[%s,%s]}`, id, i, start, start+durMs, series("cpu", cpu), series("cpu_stall", stall))
	resp, err := http.Post(base+"/api/v1/ingest", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest %s: %s", id, resp.Status)
	}
}

// A run slowed by other work on the node (its task waited for a CPU for
// 60 % of its time, usually 5 %) is contended: printed apart, exit 0;
// --strict counts it; --max-stall 0 makes it a regression again.
func TestRegressionsContended(t *testing.T) {
	s := serve(t, "--data", t.TempDir())
	for i := range 4 {
		postStallRun(t, s.URL, fmt.Sprint(4001+i), i, 4000, 0.05)
	}
	postStallRun(t, s.URL, "4005", 4, 8000, 0.6)

	out, errOut, code := runCode(t, "regressions", "--server", s.URL, "--template", "9")
	want := "template 9, job 4005: no regressions against the other 4 runs\n" +
		"2 contended (the task waited for a CPU far more or less than usual: other work on the node; no regression without --strict)\n" +
		"TASK                    METRIC       VALUE      USUAL      FACTOR  WAITED    USUALLY\n" +
		"site.yml:4 fork sleepers  duration_ms  8.0 s      4.0 s      2.00×   60.0% cpu  5.0%\n" +
		"site.yml:4 fork sleepers  cpu_seconds  4.0 CPU s  2.0 CPU s  2.00×   60.0% cpu  5.0%\n"
	if code != 0 || !sameTable(out, want) {
		t.Errorf("contended run: exit %d, stdout\n%s\nstderr %q; want 0 and\n%s", code, out, errOut, want)
	}
	out, _, code = runCode(t, "regressions", "--server", s.URL, "--template", "9", "--json")
	var rep struct {
		Regressions []json.RawMessage `json:"regressions"`
		Contended   []struct {
			Task      string `json:"task"`
			Metric    string `json:"metric"`
			Contended bool   `json:"contended"`
			Stall     struct {
				Signal   string  `json:"signal"`
				Share    float64 `json:"share"`
				Baseline float64 `json:"baseline"`
			} `json:"stall"`
		} `json:"contended"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || len(rep.Regressions) != 0 || len(rep.Contended) != 2 ||
		rep.Contended[0].Metric != "duration_ms" || !rep.Contended[0].Contended || rep.Contended[0].Stall.Signal != "cpu" ||
		rep.Contended[0].Stall.Share != 0.6 || rep.Contended[0].Stall.Baseline != 0.05 {
		t.Errorf("--json: exit %d, %s (%v); want 0, no regressions and 2 contended (cpu 0.6 against 0.05)", code, out, err)
	}
	if _, _, code := runCode(t, "regressions", "--server", s.URL, "--template", "9", "--strict"); code != 1 {
		t.Errorf("--strict: exit %d, want 1", code)
	}
	out, _, code = runCode(t, "regressions", "--server", s.URL, "--template", "9", "--max-stall", "0")
	if code != 1 || !strings.Contains(out, "job 4005: 2 regressions against the other 4 runs") || strings.Contains(out, "contended") {
		t.Errorf("--max-stall 0: exit %d, %q; want 1 and two regressions", code, out)
	}
	_, errOut, code = runCode(t, "regressions", "--server", s.URL, "--template", "9", "--max-stall", "1.5")
	if code != 2 || !strings.Contains(errOut, "--max-stall: must be a share") {
		t.Errorf("--max-stall 1.5: exit %d, %q; want 2 naming the flag", code, errOut)
	}
}

// sameTable compares two tables line by line, runs of spaces as one.
func sameTable(got, want string) bool {
	norm := func(s string) string {
		var lines []string
		for _, l := range strings.Split(s, "\n") {
			lines = append(lines, strings.Join(strings.Fields(l), " "))
		}
		return strings.Join(lines, "\n")
	}
	return norm(got) == norm(want)
}
