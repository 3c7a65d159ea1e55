package main

// The web UI end to end: a real `peakline serve` holding a real imported
// ansible-runner job (and a few synthetic edge-case jobs posted to its
// ingest API), driven in headless Chromium through chromedp. Helpers are
// prefixed with web so they stay clear of the other tests of package main.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the job page screenshot of TestWebPage to docs/job-page.png")

const (
	webEventsTemplate = "https://awx.example/api/v2/jobs/{job_id}/job_events/?counter__gte={counter_gte}&counter__lte={counter_lte}"
	// A laptop screen; the screenshot is taken at twice the pixel density.
	webViewportW = 1440
	webViewportH = 900
	webTimeout   = 20 * time.Second
	// webManyTasks is the task count of the large synthetic job.
	webManyTasks = 10_000
)

// TestWebPage checks the pages a person debugs with: the jobs list and the
// job graph (one graph request per view, every payload point drawn, the
// memory peak's task on hover, its events on click and on Enter, zoom by
// drag and reset by double-click, the task table's links and keyboard
// sorting, live refresh), with no console error anywhere, on the real
// example job and on an empty job, a one-sample job and a 10,000-task job.
func TestWebPage(t *testing.T) {
	if testing.Short() {
		t.Skip("browser end-to-end test: skipped under -short")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the web page test needs Debian's chromium in PATH (%v): install it with `apt-get update && apt-get install -y chromium` (or run go test -short to skip it)", err)
	}
	began := time.Now()
	lap := func(what string) {
		t.Logf("%s: %s", what, time.Since(began).Round(time.Millisecond))
	}
	bin := webBuild(t)
	lap("built")
	data := t.TempDir()
	if out, err := exec.Command(bin, "import", "--data", data, "testdata/ansible/runner-basic").CombinedOutput(); err != nil {
		t.Fatalf("peakline import: %v\n%s", err, out)
	}
	srv := webServe(t, bin, data, "--events-url", webEventsTemplate)
	now := time.Now().UnixMilli()
	webIngest(t, srv.url, webEmptyJob(now-3*3600_000))
	webIngest(t, srv.url, webOneSampleJob(now-2*3600_000))
	lap("imported and served")
	webIngest(t, srv.url, webManyTasksJob(now-5*3600_000))
	lap("ingested the 10,000-task job")
	browser := webBrowser(t, chromium)
	lap("browser started")

	t.Run("job page", func(t *testing.T) { testWebJobPage(t, browser, srv.url) })
	t.Run("empty job", func(t *testing.T) { testWebEmptyJob(t, browser, srv.url) })
	t.Run("one sample", func(t *testing.T) { testWebOneSample(t, browser, srv.url) })
	t.Run("10000 tasks", func(t *testing.T) { testWebManyTasks(t, browser, srv.url) })
	t.Run("live job", func(t *testing.T) { testWebLiveJob(t, browser, srv.url) })
	t.Run("jobs list", func(t *testing.T) { testWebJobsList(t, browser, srv.url) })
	t.Run("no events template", func(t *testing.T) { testWebNoTemplate(t, browser, bin) })
	t.Logf("web end-to-end test took %s", time.Since(began).Round(time.Millisecond))
}

