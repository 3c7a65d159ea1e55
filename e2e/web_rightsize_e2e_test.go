package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"testing"
)

// webFmtBytes is the pages' fmtBytes: binary units, one decimal.
func webFmtBytes(v float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for i < len(units)-1 && math.Abs(v) >= math.Pow(1024, float64(i+1)) {
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", int64(math.Round(v)))
	}
	return fmt.Sprintf("%.1f %s", v/math.Pow(1024, float64(i)), units[i])
}

// testRightsizePages checks, on the real runs of TestRightsizeRealRuns,
// the template page's Right-size section (the recommendation the API
// gives, the OOM-killed and at-cap runs linked to their job pages at
// their task, the pod spec) and the job page's OOM and at-cap marks.
func testRightsizePages(t *testing.T, s *served, holdCounter int64) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the page test needs Debian's chromium in PATH (%v) (or run go test -short to skip it)", err)
	}
	code, body := s.get(t, "/api/v1/templates/77/rightsize")
	var rs struct {
		Memory struct {
			RequestBytes int64 `json:"request_bytes"`
		} `json:"memory"`
		AtCap []struct {
			JobID   string `json:"job_id"`
			Counter int64  `json:"counter"`
		} `json:"at_cap"`
		PodSpecOverride string `json:"pod_spec_override"`
	}
	if code != 200 || json.Unmarshal(body, &rs) != nil || len(rs.AtCap) != 1 {
		t.Fatalf("rightsize: %d %s", code, body)
	}
	browser := webBrowser(t, chromium)
	tab := webOpenTab(t, browser)
	tab.navigate(t, s.URL+"/templates/77")
	tab.poll(t, `window.peakline && window.peakline.rightsize && window.peakline.ready`)
	tab.waitText(t, "#rightsize h2", "Right-size")
	if got, want := tab.waitText(t, "#rightsize .rs-memory", webFmtBytes(float64(rs.Memory.RequestBytes))), webFmtBytes(float64(rs.Memory.RequestBytes)); got != want {
		t.Errorf("memory shown %q, want %q", got, want)
	}
	oomLink := webEval[[]string](t, tab, `[...document.querySelectorAll('#rightsize .rs-oom li')].map((li) => li.querySelector('a').getAttribute('href') + ' ' + li.textContent)`)
	if want := fmt.Sprintf("/jobs/oom?task=%d job oom killed in “hold memory”", holdCounter); len(oomLink) != 1 || len(oomLink[0]) < len(want) || oomLink[0][:len(want)] != want {
		t.Errorf("OOM runs listed %q, want one starting %q", oomLink, want)
	}
	capLinks := webEval[[]string](t, tab, `[...document.querySelectorAll('#rightsize .rs-at-cap a')].map((a) => a.getAttribute('href'))`)
	if want := fmt.Sprintf("/jobs/atcap?task=%d", rs.AtCap[0].Counter); len(capLinks) != 1 || capLinks[0] != want {
		t.Errorf("at-cap runs linked %q, want %q", capLinks, want)
	}
	if got := webEval[string](t, tab, `document.querySelector('#rightsize .rs-pod-spec').textContent`); got != rs.PodSpecOverride {
		t.Errorf("pod spec shown\n%s\nwant\n%s", got, rs.PodSpecOverride)
	}
	if got := webEval[bool](t, tab, `(() => { const r = document.querySelector('#rightsize .rs-copy').getBoundingClientRect(); return r.width > 0 && r.height > 0; })()`); !got {
		t.Error("the copy button is not drawn")
	}

	// The OOM run's link opens its job page at the task, marked.
	href := webEval[string](t, tab, `document.querySelector('#rightsize .rs-oom a').href`)
	tab.navigate(t, href)
	tab.waitLoads(t, 1)
	// It opens the job at that task (the page then zooms to it).
	if u := webEval[string](t, tab, `location.pathname + ' ' + new URLSearchParams(location.search).get('task')`); u != fmt.Sprintf("/jobs/oom %d", holdCounter) {
		t.Errorf("the OOM link opened %s, want /jobs/oom at task %d", u, holdCounter)
	}
	// The page focuses the task the link names.
	tab.poll(t, fmt.Sprintf(`!!window.peakline.focus && window.peakline.focus.counter === %d && window.peakline.focus.name === "hold memory"`, holdCounter))
	tab.waitText(t, "#job-sizing .oom-mark", "OOM-killed")
	if got := tab.waitText(t, "#job-sizing .oom-task", "hold memory"); got != "“hold memory”" {
		t.Errorf("OOM task shown %q", got)
	}
	tab.navigate(t, s.URL+"/jobs/atcap")
	tab.waitLoads(t, 1)
	tab.waitText(t, "#job-sizing .cap-mark", "At its memory limit")
	tab.navigate(t, s.URL+"/jobs/f1")
	tab.waitLoads(t, 1)
	if hidden := webEval[bool](t, tab, `document.getElementById('job-sizing').hidden`); !hidden {
		t.Error("a run neither killed nor at its cap shows a sizing mark")
	}
	tab.checkProblems(t)
}
