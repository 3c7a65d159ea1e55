package e2e

// The template pages end to end: a real `peakline serve` holding the six
// real ansible-runner runs of testdata/ansible/template-runs (AWX job
// template 7, "deploy-web"; run 1005's "allocate cache" holds about 2.8
// times the memory of the others) and runner-loops imported into the
// same template (tasks no other run has), driven in headless Chromium.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The tasks of testdata/ansible/template-runs/site.yml, in order.
var templateRunTasks = []string{"check service", "render config", "allocate cache", "compress assets", "start workers", "check service", "reload web", "report"}

// historyDoc is the part of GET /api/v1/templates/{id}/history the test reads.
type historyDoc struct {
	TemplateName string `json:"template_name"`
	Runs         []struct {
		JobID string `json:"job_id"`
	} `json:"runs"`
	Tasks []struct {
		Key  string `json:"key"`
		Name string `json:"name"`
		Runs []struct {
			JobID      string `json:"job_id"`
			Counter    int64  `json:"counter"`
			Start      int64  `json:"start"`
			DurationMs int64  `json:"duration_ms"`
		} `json:"runs"`
		Regressions []struct {
			JobID    string   `json:"job_id"`
			Metric   string   `json:"metric"`
			Value    float64  `json:"value"`
			Baseline float64  `json:"baseline"`
			Factor   *float64 `json:"factor"`
		} `json:"regressions"`
	} `json:"tasks"`
}

