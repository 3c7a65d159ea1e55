package e2e

// The web UI end to end: a real `peakline serve` holding a real imported
// ansible-runner job (and a few synthetic edge-case jobs posted to its
// ingest API), driven in headless Chromium through chromedp. Helpers are
// prefixed with web so they stay clear of the other tests of package main.

import (
	"context"
	"flag"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/peakline/peakline/collector/ansible"
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
	if out, err := exec.Command(bin, "import", "--data", data, "../testdata/ansible/runner-basic").CombinedOutput(); err != nil {
		t.Fatalf("peakline import: %v\n%s", err, out)
	}
	srv := webServe(t, bin, data, "--events-url", webEventsTemplate)
	now := time.Now().UnixMilli()
	webIngest(t, srv.URL, webEmptyJob(now-3*3600_000))
	webIngest(t, srv.URL, webOneSampleJob(now-2*3600_000))
	for id, measured := range map[string]string{"web-process-tree": ansible.MeasuredProcessTree, "web-cgroup": ansible.MeasuredCgroup} {
		b := webTinyJob(id, now-4*3600_000)
		b.JobInfo.Measured = measured
		webIngest(t, srv.URL, b)
	}
	webIngest(t, srv.URL, webWaitedJob(now-6*3600_000))
	lap("imported and served")
	webIngest(t, srv.URL, webManyTasksJob(now-5*3600_000))
	lap("ingested the 10,000-task job")
	browser := webBrowser(t, chromium)
	lap("browser started")

	t.Run("job page", func(t *testing.T) { testWebJobPage(t, browser, srv.URL) })
	t.Run("empty job", func(t *testing.T) { testWebEmptyJob(t, browser, srv.URL) })
	t.Run("one sample", func(t *testing.T) { testWebOneSample(t, browser, srv.URL) })
	t.Run("10000 tasks", func(t *testing.T) { testWebManyTasks(t, browser, srv.URL) })
	t.Run("measured", func(t *testing.T) { testWebMeasured(t, browser, srv.URL) })
	t.Run("waited", func(t *testing.T) { testWebWaited(t, browser, srv.URL) })
	t.Run("live job", func(t *testing.T) { testWebLiveJob(t, browser, srv.URL) })
	t.Run("jobs list", func(t *testing.T) { testWebJobsList(t, browser, srv.URL) })
	t.Run("no events template", func(t *testing.T) { testWebNoTemplate(t, browser, bin) })
	t.Run("jobs list pages", func(t *testing.T) { testWebJobsPages(t, browser, bin) })
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
		"web-many-tasks /jobs/web-many-tasks": true, "web-live /jobs/web-live": true,
		"web-process-tree /jobs/web-process-tree": true, "web-cgroup /jobs/web-cgroup": true, "web-waited /jobs/web-waited": true}
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
	tab.poll(t, `window.peakline.q === 'demo' && window.peakline.done`)
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