// testWebJobPage walks the real example job demo2.
func testWebJobPage(t *testing.T, browser context.Context, base string) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/jobs/demo2")
	tab.waitLoads(t, 1)
	tab.settle()
	graphs := tab.graphRequests()
	if len(graphs) != 1 {
		t.Fatalf("job page made %d graph requests on load, want exactly 1: %q", len(graphs), graphs)
	}
	if api := tab.apiRequests(); len(api) != 1 {
		t.Errorf("job page made %d API requests on load, want only the graph: %q", len(api), api)
	}
	first := webQuery(t, graphs[0])
	points := first.Get("points")
	if first.Has("from") || first.Has("to") {
		t.Errorf("first graph request %s has a window, want the whole job", graphs[0])
	}
	if n, err := strconv.Atoi(points); err != nil || n < 2 || n > 10000 {
		t.Fatalf("graph request asks for points=%q, want 2..10000", points)
	}
	if got := webEval[int](t, tab, `window.peakline.points`); strconv.Itoa(got) != points {
		t.Errorf("page says it asks %d points, the request says %s", got, points)
	}
	payload := webFetchGraph(t, graphs[0])
	tab.checkDrawn(t, payload)

	// Hovering the memory peak names its task.
	mem := payload.series("memory")
	if mem == nil || mem.Peak == nil {
		t.Fatalf("demo2 payload has no memory peak")
	}
	peakTask := payload.task(mem.Peak.Counter)
	if peakTask == nil || peakTask.Name != "allocate memory" || peakTask.Events == nil {
		t.Fatalf("demo2 memory peak is in task %+v, want \"allocate memory\" with events", peakTask)
	}
	peak := tab.center(t, `.peak[data-resource="memory"] .peak-dot`)
	tab.do(t, chromedp.MouseEvent(chromedp.MouseMoved, peak.X, peak.Y))
	tip := tab.waitText(t, `#chart-tooltip`, "allocate memory")
	for _, want := range []string{"309.7 MiB", "counter 6", "events 6–8", "peak"} {
		if !strings.Contains(tip, want) {
			t.Errorf("tooltip over the memory peak = %q, want it to contain %q", tip, want)
		}
	}

	// Clicking it opens the task's events search.
	wantURL := "https://awx.example/api/v2/jobs/demo2/job_events/?counter__gte=6&counter__lte=8"
	tab.do(t, chromedp.Evaluate[chromedp.Void](`window.__opened = []; window.open = (u) => { window.__opened.push(String(u)); return null; };`))
	tab.do(t, chromedp.MouseClickXY(peak.X, peak.Y))
	opened := tab.waitOpened(t, 1)
	if opened[0] != wantURL {
		t.Errorf("clicking the memory peak opened %q, want %q", opened[0], wantURL)
	}
	if href := webEval[string](t, tab, `document.querySelector('#detail a.events-link').href`); href != wantURL {
		t.Errorf("the picked task's events link is %q, want %q", href, wantURL)
	}
	if got := webEval[string](t, tab, `document.querySelector('#detail h2').textContent`); !strings.Contains(got, "allocate memory") {
		t.Errorf("picked task panel names %q, want allocate memory", got)
	}
	if *updateScreenshot {
		webScreenshot(t, tab)
	}

	// The keyboard reaches the same events: Tab to the memory chart (the
	// cursor starts at its peak) and press Enter.
	tab.do(t, chromedp.Focus(chromedp.CSS(`.chart[data-resource="memory"]`)), chromedp.KeyEvent(kb.Enter))
	if opened = tab.waitOpened(t, 2); opened[1] != wantURL {
		t.Errorf("Enter on the memory chart opened %q, want %q", opened[1], wantURL)
	}
	tab.do(t, chromedp.KeyEvent(kb.ArrowLeft), chromedp.KeyEvent(kb.Enter))
	if opened = tab.waitOpened(t, 3); !strings.Contains(opened[2], "counter__gte=") {
		t.Errorf("Enter after moving the cursor opened %q, want an events search", opened[2])
	}

	// The task table: a row per payload task, each linking to its events.
	rows := webEval[[]webRow](t, tab, `[...document.querySelectorAll('#tasks tbody tr')].map(r => ({
		counter: r.dataset.counter, name: r.querySelector('.task-name') ? r.querySelector('.task-name').textContent : '',
		href: r.querySelector('a.events-link') ? r.querySelector('a.events-link').href : '',
		heaviest: r.classList.contains('heaviest')}))`)
	if len(rows) != len(payload.Tasks) {
		t.Fatalf("task table has %d rows, want %d (the payload's tasks)", len(rows), len(payload.Tasks))
	}
	for i, task := range payload.Tasks {
		r := rows[i]
		want := strings.NewReplacer("{counter_gte}", strconv.FormatInt(task.Events.GTE, 10), "{counter_lte}", strconv.FormatInt(task.Events.LTE, 10)).Replace(payload.EventsURL)
		if r.Counter != strconv.FormatInt(task.Counter, 10) || r.Name != task.Name || r.Href != want {
			t.Errorf("task row %d = %+v, want counter %d, name %q, events link %q", i, r, task.Counter, task.Name, want)
		}
	}
	if !rows[1].Heaviest || rows[1].Name != "allocate memory" {
		t.Errorf("the heaviest memory task's row is not marked: %+v", rows)
	}
	// Sort by max memory with the keyboard: the heaviest task comes first.
	tab.do(t, chromedp.Focus(chromedp.CSS(`#tasks button[data-key="max.memory"]`)), chromedp.KeyEvent(kb.Enter))
	if got := webEval[string](t, tab, `document.querySelector('#tasks tbody tr').dataset.counter`); got != "6" {
		t.Errorf("after sorting by max memory the first row is counter %s, want 6", got)
	}
	if got := webEval[string](t, tab, `document.activeElement.dataset.key + ' ' + document.activeElement.closest('th').getAttribute('aria-sort')`); got != "max.memory descending" {
		t.Errorf("after keyboard sort, focus and aria-sort are %q, want %q", got, "max.memory descending")
	}

	// Drag across the CPU chart: the page asks for that window at the same
	// number of points.
	plot := tab.rect(t, `.chart[data-resource="cpu"] .plot`)
	x0, x1, y := plot.X+plot.W*0.35, plot.X+plot.W*0.7, plot.Y+plot.H/2
	tab.do(t,
		chromedp.MouseEvent(chromedp.MouseMoved, x0, y),
		chromedp.MouseEvent(chromedp.MousePressed, x0, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
		chromedp.MouseEvent(chromedp.MouseMoved, (x0+x1)/2, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(chromedp.MouseMoved, x1, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(chromedp.MouseReleased, x1, y, chromedp.ButtonLeft, chromedp.ClickCount(1)),
	)
	tab.waitLoads(t, 2)
	graphs = tab.graphRequests()
	if len(graphs) != 2 {
		t.Fatalf("after a drag the page made %d graph requests, want 2: %q", len(graphs), graphs)
	}
	zq := webQuery(t, graphs[1])
	if !zq.Has("from") || !zq.Has("to") || zq.Get("points") != points {
		t.Errorf("zoom request %s: want from, to and points=%s", graphs[1], points)
	}
	from, _ := strconv.ParseInt(zq.Get("from"), 10, 64)
	to, _ := strconv.ParseInt(zq.Get("to"), 10, 64)
	if !(payload.From < from && from < to && to < payload.To) {
		t.Errorf("zoom window %d..%d is not inside the job %d..%d", from, to, payload.From, payload.To)
	}
	zoomed := webFetchGraph(t, graphs[1])
	tab.checkDrawn(t, zoomed)
	if !webEval[bool](t, tab, `window.peakline.window.zoomed && !document.getElementById('reset').disabled`) {
		t.Errorf("after a drag the page does not show a zoomed window with reset enabled")
	}
	if n := len(tab.opened(t)); n != 3 {
		t.Errorf("the drag opened events (%d opened, want still 3)", n)
	}

	// Double-click resets to the whole job, and opens nothing.
	mid := plot.X + plot.W/2
	tab.do(t,
		chromedp.MouseClickXY(mid, y, chromedp.ClickCount(1)),
		chromedp.MouseClickXY(mid, y, chromedp.ClickCount(2)),
	)
	tab.waitLoads(t, 3)
	graphs = tab.graphRequests()
	if len(graphs) != 3 || webQuery(t, graphs[2]).Has("from") || webQuery(t, graphs[2]).Get("points") != points {
		t.Errorf("after a double-click the requests are %q, want a third one for the whole job at points=%s", graphs, points)
	}
	time.Sleep(400 * time.Millisecond) // past the click's wait for a double click
	if n := len(tab.opened(t)); n != 3 {
		t.Errorf("the double-click opened events (%d opened, want still 3)", n)
	}
	// The Reset zoom button: zoom again with the keyboard (+), then reset.
	tab.do(t, chromedp.Focus(chromedp.CSS(`.chart[data-resource="pids"]`)), chromedp.KeyEvent("+"))
	tab.waitLoads(t, 4)
	tab.do(t, chromedp.Click(chromedp.ID("reset")))
	tab.waitLoads(t, 5)
	if graphs = tab.graphRequests(); len(graphs) != 5 || !webQuery(t, graphs[3]).Has("from") || webQuery(t, graphs[4]).Has("from") {
		t.Errorf("keyboard zoom then Reset zoom made requests %q, want a window then the whole job", graphs)
	}
	tab.checkProblems(t)
}

// testWebJobsList checks GET /: every job with a link to its page, filtered by id.
func testWebJobsList(t *testing.T, browser context.Context, base string) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/")
	tab.poll(t, `window.peakline && window.peakline.ready`)
	jobs := webEval[[]string](t, tab, `[...document.querySelectorAll('#jobs-body tr')].map(r => r.dataset.job + ' ' + r.querySelector('a').getAttribute('href'))`)
	want := map[string]bool{"demo2 /jobs/demo2": true, "web-empty /jobs/web-empty": true, "web-one-sample /jobs/web-one-sample": true,
		"web-many-tasks /jobs/web-many-tasks": true, "web-live /jobs/web-live": true}
	if len(jobs) != len(want) {
		t.Errorf("jobs list rows = %q, want %d jobs", jobs, len(want))
	}
	for _, j := range jobs {
		if !want[j] {
			t.Errorf("unexpected jobs list row %q", j)
		}
	}
	if len(jobs) > 0 && !strings.HasPrefix(jobs[0], "web-live ") {
		t.Errorf("jobs list starts with %q, want the newest job (web-live) first", jobs[0])
	}
	demo := webEval[string](t, tab, `document.querySelector('#jobs-body tr[data-job="demo2"]').textContent`)
	for _, want := range []string{"107 %", "309.7 MiB", "13"} {
		if !strings.Contains(demo, want) {
			t.Errorf("demo2 row %q lacks its peak %q", demo, want)
		}
	}
	tab.do(t, chromedp.SendKeys(chromedp.ID("filter"), "demo"))
	if got := webEval[[]string](t, tab, `[...document.querySelectorAll('#jobs-body tr')].map(r => r.dataset.job)`); len(got) != 1 || got[0] != "demo2" {
		t.Errorf("filter \"demo\" shows %q, want only demo2", got)
	}
	ctx, cancel := context.WithTimeout(tab.ctx, webTimeout)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`#jobs-body a`))); err != nil {
		t.Fatalf("follow the job link: %v", err)
	}
	tab.waitLoads(t, 1)
	if loc := webEval[string](t, tab, `location.pathname`); loc != "/jobs/demo2" {
		t.Errorf("the job link led to %q, want /jobs/demo2", loc)
	}
	tab.checkProblems(t)
}