// TestTemplatePage checks the template page (a row of charts per task,
// exactly the heavier run's memory marked, a click on it opening that job
// at that task), the job page's "vs usual" column and template link, and
// the jobs list's template column and regression flag.
func TestTemplatePage(t *testing.T) {
	if testing.Short() {
		t.Skip("browser end-to-end test: skipped under -short")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the template page test needs Debian's chromium in PATH (%v) (or run go test -short to skip it)", err)
	}
	bin := webBuild(t)
	data := t.TempDir()
	runs := templateRuns(t, "../testdata/ansible/template-runs/100?", 6)
	if out, err := exec.Command(bin, append([]string{"import", "--data", data}, runs...)...).CombinedOutput(); err != nil {
		t.Fatalf("peakline import: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "import", "--data", data, "--template", "7", "../testdata/ansible/runner-loops").CombinedOutput(); err != nil {
		t.Fatalf("peakline import runner-loops: %v\n%s", err, out)
	}
	srv := webServe(t, bin, data, "--events-url", webEventsTemplate)
	webIngest(t, srv.URL, webTinyJob("no-template", time.Now().Add(-2*time.Hour).UnixMilli()))

	// What the server says; the page must show it.
	h := getHistory(t, srv.URL+"/api/v1/templates/7/history")
	var runIDs []string
	for _, r := range h.Runs {
		runIDs = append(runIDs, r.JobID)
	}
	if want := []string{"loops", "1001", "1002", "1003", "1004", "1005", "1006"}; !slices.Equal(runIDs, want) {
		t.Fatalf("history runs %q, want %q", runIDs, want)
	}
	var regs []string
	var heavyCounter, heavyStart, heavyEnd int64
	var factor float64
	for _, tk := range h.Tasks {
		for _, r := range tk.Regressions {
			regs = append(regs, fmt.Sprintf("%s/%s/%s", r.JobID, tk.Name, r.Metric))
			if r.Factor != nil {
				factor = *r.Factor
			}
		}
		for _, r := range tk.Runs {
			if tk.Name == "allocate cache" && r.JobID == "1005" {
				heavyCounter, heavyStart, heavyEnd = r.Counter, r.Start, r.Start+r.DurationMs
			}
		}
	}
	if want := []string{"1005/allocate cache/memory_max"}; !slices.Equal(regs, want) || factor < 2.5 || factor > 3 || heavyCounter == 0 {
		t.Fatalf("history flags %q (factor %.2f, counter %d), want only %q at about 2.8", regs, factor, heavyCounter, want)
	}
	wantFactor := fmt.Sprintf("memory %.1f× usual", factor)
	// The job page compares a run with the runs up to it.
	var jobFactor string
	for _, tk := range getHistory(t, srv.URL+"/api/v1/templates/7/history?job=1005").Tasks {
		for _, r := range tk.Regressions {
			if r.JobID == "1005" && r.Factor != nil {
				jobFactor = fmt.Sprintf("memory %.1f× usual", *r.Factor)
			}
		}
	}

	browser := webBrowser(t, chromium)
	t.Run("template page", func(t *testing.T) {
		testTemplatePage(t, browser, srv.URL, wantFactor, jobFactor, heavyCounter, heavyStart, heavyEnd)
	})
	t.Run("job page vs usual", func(t *testing.T) { testJobVsUsual(t, browser, srv.URL, jobFactor, heavyCounter) })
	t.Run("jobs list", func(t *testing.T) { testJobsTemplates(t, browser, srv.URL) })
	t.Run("history.js", func(t *testing.T) { testHistoryJS(t, browser, srv.URL) })
	t.Run("long task name", func(t *testing.T) { testLongTaskName(t, browser, srv.URL) })
}

// testLongTaskName: a task named with 1,000 characters keeps its row of
// the template page to three lines, the whole name in its title.
func testLongTaskName(t *testing.T, browser context.Context, base string) {
	name := "install " + strings.Repeat("very-long-package-name-", 43)
	b := webTinyJob("long1", 1_796_020_000_000)
	b.TemplateID = "long"
	b.Tasks[0].Name, b.Series[0].Task = name, name
	webIngest(t, base, b)
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/templates/long")
	tab.poll(t, `window.peakline && window.peakline.ready && document.querySelector('table.history td.name .task-name') !== null`)
	got := webEval[string](t, tab, `(() => {
		const n = document.querySelector('table.history td.name .task-name');
		const lines = Math.round(n.getBoundingClientRect().height / parseFloat(getComputedStyle(n).lineHeight));
		return lines + ' lines, title ' + n.title.length + ' chars';
	})()`)
	if want := fmt.Sprintf("3 lines, title %d chars", len(name)); got != want {
		t.Errorf("long task name: %s, want %s", got, want)
	}
	// A template without a name is titled by its id, once.
	if h1 := webEval[string](t, tab, `document.querySelector('h1').textContent.replace(/\s+/g, ' ').trim()`); h1 != "Template long" {
		t.Errorf("heading of a template without a name: %q, want %q", h1, "Template long")
	}
	tab.checkProblems(t)
}

// testHistoryJS checks the "vs usual" figures of history.js on a small
// history document, in the page's own module: the factor of a flagged
// run, a task with too few other runs, a change the server did not flag,
// a usual task, a lighter run, a job outside the document; and that it leaves the
// document as it was.
func testHistoryJS(t *testing.T, browser context.Context, base string) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/templates/none")
	tab.poll(t, `window.peakline && window.peakline.ready`)
	ctx, cancel := context.WithTimeout(tab.ctx, webTimeout)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const h = await import('/static/history.js');
		const run = (job, counter, mem, dur) => ({job_id: job, counter, start: 0, duration_ms: dur, cpu_seconds: 1, max: {memory: mem, cpu: 50}, mean: {}});
		const jobs = ['j1', 'j2', 'j3', 'j4', 'j5'];
		const doc = {runs: jobs.map((j) => ({job_id: j})), tasks: [
			{key: 'a', name: 'a', runs: [run('j1', 3, 100, 1000), run('j2', 4, 100, 1000), run('j3', 3, 110, 1000), run('j4', 3, 90, 1000), run('j5', 5, 300, 1000)],
			 regressions: [{job_id: 'j5', metric: 'memory_max', value: 300, baseline: 100, factor: 3}]},
			{key: 'b', name: 'b', runs: [run('j4', 6, 10, 1000), run('j5', 7, 10, 2000)], regressions: []},
			{key: 'c', name: 'c', runs: jobs.map((j, i) => run(j, 8 + i, 10, i === 4 ? 1500 : 1000)), regressions: []},
			{key: 'd', name: 'd', runs: jobs.map((j, i) => run(j, 20 + i, 10, 1000)), regressions: []},
			{key: 'e', name: 'e', runs: jobs.map((j, i) => run(j, 30 + i, i === 0 ? 50 : 100, 1000)), regressions: []},
		]};
		const before = JSON.stringify(doc);
		const say = (job) => [...h.usualOf(doc, job)].map(([c, e]) => c + ': ' + ((h.usualSummary(e) || {text: '—'}).text) + ((h.usualSummary(e) || {}).regressed ? ' !' : '')).join(', ');
		// Three runs still going at 10 (cut short) are no usual for a
		// finished run of 100.
		const ids = ['f1', 'f2', 'f3', 'g1', 'g2', 'g3', 'f4'];
		const doc2 = {runs: ids.map((j) => ({job_id: j, status: j[0] === 'g' ? 'running' : 'successful'})),
			tasks: [{key: 'f', name: 'f', runs: ids.map((j, i) => run(j, 40 + i, j[0] === 'g' ? 10 : 100, 1000)), regressions: []}]};
		const say2 = (job) => [...h.usualOf(doc2, job)].map(([c, e]) => c + ': ' + h.usualSummary(e).text).join(', ');
		const out = [say('j5'), say('j1'), say('nope') || '(none)', [2.776, 0.5, 1, 12.3, NaN].map(h.fmtFactor).join(' '), say2('f4'), say2('g1')];
		if (JSON.stringify(doc) !== before) out.push('the document was modified');
		return out.join(' | ');
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := "5: memory 3.0× usual !, 7: —, 12: duration 1.5× usual, 24: as usual, 34: as usual" +
		" | 3: as usual, 8: as usual, 20: as usual, 30: memory 0.50× usual | (none) | 2.8× 0.50× 1.0× 12× –" +
		" | 46: as usual | 43: memory 0.10× usual"
	if got != want {
		t.Errorf("history.js says\n%s\nwant\n%s", got, want)
	}
	tab.checkProblems(t)
}