// testWebJobsPages serves 60 jobs and lists them 10 at a time: the page
// loads more only as the end of the table scrolls into view, never asks
// for every job at once, and filters on the server as one types.
func testWebJobsPages(t *testing.T, browser context.Context, bin string) {
	const jobs, perPage = 60, 10
	srv := webServe(t, bin, t.TempDir())
	now := time.Now().UnixMilli() - 3600_000
	var want []string // newest first
	for i := range jobs {
		id := fmt.Sprintf("page-%02d", i)
		want = append(want, id)
		webIngest(t, srv.URL, webTinyJob(id, now-int64(i)*60_000))
	}
	tb := webOpenTab(t, browser)
	shown := func() []string {
		return webEval[[]string](t, tb, `[...document.querySelectorAll('#jobs-body tr')].map(r => r.dataset.job)`)
	}
	tb.navigate(t, fmt.Sprintf("%s/?limit=%d", srv.URL, perPage))
	tb.poll(t, `window.peakline && window.peakline.ready`)
	tb.settle()
	first := shown()
	if len(first) == 0 || len(first) >= jobs || len(first)%perPage != 0 || webEval[bool](t, tb, `window.peakline.done`) {
		t.Fatalf("before scrolling the page shows %d rows, want whole pages of %d and fewer than all %d jobs", len(first), perPage, jobs)
	}
	// Scroll to the end until every page is in.
	for i := 0; i < jobs/perPage+1 && !webEval[bool](t, tb, `window.peakline.done`); i++ {
		n := len(shown())
		tb.do(t, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.body.scrollHeight)`))
		tb.poll(t, fmt.Sprintf(`document.querySelectorAll('#jobs-body tr').length > %d || window.peakline.done`, n))
	}
	if got := shown(); !slices.Equal(got, want) {
		t.Fatalf("after scrolling the page lists %q, want %q", got, want)
	}
	if got := webEval[string](t, tb, `document.getElementById('jobs-note').textContent`); got != "60 of 60 jobs" {
		t.Errorf("jobs note = %q, want %q", got, "60 of 60 jobs")
	}
	var lists []string
	for _, u := range tb.apiRequests() {
		if strings.Contains(u, "/api/v1/jobs?") {
			lists = append(lists, u)
			if q := webQuery(t, u); q.Get("limit") != strconv.Itoa(perPage) {
				t.Errorf("jobs request %s, want limit=%d", u, perPage)
			}
		}
	}
	if len(lists) != jobs/perPage+1 && len(lists) != jobs/perPage {
		t.Errorf("the page made %d jobs requests for %d pages: %q", len(lists), jobs/perPage, lists)
	}
	for _, u := range lists[1:] {
		if !webQuery(t, u).Has("cursor") {
			t.Errorf("a later jobs request has no cursor: %s", u)
		}
	}

	// Typing a filter asks the server once the typing pauses, for the
	// whole text in any case, and shows just what it answers.
	before := len(tb.apiRequests())
	tb.do(t, chromedp.SendKeys(chromedp.ID("filter"), "PAGE-1"))
	tb.poll(t, `window.peakline.q === 'PAGE-1' && window.peakline.done`)
	if got, want := shown(), want[10:20]; !slices.Equal(got, want) {
		t.Errorf("filter PAGE-1 shows %q, want %q", got, want)
	}
	var filtered []string
	for _, u := range tb.apiRequests()[before:] {
		if q := webQuery(t, u); q.Has("q") {
			filtered = append(filtered, q.Get("q"))
		}
	}
	if len(filtered) == 0 || len(filtered) >= len("PAGE-1") || filtered[len(filtered)-1] != "PAGE-1" {
		t.Errorf("typing PAGE-1 made filtered requests for %q, want fewer than one per key, the last for PAGE-1", filtered)
	}
	tb.checkProblems(t)
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

// testWebMeasured: a job measured from its process tree says so under
// its title; a cgroup job does not.
func testWebMeasured(t *testing.T, browser context.Context, base string) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/jobs/web-process-tree")
	tab.waitLoads(t, 1)
	got := tab.waitText(t, "#job-measured", "process tree")
	if want := "Measured from the job's process tree (no cgroup of its own): memory is summed RSS, which counts shared pages once per process; CPU misses processes that exited unreaped."; got != want {
		t.Errorf("process-tree job note = %q, want %q", got, want)
	}
	tab.navigate(t, base+"/jobs/web-cgroup")
	tab.waitLoads(t, 1)
	if shown := webEval[bool](t, tab, `!document.getElementById('job-measured').hidden`); shown {
		t.Errorf("cgroup job shows the measured note %q, want none", webEval[string](t, tab, `document.getElementById('job-measured').textContent`))
	}
	// The samples before the first task have a row of their own, named
	// as such.
	tab.poll(t, `document.querySelectorAll('#tasks tbody tr').length === 2`)
	rows := webEval[[]string](t, tab, `[...document.querySelectorAll('#tasks tbody tr')].map(r => r.querySelector('td.num').textContent + ' ' + r.querySelector('.task-name').textContent)`)
	if want := []string{"– before first task", "3 tiny"}; !slices.Equal(rows, want) {
		t.Errorf("cgroup job's task rows %q, want %q", rows, want)
	}
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
	if out, err := exec.Command(bin, "import", "--data", data, "../testdata/ansible/runner-basic", "../testdata/ansible/recap-csv").CombinedOutput(); err != nil {
		t.Fatalf("peakline import: %v\n%s", err, out)
	}
	srv := webServe(t, bin, data)
	tab := webOpenTab(t, browser)
	tab.navigate(t, srv.URL+"/jobs/demo2")
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
	recap.navigate(t, srv.URL+"/jobs/ansible-perf-2026-11-30T03:39:20.072139")
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

// webBuild is the peakline binary shared by the package's tests.
func webBuild(t *testing.T) string { return peaklineBin(t) }

// webServe starts `peakline serve` over data on a free port; it stops
// (SIGTERM, checked for a clean exit) when the test ends.
func webServe(t *testing.T, bin, data string, args ...string) *served {
	t.Helper()
	if bin != peaklineBin(t) {
		t.Fatalf("webServe runs the shared binary, not %s", bin)
	}
	return serve(t, append([]string{"--data", data}, args...)...)
}