// testWebEmptyJob: a job with tasks but no samples.
func testWebEmptyJob(t *testing.T, browser context.Context, base string) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/jobs/web-empty")
	tab.waitLoads(t, 1)
	tab.settle()
	if n := len(tab.graphRequests()); n != 1 {
		t.Errorf("empty job page made %d graph requests, want 1", n)
	}
	if got := webEval[string](t, tab, `document.getElementById('status').textContent`); !strings.Contains(got, "no samples") {
		t.Errorf("empty job status = %q, want it to say there are no samples", got)
	}
	if n := webEval[int](t, tab, `document.querySelectorAll('.chart').length`); n != 0 {
		t.Errorf("empty job draws %d charts, want none", n)
	}
	tab.checkProblems(t)
}

// testWebOneSample: one CPU sample, the smallest thing worth plotting.
func testWebOneSample(t *testing.T, browser context.Context, base string) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/jobs/web-one-sample")
	tab.waitLoads(t, 1)
	tab.settle()
	graphs := tab.graphRequests()
	if len(graphs) != 1 {
		t.Fatalf("one-sample job page made %d graph requests, want 1", len(graphs))
	}
	payload := webFetchGraph(t, graphs[0])
	tab.checkDrawn(t, payload)
	peak := tab.center(t, `.peak[data-resource="cpu"] .peak-dot`)
	tab.do(t, chromedp.MouseEvent(chromedp.MouseMoved, peak.X, peak.Y))
	tab.waitText(t, `#chart-tooltip`, "the only task")
	tab.checkProblems(t)
}