func getHistory(t *testing.T, u string) *historyDoc {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h historyDoc
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", u, resp.Status, err)
	}
	return &h
}

// webScreenshotTo writes docs/NAME of the top of the page at twice the
// pixel density.
func webScreenshotTo(t *testing.T, tab *webTab, name string) {
	t.Helper()
	tab.do(t, chromedp.EmulateViewport(webViewportW, webViewportH, chromedp.EmulateScale(2)))
	ctx, cancel := context.WithTimeout(tab.ctx, webTimeout)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join("docs", name), buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote docs/%s (%d bytes)", name, len(buf))
	tab.do(t, chromedp.EmulateViewport(webViewportW, webViewportH))
}

// pollAcross is poll for an expression that becomes true on the page a
// navigation opens: the old page's context goes away under the poll,
// which is retried on the new one.
func (tab *webTab) pollAcross(t *testing.T, expr string) {
	t.Helper()
	deadline := time.Now().Add(webTimeout)
	for {
		ctx, cancel := context.WithTimeout(tab.ctx, time.Until(deadline))
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tab.checkProblems(t)
			t.Fatalf("waiting for %s: %v", expr, err)
		}
		time.Sleep(50 * time.Millisecond) // the new page is loading
	}
}

type templatePoint struct {
	Job    string  `json:"job"`
	Metric string  `json:"metric"`
	Run    string  `json:"run"`
	Task   string  `json:"task"`
	Title  string  `json:"title"`
	Href   string  `json:"href"`
	Cy     float64 `json:"cy"`
	MinCy  float64 `json:"minCy"`
	Points int     `json:"points"`
}

