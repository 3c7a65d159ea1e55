package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runCode runs the binary and returns its stdout, stderr and exit code.
func runCode(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(peaklineBin(t), args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
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

// postRun stores run i of template 7 over the JSON ingest: one task
// holding memMiB MiB at most.
func postRun(t *testing.T, base, id string, i int, memMiB int) {
	t.Helper()
	start := 1_796_010_000_000 + int64(i)*600_000
	var ts, vs []string
	for j := 1; j <= 8; j++ {
		ts = append(ts, fmt.Sprint(start+int64(250*j)))
		vs = append(vs, fmt.Sprint(memMiB*j/8<<20))
	}
	body := fmt.Sprintf(`{"job_id":%q,"template_id":"7","template_name":"deploy-web","status":"successful",
		"tasks":[{"counter":3,"uuid":"u%d","name":"allocate cache","start":%d,"play":"web","task_path":"/runner/project/site.yml:14"}],
		"last_event":{"counter":9,"time":%d},
		"series":[{"resource":"memory","counter":3,"uuid":"u%d","task":"allocate cache","t":[%s],"v":[%s]}]}`,
		id, i, start, start+3000, i, strings.Join(ts, ","), strings.Join(vs, ","))
	resp, err := http.Post(base+"/api/v1/ingest", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("ingest %s: %s", id, resp.Status)
	}
}

// The CI gate's exit codes against a real serve: 1 with regressions in
// the newest run (printed as a table or JSON), 0 for a run without, 2
// for usage errors, unknown templates or runs and an unreachable server.
func TestRegressionsExitCodes(t *testing.T) {
	s := serve(t, "--data", t.TempDir())
	for i, mem := range []int{200, 204, 198, 202, 640} {
		postRun(t, s.URL, fmt.Sprint(1001+i), i, mem)
	}
	out, errOut, code := runCode(t, "regressions", "--server", s.URL, "--template", "7")
	if code != 1 || !strings.Contains(out, "template 7 (deploy-web), job 1005: 1 regression against the other 4 runs") ||
		!strings.Contains(out, "site.yml:14 allocate cache  memory_max  640.0 MiB  201.0 MiB  3.18×") {
		t.Errorf("newest run: exit %d, stdout %q stderr %q; want 1 and the table", code, out, errOut)
	}
	out, _, code = runCode(t, "regressions", "--server", s.URL, "--template", "7", "--json")
	var rep struct {
		JobID       string `json:"job_id"`
		Runs        int    `json:"runs"`
		Regressions []struct {
			Task     string  `json:"task"`
			JobID    string  `json:"job_id"`
			Metric   string  `json:"metric"`
			Value    float64 `json:"value"`
			Baseline float64 `json:"baseline"`
			Factor   float64 `json:"factor"`
		} `json:"regressions"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.JobID != "1005" || rep.Runs != 5 || len(rep.Regressions) != 1 ||
		rep.Regressions[0].Task != "site.yml:14 allocate cache" || rep.Regressions[0].Metric != "memory_max" || rep.Regressions[0].Value != 640<<20 || rep.Regressions[0].Factor != 3.18 {
		t.Errorf("--json: exit %d, %q (%v); want 1 and the one regression", code, out, err)
	}
	out, _, code = runCode(t, "regressions", "--server", s.URL, "--template", "7", "--job", "1004")
	if code != 0 || !strings.Contains(out, "job 1004: no regressions against the other 3 runs") {
		t.Errorf("--job 1004: exit %d, %q; want 0", code, out)
	}
	out, _, code = runCode(t, "regressions", "--server", s.URL, "--template", "7", "--job", "1004", "--json")
	if code != 0 || !strings.Contains(out, `"regressions": []`) {
		t.Errorf("--job 1004 --json: exit %d, %q; want 0 and an empty list", code, out)
	}

	out, _, code = runCode(t, "regressions", "--server", s.URL, "--template", "7", "--job", "1002")
	if want := "template 7 (deploy-web), job 1002: no regressions: too few runs to compare (1 other runs; a run needs 3)\n"; code != 0 || out != want {
		t.Errorf("--job 1002: exit %d, %q; want 0 and %q", code, out, want)
	}

	// A port nobody listens on.
	closed := "http://" + freeAddr(t)
	usage := func(wantMsg string, args ...string) {
		t.Helper()
		_, errOut, code := runCode(t, append([]string{"regressions"}, args...)...)
		if code != 2 || !strings.Contains(errOut, wantMsg) {
			t.Errorf("regressions %q: exit %d, stderr %q; want 2 naming %q", args, code, errOut, wantMsg)
		}
	}
	usage("--template: the job template id is required", "--server", s.URL)
	usage("--server: the URL", "--template", "7")
	usage("unknown flag: --nope", "--server", s.URL, "--template", "7", "--nope")
	usage("--last: must be from 4 to 100", "--server", s.URL, "--template", "7", "--last", "2")
	usage(`template "8" has no runs`, "--server", s.URL, "--template", "8")
	usage(`404 Not Found: job: "9999" is not a run of template "7"`, "--server", s.URL, "--template", "7", "--job", "9999")
	usage("connection refused", "--server", closed, "--template", "7")

	// A server that wants a token: none, or a wrong one, is a 2 that says so.
	dir := t.TempDir()
	authFile, badTok := filepath.Join(dir, "auth.yml"), filepath.Join(dir, "bad.tok")
	if err := os.WriteFile(authFile, []byte(`tokens: [{name: ci, token: "read-token-0123456789", scopes: [read]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(badTok, []byte("wrong-token-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	secured := serve(t, "--data", t.TempDir(), "--auth-file", authFile)
	usage("401 Unauthorized: authentication required", "--server", secured.URL, "--template", "7")
	usage("401 Unauthorized: authentication failed", "--server", secured.URL, "--template", "7", "--token-file", badTok)
}

// serve --regression-factor sets the rule's factor: 3.18 times the usual
// passes at 4; a factor below 1 is refused naming the flag.
func TestServeRegressionFactor(t *testing.T) {
	s := serve(t, "--data", t.TempDir(), "--regression-factor", "4")
	for i, mem := range []int{200, 204, 198, 202, 640} {
		postRun(t, s.URL, fmt.Sprint(1001+i), i, mem)
	}
	if out, _, code := runCode(t, "regressions", "--server", s.URL, "--template", "7"); code != 0 || !strings.Contains(out, "job 1005: no regressions") {
		t.Errorf("factor 4: exit %d, %q; want 0", code, out)
	}
	if out, err := run(t, "serve", "--data", t.TempDir(), "--regression-factor", "0.5"); err == nil || !strings.Contains(out, "--regression-factor: must be a number >= 1, got 0.5") {
		t.Errorf("serve --regression-factor 0.5: %v %q, want an error naming the flag", err, out)
	}
}