// testWebManyTasks: 10,000 tasks; the payload stays O(points) and the page
// stays usable.
func testWebManyTasks(t *testing.T, browser context.Context, base string) {
	tab := webOpenTab(t, browser)
	began := time.Now()
	tab.navigate(t, base+"/jobs/web-many-tasks")
	tab.waitLoads(t, 1)
	t.Logf("10,000-task job page ready in %s (graph fetch and render in the page: %v ms)", time.Since(began).Round(time.Millisecond),
		webEval[map[string]int](t, tab, `window.peakline.timing`))
	tab.settle()
	graphs := tab.graphRequests()
	if len(graphs) != 1 {
		t.Fatalf("10,000-task job page made %d graph requests, want 1", len(graphs))
	}
	payload := webFetchGraph(t, graphs[0])
	tab.checkDrawn(t, payload)
	if len(payload.Tasks) < 100 {
		t.Fatalf("payload holds %d tasks, want many", len(payload.Tasks))
	}
	rows := webEval[int](t, tab, `document.querySelectorAll('#tasks tbody tr').length`)
	if rows != min(len(payload.Tasks), 1000) {
		t.Errorf("task table shows %d rows of %d tasks, want %d", rows, len(payload.Tasks), min(len(payload.Tasks), 1000))
	}
	if len(payload.Tasks) > 1000 {
		began = time.Now()
		tab.do(t, chromedp.Click(chromedp.CSS(`#tasks .more button`)))
		t.Logf("showing all %d task rows took %s", len(payload.Tasks), time.Since(began).Round(time.Millisecond))
		if rows = webEval[int](t, tab, `document.querySelectorAll('#tasks tbody tr').length`); rows != len(payload.Tasks) {
			t.Errorf("after show all the table has %d rows, want %d", rows, len(payload.Tasks))
		}
	}
	// Hover over the memory peak: its task is found among thousands.
	mem := payload.series("memory")
	peak := tab.center(t, `.peak[data-resource="memory"] .peak-dot`)
	tab.do(t, chromedp.MouseEvent(chromedp.MouseMoved, peak.X, peak.Y))
	tab.waitText(t, `#chart-tooltip`, payload.task(mem.Peak.Counter).Name)
	tab.checkProblems(t)
}