func testTemplatePage(t *testing.T, browser context.Context, base, wantFactor, jobFactor string, counter, start, end int64) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/templates/7")
	tab.poll(t, `window.peakline && window.peakline.ready`)
	if msg := webEval[string](t, tab, `window.peakline.error || ''`); msg != "" {
		t.Fatalf("the template page shows an error: %s", msg)
	}
	if got := webEval[string](t, tab, `document.querySelector('h1').textContent`); !strings.Contains(got, "deploy-web") || !strings.Contains(got, "template 7") {
		t.Errorf("heading %q, want the template's name and id", got)
	}
	// One row per task: the newest run's tasks in its order, then the
	// tasks only runner-loops had.
	names := webEval[[]string](t, tab, `[...document.querySelectorAll('table.history tbody tr .task-name')].map(e => e.textContent)`)
	if len(names) <= len(templateRunTasks) || !slices.Equal(names[:len(templateRunTasks)], templateRunTasks) {
		t.Fatalf("task rows %q, want %q first, then runner-loops' tasks", names, templateRunTasks)
	}
	// Every task of site.yml has a point per run in its duration and
	// memory charts; runner-loops' tasks one.
	counts := webEval[[]int](t, tab, `[...document.querySelectorAll('table.history tbody tr')].map(tr =>
		tr.querySelectorAll('td[data-metric="memory_max"] circle.pt').length)`)
	for i, n := range counts {
		want := 1
		if i < len(templateRunTasks) {
			want = 6
		}
		if n != want {
			t.Errorf("memory chart of task row %d (%s) has %d points, want %d", i, names[i], n, want)
		}
	}
	runRows := webEval[[]string](t, tab, `[...document.querySelectorAll('table.runs tbody tr')].map(tr => tr.dataset.job + (tr.classList.contains('regressed') ? '!' : ''))`)
	if want := []string{"loops", "1001", "1002", "1003", "1004", "1005!", "1006"}; !slices.Equal(runRows, want) {
		t.Errorf("runs table %q, want %q", runRows, want)
	}

	// Exactly one point is marked: run 1005's memory of allocate cache,
	// drawn as the highest point of its chart, titled with its factor.
	marked := webEval[[]templatePoint](t, tab, `[...document.querySelectorAll('circle.pt.regression')].map(c => {
		const chart = c.closest('svg');
		const cys = [...chart.querySelectorAll('circle.pt')].map(p => Number(p.getAttribute('cy')));
		return {job: c.dataset.job, metric: c.dataset.metric, run: c.dataset.run,
			task: c.closest('tr').querySelector('.task-name').textContent,
			title: c.closest('a').querySelector('title').textContent,
			href: c.closest('a').getAttribute('href'),
			cy: Number(c.getAttribute('cy')), minCy: Math.min(...cys), points: cys.length};
	})`)
	if len(marked) != 1 {
		t.Fatalf("%d points marked as regressions, want 1: %+v", len(marked), marked)
	}
	m := marked[0]
	wantHref := fmt.Sprintf("/jobs/1005?task=%d", counter)
	if m.Job != "1005" || m.Metric != "memory_max" || m.Run != "5" || m.Task != "allocate cache" || m.Href != wantHref ||
		!strings.Contains(m.Title, wantFactor) || m.Cy != m.MinCy || m.Points != 6 {
		t.Errorf("marked point %+v, want job 1005 (run 5), memory_max, allocate cache, the highest of 6, %q, titled %q", m, wantHref, wantFactor)
	}
	if got := webEval[string](t, tab, `document.querySelector('#regressions').textContent`); !strings.Contains(got, "job 1005") || !strings.Contains(got, "allocate cache") || !strings.Contains(got, wantFactor) {
		t.Errorf("regressions list %q, want job 1005's allocate cache, %s", got, wantFactor)
	}
	if n := webEval[int](t, tab, `window.peakline.requests`); n != 1 {
		t.Errorf("template page made %d history requests, want 1", n)
	}
	if *updateScreenshot {
		webScreenshotTo(t, tab, "template-page.png")
	}
	if got := webEval[[]string](t, tab, `[...document.querySelectorAll('a.last-n')].map(a => a.getAttribute('href'))`); !slices.Equal(got, []string{"?last=10", "?last=50", "?last=100"}) {
		t.Errorf("run count links %q, want 10, 50 and 100 (20 is shown)", got)
	}

	// The last three runs are too few to judge: nothing is marked.
	short := webOpenTab(t, browser)
	short.navigate(t, base+"/templates/7?last=3")
	short.poll(t, `window.peakline && window.peakline.ready`)
	if got := webEval[[]string](t, short, `[...document.querySelectorAll('table.runs tbody tr')].map(tr => tr.dataset.job)`); !slices.Equal(got, []string{"1004", "1005", "1006"}) {
		t.Errorf("last 3 runs %q, want 1004 1005 1006", got)
	}
	if n := webEval[int](t, short, `document.querySelectorAll('circle.pt.regression').length`); n != 0 {
		t.Errorf("%d regressions marked among 3 runs, want none", n)
	}
	// The window is what is small: the page says so and offers the whole
	// template.
	short.waitText(t, "#status", "Regressions are judged against at least 3 other runs: this window shows only the last 3 of the template's 7 runs (?last=3). Show the last 7.")
	short.checkProblems(t)

	// Clicking it opens job 1005 zoomed to that task, the task picked.
	p := tab.center(t, `circle.pt.regression`)
	tab.do(t, chromedp.MouseClickXY(p.X, p.Y))
	tab.pollAcross(t, `location.pathname === '/jobs/1005' && !!window.peakline && !!window.peakline.focus && window.peakline.loads >= 2`)
	tab.waitLoads(t, 2)
	q := webEval[string](t, tab, `location.search`)
	if !strings.Contains(q, fmt.Sprintf("task=%d", counter)) {
		t.Errorf("job page address %q lacks task=%d", q, counter)
	}
	var focus struct {
		Counter int64  `json:"counter"`
		Found   bool   `json:"found"`
		Name    string `json:"name"`
	}
	focus = webEval[struct {
		Counter int64  `json:"counter"`
		Found   bool   `json:"found"`
		Name    string `json:"name"`
	}](t, tab, `window.peakline.focus`)
	if !focus.Found || focus.Counter != counter || focus.Name != "allocate cache" {
		t.Errorf("job page focus %+v, want allocate cache at counter %d", focus, counter)
	}
	var win struct {
		From, To int64
		Zoomed   bool
	}
	win = webEval[struct {
		From, To int64
		Zoomed   bool
	}](t, tab, `window.peakline.window`)
	if !win.Zoomed || win.From > start || win.To < end || win.To-win.From > 3*(end-start) {
		t.Errorf("job page window %+v, want zoomed around the task's %d..%d", win, start, end)
	}
	tab.waitText(t, `#detail h2`, "allocate cache")
	tab.waitText(t, `#detail`, "Against the template's other runs: "+jobFactor+".")
	if got := webEval[string](t, tab, `(document.querySelector('#tasks tr.marked') || {dataset: {}}).dataset.counter || ''`); got != fmt.Sprint(counter) {
		t.Errorf("marked task row has counter %q, want %d", got, counter)
	}
	tab.checkProblems(t)
}

