package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// `peakline rightsize` against a real serve: the text, the JSON and the
// pod spec of a template's runs (JSON ingest with the sizing fields),
// exit 0; usage errors, an unknown template and an unreachable server
// exit 2 naming the flag.
func TestRightsizeCommand(t *testing.T) {
	s := serve(t, "--data", t.TempDir())
	for i, forks := range []int{1, 2, 3, 4, 5} {
		// 100 MiB + 50 MiB per fork, on 8 hosts.
		start := 1_796_010_000_000 + int64(i)*600_000
		body := fmt.Sprintf(`{"job_id":"%d","template_id":"7","status":"successful","forks":%d,"hosts":8,
			"tasks":[{"counter":3,"uuid":"u%d","name":"allocate cache","start":%d,"task_path":"/runner/project/site.yml:14"}],
			"last_event":{"counter":9,"time":%d},
			"series":[{"resource":"memory","counter":3,"uuid":"u%d","task":"allocate cache","t":[%d],"v":[%d]}]}`,
			1001+i, forks, i, start, start+3000, i, start+500, (100+50*forks)<<20)
		resp, err := http.Post(s.URL+"/api/v1/ingest", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("ingest: %s", resp.Status)
		}
	}
	out, errOut, code := runCode(t, "rightsize", "--server", s.URL, "--template", "7")
	// p95 of 150..350 MiB weighted by recency is 350 MiB: × 1.15 = 402.5.
	for _, want := range []string{
		"template 7: 5 of 5 runs used, confidence medium\n",
		"memory   request 403 MiB, limit 403 MiB: p95 of per-run peaks (recency-weighted) + 15%\n",
		"forks    50 MiB per fork over 100 MiB (5 runs, r² 1.0000); AWX assumes 100 MiB\n",
		"         at most 5 forks in 403 MiB\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("text: exit %d, stdout %q stderr %q; want 0 and %q", code, out, errOut, want)
		}
	}
	out, _, code = runCode(t, "rightsize", "--server", s.URL, "--template", "7", "--json", "--limit", "1GiB")
	var rs struct {
		Memory struct {
			RequestBytes int64 `json:"request_bytes"`
		} `json:"memory"`
		Forks struct {
			MaxForksForLimit int   `json:"max_forks_for_limit"`
			LimitBytes       int64 `json:"limit_bytes"`
		} `json:"forks"`
	}
	// (1024 / 1.15 − 100) / 50 = 15.8.
	if err := json.Unmarshal([]byte(out), &rs); err != nil || code != 0 || rs.Memory.RequestBytes != 403<<20 || rs.Forks.MaxForksForLimit != 15 || rs.Forks.LimitBytes != 1<<30 {
		t.Errorf("--json --limit 1GiB: exit %d, %q (%v)", code, out, err)
	}
	out, _, code = runCode(t, "rightsize", "--server", s.URL, "--template", "7", "--format", "pod-spec")
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(out), &pod); err != nil || code != 0 {
		t.Fatalf("--format pod-spec: exit %d, %v\n%s", code, err, out)
	}
	if q := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; q.Value() != 403<<20 {
		t.Errorf("pod spec memory limit %s, want 403Mi", q.String())
	}

	closed := "http://" + freeAddr(t)
	usage := func(wantMsg string, args ...string) {
		t.Helper()
		_, errOut, code := runCode(t, append([]string{"rightsize"}, args...)...)
		if code != 2 || !strings.Contains(errOut, wantMsg) {
			t.Errorf("rightsize %q: exit %d, stderr %q; want 2 naming %q", args, code, errOut, wantMsg)
		}
	}
	usage("--template: the job template id is required", "--server", s.URL)
	usage("--server: the URL", "--template", "7")
	usage("unknown flag: --nope", "--server", s.URL, "--template", "7", "--nope")
	usage("--format: must be text, json or pod-spec", "--server", s.URL, "--template", "7", "--format", "yaml")
	usage("--json: means --format json", "--server", s.URL, "--template", "7", "--json", "--format", "text")
	usage("--last: must be from 1 to 100", "--server", s.URL, "--template", "7", "--last", "0")
	usage("--limit", "--server", s.URL, "--template", "7", "--limit", "lots")
	usage(`--template: template "99" has no finished run`, "--server", s.URL, "--template", "99")
	usage("ask "+closed, "--server", closed, "--template", "7")
}