// testWebLiveJob: a job whose newest sample is seconds old refreshes itself.
func testWebLiveJob(t *testing.T, browser context.Context, base string) {
	webIngest(t, base, webLiveJob(time.Now().UnixMilli()))
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/jobs/web-live")
	tab.waitLoads(t, 1)
	if !webEval[bool](t, tab, `window.peakline.live && !document.getElementById('live').hidden`) {
		t.Fatalf("a job sampled seconds ago is not shown as live")
	}
	tab.waitLoads(t, 2) // the refresh, 5 s later
	graphs := tab.graphRequests()
	if len(graphs) < 2 || webQuery(t, graphs[1]).Get("points") != webQuery(t, graphs[0]).Get("points") || webQuery(t, graphs[1]).Has("from") {
		t.Errorf("live refresh requests %q, want the same whole-job request again", graphs)
	}
	tab.checkProblems(t)
}

// testWebNoTemplate serves without --events-url, with the example job and
// the same run as a cgroup_perf_recap import, whose tasks have no known
// counter (no job events): picks show the AWX API path to copy, or say
// that the events are unknown.
func testWebNoTemplate(t *testing.T, browser context.Context, bin string) {
	data := t.TempDir()
	if out, err := exec.Command(bin, "import", "--data", data, "testdata/ansible/runner-basic", "testdata/ansible/recap-csv").CombinedOutput(); err != nil {
		t.Fatalf("peakline import: %v\n%s", err, out)
	}
	srv := webServe(t, bin, data)
	tab := webOpenTab(t, browser)
	tab.navigate(t, srv.url+"/jobs/demo2")
	tab.waitLoads(t, 1)
	tab.do(t, chromedp.Evaluate[chromedp.Void](`window.__opened = []; window.open = (u) => { window.__opened.push(String(u)); return null; };`))
	peak := tab.center(t, `.peak[data-resource="memory"] .peak-dot`)
	tab.do(t, chromedp.MouseEvent(chromedp.MouseMoved, peak.X, peak.Y), chromedp.MouseClickXY(peak.X, peak.Y))
	path := "/api/v2/jobs/demo2/job_events/?counter__gte=6&counter__lte=8"
	tab.waitText(t, "#detail", path)
	if n := len(tab.opened(t)); n != 0 {
		t.Errorf("without a template the page opened %d windows, want none", n)
	}
	if got := webEval[string](t, tab, `document.querySelector('#tasks tr[data-counter="6"] .events').textContent`); !strings.Contains(got, path) {
		t.Errorf("without a template the task row's events cell is %q, want the path %s", got, path)
	}
	tab.checkProblems(t)

	recap := webOpenTab(t, browser)
	recap.navigate(t, srv.url+"/jobs/ansible-perf-2026-11-30T03:39:20.072139")
	recap.waitLoads(t, 1)
	peak = recap.center(t, `.peak[data-resource="memory"] .peak-dot`)
	recap.do(t, chromedp.MouseEvent(chromedp.MouseMoved, peak.X, peak.Y))
	tip := recap.waitText(t, "#chart-tooltip", "allocate memory")
	if !strings.Contains(tip, "events unknown") {
		t.Errorf("tooltip of a task without counter = %q, want it to say the events are unknown", tip)
	}
	recap.do(t, chromedp.MouseClickXY(peak.X, peak.Y))
	recap.waitText(t, "#detail", "Events unknown")
	cells := webEval[[]string](t, recap, `[...document.querySelectorAll('#tasks tbody .events')].map(c => c.textContent)`)
	if len(cells) != 3 {
		t.Errorf("recap job table has %d rows, want 3", len(cells))
	}
	for _, c := range cells {
		if c != "unknown" {
			t.Errorf("recap job events cell = %q, want unknown", c)
		}
	}
	recap.checkProblems(t)
}

// --- the server ---

type webServer struct {
	url    string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
}