// testJobVsUsual checks the "vs usual" column: run 1005's allocate cache
// says the factor of its regression, its other tasks are usual, and a run
// whose tasks no other run has shows "—" throughout.
func testJobVsUsual(t *testing.T, browser context.Context, base, wantFactor string, counter int64) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/jobs/1005")
	tab.waitLoads(t, 1)
	tab.poll(t, `document.querySelectorAll('#tasks td.vs-usual').length > 0`)
	type usualRow struct {
		Counter   string `json:"counter"`
		Name      string `json:"name"`
		Text      string `json:"text"`
		Regressed bool   `json:"regressed"`
	}
	rows := webEval[[]usualRow](t, tab, `[...document.querySelectorAll('#tasks tbody tr')].map(tr => ({
		counter: tr.dataset.counter, name: tr.querySelector('.task-name').textContent,
		text: tr.querySelector('td.vs-usual').textContent, regressed: tr.querySelector('td.vs-usual').classList.contains('regressed')}))`)
	if len(rows) != len(templateRunTasks) {
		t.Fatalf("job 1005 shows %d task rows, want %d: %+v", len(rows), len(templateRunTasks), rows)
	}
	for _, r := range rows {
		heavy := r.Counter == fmt.Sprint(counter)
		if heavy && (r.Text != wantFactor || !r.Regressed || r.Name != "allocate cache") {
			t.Errorf("allocate cache row %+v, want %q marked as a regression", r, wantFactor)
		}
		if !heavy && (r.Regressed || r.Text == "—" || strings.Contains(r.Text, "memory")) {
			t.Errorf("task row %+v, want a usual figure, no regression", r)
		}
	}
	if got := webEval[string](t, tab, `document.querySelector('#job-template').textContent`); !strings.Contains(got, "deploy-web") || !strings.Contains(got, "1 regression") {
		t.Errorf("job template line %q, want deploy-web and 1 regression", got)
	}
	if href := webEval[string](t, tab, `document.querySelector('#job-template a').getAttribute('href')`); href != "/templates/7" {
		t.Errorf("template link %q, want /templates/7", href)
	}
	tab.checkProblems(t)

	// runner-loops' tasks are in no other run: no figure.
	tab.navigate(t, base+"/jobs/loops")
	tab.waitLoads(t, 1)
	tab.poll(t, `window.peakline.history && document.querySelectorAll('#tasks td.vs-usual').length > 0`)
	texts := webEval[[]string](t, tab, `[...document.querySelectorAll('#tasks td.vs-usual')].map(td => td.textContent)`)
	for _, s := range texts {
		if s != "—" {
			t.Errorf("runner-loops task says %q vs usual, want —", s)
		}
	}
	tab.checkProblems(t)
}