var webServingRE = regexp.MustCompile(`peakline: serving on (http://127\.0\.0\.1:\d+)/`)

// webBuild builds the peakline binary into a temporary directory.
func webBuild(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "peakline")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// webServe starts `peakline serve` on a free port and stops it (SIGTERM)
// when the test ends.
func webServe(t *testing.T, bin, data string, args ...string) *webServer {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &webServer{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start peakline serve: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("peakline serve exited with %v; stderr:\n%s", err, s.stderr)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("peakline serve did not stop within 30 s of SIGTERM")
		}
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if m := webServingRE.FindStringSubmatch(lines.Text()); m != nil {
			s.url = m[1]
			break
		}
	}
	if s.url == "" {
		t.Fatalf("peakline serve printed no URL; stderr:\n%s", s.stderr)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return s
}

// --- synthetic jobs, as JSON ingest batches ---

type webBatch struct {
	JobID     string           `json:"job_id"`
	Tasks     []webBatchTask   `json:"tasks,omitempty"`
	LastEvent *webBatchEvent   `json:"last_event,omitempty"`
	Series    []webBatchSeries `json:"series,omitempty"`
}

type webBatchTask struct {
	Counter int64  `json:"counter"`
	UUID    string `json:"uuid"`
	Name    string `json:"name"`
	Start   int64  `json:"start"`
}

type webBatchEvent struct {
	Counter int64 `json:"counter"`
	Time    int64 `json:"time"`
}

type webBatchSeries struct {
	Resource string    `json:"resource"`
	Counter  int64     `json:"counter"`
	UUID     string    `json:"uuid"`
	Task     string    `json:"task"`
	T        []int64   `json:"t"`
	V        []float64 `json:"v"`
}

func webUUID(i int) string { return fmt.Sprintf("0a0b0c0d-0000-4000-8000-%012d", i) }

// webEmptyJob has three tasks and no samples.
func webEmptyJob(startMs int64) *webBatch {
	b := &webBatch{JobID: "web-empty", LastEvent: &webBatchEvent{Counter: 12, Time: startMs + 9000}}
	for i := range 3 {
		b.Tasks = append(b.Tasks, webBatchTask{Counter: int64(3 + 3*i), UUID: webUUID(i), Name: fmt.Sprintf("quiet task %d", i+1), Start: startMs + int64(i)*3000})
	}
	return b
}

// webOneSampleJob has one task with one CPU sample.
func webOneSampleJob(startMs int64) *webBatch {
	return &webBatch{
		JobID:     "web-one-sample",
		Tasks:     []webBatchTask{{Counter: 3, UUID: webUUID(1), Name: "the only task", Start: startMs}},
		LastEvent: &webBatchEvent{Counter: 5, Time: startMs + 2000},
		Series:    []webBatchSeries{{Resource: "cpu", Counter: 3, UUID: webUUID(1), Task: "the only task", T: []int64{startMs + 500}, V: []float64{42}}},
	}
}

// webManyTasksJob has webManyTasks tasks of 400 ms. Each has two CPU
// samples; every tenth also memory and PIDs samples (the store's cost is
// per series, one per task and resource); task 7777 holds the memory peak.
func webManyTasksJob(startMs int64) *webBatch {
	b := &webBatch{JobID: "web-many-tasks", LastEvent: &webBatchEvent{Counter: int64(3 * (webManyTasks + 1)), Time: startMs + webManyTasks*400}}
	res := map[string][]webBatchSeries{}
	for i := range webManyTasks {
		counter := int64(3 + 3*i)
		name := fmt.Sprintf("step %05d: configure item", i)
		start := startMs + int64(i)*400
		b.Tasks = append(b.Tasks, webBatchTask{Counter: counter, UUID: webUUID(i), Name: name, Start: start})
		ts := []int64{start + 100, start + 300}
		wave := float64(i % 97)
		add := func(r string, vs ...float64) {
			res[r] = append(res[r], webBatchSeries{Resource: r, Counter: counter, UUID: webUUID(i), Task: name, T: ts, V: vs})
		}
		add("cpu", 20+wave, 30+wave/2)
		if i%10 == 0 || i == 7777 {
			mem := 200e6 + 1e6*wave
			if i == 7777 {
				mem = 2.5e9
			}
			add("memory", mem, mem-1e6)
			add("pids", 5+float64(i%7), 6)
		}
	}
	for _, r := range []string{"cpu", "memory", "pids"} {
		b.Series = append(b.Series, res[r]...)
	}
	return b
}