// testJobsTemplates checks the jobs list: every run names its template
// (a link to its page), only 1005 is flagged, with one history request.
func testJobsTemplates(t *testing.T, browser context.Context, base string) {
	tab := webOpenTab(t, browser)
	tab.navigate(t, base+"/")
	tab.poll(t, `window.peakline && window.peakline.ready && window.peakline.flagged >= 1`)
	type jobRow struct {
		Job      string `json:"job"`
		Template string `json:"template"`
		Href     string `json:"href"`
		Flag     string `json:"flag"`
	}
	rows := webEval[[]jobRow](t, tab, `[...document.querySelectorAll('#jobs-body tr')].map(tr => ({job: tr.dataset.job,
		template: tr.querySelector('td.template').textContent, href: (tr.querySelector('td.template a') || {getAttribute: () => ''}).getAttribute('href'),
		flag: (tr.querySelector('.badge.regression') || {}).textContent || ''}))`)
	if len(rows) != 8 {
		t.Fatalf("jobs list shows %d rows, want 8: %+v", len(rows), rows)
	}
	for _, r := range rows {
		if r.Job == "no-template" {
			if r.Template != "–" || r.Href != "" || r.Flag != "" {
				t.Errorf("jobs row %+v, want no template and no flag", r)
			}
			continue
		}
		wantFlag := ""
		if r.Job == "1005" {
			wantFlag = "1 regression"
		}
		wantName := "deploy-web"
		if r.Job == "loops" {
			wantName = "template 7" // imported with --template alone
		}
		if r.Template != wantName || r.Href != "/templates/7" || r.Flag != wantFlag {
			t.Errorf("jobs row %+v, want template %q linking to /templates/7, flag %q", r, wantName, wantFlag)
		}
	}
	var hist int
	for _, u := range tab.apiRequests() {
		if strings.Contains(u, "/history") {
			hist++
		}
	}
	if hist != 1 {
		t.Errorf("jobs list made %d history requests, want 1 (one template)", hist)
	}
	tab.checkProblems(t)

	// The runs of one template: the link at the top of its runs table.
	tab.navigate(t, base+"/?template=7")
	tab.poll(t, `window.peakline && window.peakline.ready && window.peakline.flagged >= 1`)
	jobs := webEval[[]string](t, tab, `[...document.querySelectorAll('#jobs-body tr')].map(tr => tr.dataset.job)`)
	if want := []string{"1006", "1005", "1004", "1003", "1002", "1001", "loops"}; !slices.Equal(jobs, want) {
		t.Errorf("jobs of template 7: %q, want %q", jobs, want)
	}
	if got := webEval[string](t, tab, `document.getElementById('jobs-note').textContent`); got != "7 of 7 jobs of template 7" {
		t.Errorf("jobs note %q", got)
	}
	tab.checkProblems(t)
}