// webLiveJob is running: its newest samples are from nowMs.
func webLiveJob(nowMs int64) *webBatch {
	start := nowMs - 20_000
	b := &webBatch{JobID: "web-live", Tasks: []webBatchTask{{Counter: 3, UUID: webUUID(1), Name: "still running", Start: start}}}
	s := webBatchSeries{Resource: "cpu", Counter: 3, UUID: webUUID(1), Task: "still running"}
	for ts := start + 250; ts <= nowMs; ts += 250 {
		s.T = append(s.T, ts)
		s.V = append(s.V, float64(50+ts%40))
	}
	b.Series = append(b.Series, s)
	return b
}

// webIngest posts one batch to the server's JSON ingest.
func webIngest(t *testing.T, base string, b *webBatch) {
	t.Helper()
	body, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/api/v1/ingest", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("ingest %s: %v", b.JobID, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ingest %s: %s: %s", b.JobID, resp.Status, answer)
	}
}

// --- the graph payload, as the test reads it ---

type webGraph struct {
	From      int64          `json:"from"`
	To        int64          `json:"to"`
	Points    int            `json:"points"`
	Series    []webGraphLine `json:"series"`
	Tasks     []webGraphTask `json:"tasks"`
	EventsURL string         `json:"events_url"`
}

type webGraphLine struct {
	Resource string  `json:"resource"`
	T        []int64 `json:"t"`
	Peak     *struct {
		T       int64   `json:"t"`
		V       float64 `json:"v"`
		Counter int64   `json:"counter"`
	} `json:"peak"`
}

type webGraphTask struct {
	Counter int64  `json:"counter"`
	Name    string `json:"name"`
	Events  *struct {
		GTE int64 `json:"counter_gte"`
		LTE int64 `json:"counter_lte"`
	} `json:"events"`
}

func (g *webGraph) series(resource string) *webGraphLine {
	for i := range g.Series {
		if g.Series[i].Resource == resource {
			return &g.Series[i]
		}
	}
	return nil
}

func (g *webGraph) task(counter int64) *webGraphTask {
	for i := range g.Tasks {
		if g.Tasks[i].Counter == counter {
			return &g.Tasks[i]
		}
	}
	return nil
}

// webFetchGraph repeats a graph request the page made, to compare what
// it drew with what it got.
func webFetchGraph(t *testing.T, u string) *webGraph {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var g webGraph
	if err := json.NewDecoder(resp.Body).Decode(&g); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", u, resp.Status, err)
	}
	return &g
}

func webQuery(t *testing.T, u string) url.Values {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Query()
}

// --- the browser ---

// webBrowser starts headless Chromium with a throwaway profile.
func webBrowser(t *testing.T, chromium string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(webViewportW, webViewportH),
	)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// webTab is one browser tab that records the page's API requests and
// every console error, exception and browser log error.
type webTab struct {
	ctx      context.Context
	mu       sync.Mutex
	api      []string
	problems []string
}

var webGraphPath = regexp.MustCompile(`/api/v1/jobs/[^/]+/graph\?`)

func webOpenTab(t *testing.T, browser context.Context) *webTab {
	t.Helper()
	tab := &webTab{}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithListener(tab.listen))
	t.Cleanup(cancel)
	tab.ctx = ctx
	// The first action opens the tab and ties it to the context it runs
	// with, so it must run on ctx itself, not on one with a timeout.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(webViewportW, webViewportH)); err != nil {
		t.Fatalf("open a browser tab: %v", err)
	}
	return tab
}

// listen runs in the tab's event loop: record and return.
func (tab *webTab) listen(ev any) {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if strings.Contains(ev.Request.URL, "/api/") {
			tab.api = append(tab.api, ev.Request.URL)
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				if len(a.Value) > 0 {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			tab.problems = append(tab.problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		tab.problems = append(tab.problems, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, msg))
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError {
			tab.problems = append(tab.problems, fmt.Sprintf("browser log (%s): %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
		}
	}
}

func (tab *webTab) apiRequests() []string {
	tab.mu.Lock()
	defer tab.mu.Unlock()
	return append([]string(nil), tab.api...)
}

func (tab *webTab) graphRequests() []string {
	var out []string
	for _, u := range tab.apiRequests() {
		if webGraphPath.MatchString(u) {
			out = append(out, u)
		}
	}
	return out
}

func (tab *webTab) checkProblems(t *testing.T) {
	t.Helper()
	tab.mu.Lock()
	defer tab.mu.Unlock()
	for _, p := range tab.problems {
		t.Errorf("page problem: %s", p)
	}
}

func (tab *webTab) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, webTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

func webEval[T any](t *testing.T, tab *webTab, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, webTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (tab *webTab) navigate(t *testing.T, u string) {
	t.Helper()
	tab.do(t, chromedp.Navigate(u))
}

// poll waits until a JavaScript expression is truthy.
func (tab *webTab) poll(t *testing.T, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab.ctx, webTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(webTimeout-time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		tab.checkProblems(t)
		t.Fatalf("waiting for %s: %v", expr, err)
	}
}

// waitLoads waits until the job page has shown n graph payloads.
func (tab *webTab) waitLoads(t *testing.T, n int) {
	t.Helper()
	tab.poll(t, fmt.Sprintf(`window.peakline && window.peakline.ready && window.peakline.loads >= %d`, n))
	if msg := webEval[string](t, tab, `window.peakline.error || ''`); msg != "" {
		t.Fatalf("the page shows an error: %s", msg)
	}
}

// settle gives a page time to make requests it should not make.
func (tab *webTab) settle() { time.Sleep(500 * time.Millisecond) }

// waitText waits until the element's text contains want, and returns it.
func (tab *webTab) waitText(t *testing.T, sel, want string) string {
	t.Helper()
	q, _ := json.Marshal(sel)
	w, _ := json.Marshal(want)
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && !e.hidden && e.textContent.includes(%s); })()`, q, w)
	ctx, cancel := context.WithTimeout(tab.ctx, 5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(4*time.Second))); err != nil {
		got := webEval[string](t, tab, fmt.Sprintf(`(document.querySelector(%s) || {}).textContent || '(missing)'`, q))
		t.Fatalf("%s shows %q, want it to contain %q", sel, got, want)
	}
	return webEval[string](t, tab, fmt.Sprintf(`document.querySelector(%s).textContent`, q))
}

func (tab *webTab) opened(t *testing.T) []string {
	t.Helper()
	return webEval[[]string](t, tab, `window.__opened || []`)
}

// waitOpened waits until window.open was called n times in all.
func (tab *webTab) waitOpened(t *testing.T, n int) []string {
	t.Helper()
	tab.poll(t, fmt.Sprintf(`(window.__opened || []).length >= %d`, n))
	return tab.opened(t)
}

type webRect struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	W float64 `json:"w"`
	H float64 `json:"h"`
}

type webRow struct {
	Counter  string `json:"counter"`
	Name     string `json:"name"`
	Href     string `json:"href"`
	Heaviest bool   `json:"heaviest"`
}

// rect is an element's box in viewport coordinates, scrolled into view.
func (tab *webTab) rect(t *testing.T, sel string) webRect {
	t.Helper()
	q, _ := json.Marshal(sel)
	return webEval[webRect](t, tab, fmt.Sprintf(`(() => {
		const e = document.querySelector(%s);
		if (!e) throw new Error('no element ' + %s);
		e.scrollIntoView({block: 'center'});
		const r = e.getBoundingClientRect();
		return {x: r.x, y: r.y, w: r.width, h: r.height};
	})()`, q, q))
}

func (tab *webTab) center(t *testing.T, sel string) struct{ X, Y float64 } {
	r := tab.rect(t, sel)
	return struct{ X, Y float64 }{r.X + r.W/2, r.Y + r.H/2}
}

// checkDrawn compares each chart's point count with the payload's.
func (tab *webTab) checkDrawn(t *testing.T, g *webGraph) {
	t.Helper()
	drawn := webEval[map[string]string](t, tab, `Object.fromEntries([...document.querySelectorAll('.chart')].map(c => [c.dataset.resource, c.dataset.points]))`)
	if len(drawn) != len(g.Series) {
		t.Errorf("page draws charts %v, payload has %d series", drawn, len(g.Series))
	}
	for _, s := range g.Series {
		if drawn[s.Resource] != strconv.Itoa(len(s.T)) {
			t.Errorf("%s chart has %s points, payload %d", s.Resource, drawn[s.Resource], len(s.T))
		}
	}
}

// webScreenshot writes docs/job-page.png at twice the pixel density.
func webScreenshot(t *testing.T, tab *webTab) {
	t.Helper()
	tab.do(t, chromedp.EmulateViewport(webViewportW, webViewportH, chromedp.EmulateScale(2)))
	time.Sleep(300 * time.Millisecond) // the page redraws its canvases at the new density
	ctx, cancel := context.WithTimeout(tab.ctx, webTimeout)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join("docs", "job-page.png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote docs/job-page.png (%d bytes)", len(buf))
	tab.do(t, chromedp.EmulateViewport(webViewportW, webViewportH))
}
