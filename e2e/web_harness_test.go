package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/peakline/peakline/collector/ship"
)

// --- synthetic jobs, as JSON ingest batches ---

func webUUID(i int) string { return fmt.Sprintf("0a0b0c0d-0000-4000-8000-%012d", i) }

// webEmptyJob has three tasks and no samples.
func webEmptyJob(startMs int64) *ship.Batch {
	b := &ship.Batch{JobID: "web-empty", LastEvent: &ship.Event{Counter: 12, TimeMs: startMs + 9000}}
	for i := range 3 {
		b.Tasks = append(b.Tasks, ship.Task{Counter: int64(3 + 3*i), UUID: webUUID(i), Name: fmt.Sprintf("quiet task %d", i+1), StartMs: startMs + int64(i)*3000})
	}
	return b
}

// webOneSampleJob has one task with one CPU sample.
func webOneSampleJob(startMs int64) *ship.Batch {
	return &ship.Batch{
		JobID:     "web-one-sample",
		Tasks:     []ship.Task{{Counter: 3, UUID: webUUID(1), Name: "the only task", StartMs: startMs}},
		LastEvent: &ship.Event{Counter: 5, TimeMs: startMs + 2000},
		Series:    []ship.Series{{Resource: "cpu", Counter: 3, UUID: webUUID(1), Task: "the only task", Ts: []int64{startMs + 500}, Vs: []float64{42}}},
	}
}

// webManyTasksJob has webManyTasks tasks of 400 ms. Each has two CPU
// samples; every tenth also memory and PIDs samples (the store's cost is
// per series, one per task and resource); task 7777 holds the memory peak.
func webManyTasksJob(startMs int64) *ship.Batch {
	b := &ship.Batch{JobID: "web-many-tasks", LastEvent: &ship.Event{Counter: int64(3 * (webManyTasks + 1)), TimeMs: startMs + webManyTasks*400}}
	res := map[string][]ship.Series{}
	for i := range webManyTasks {
		counter := int64(3 + 3*i)
		name := fmt.Sprintf("step %05d: configure item", i)
		start := startMs + int64(i)*400
		b.Tasks = append(b.Tasks, ship.Task{Counter: counter, UUID: webUUID(i), Name: name, StartMs: start})
		ts := []int64{start + 100, start + 300}
		wave := float64(i % 97)
		add := func(r string, vs ...float64) {
			res[r] = append(res[r], ship.Series{Resource: r, Counter: counter, UUID: webUUID(i), Task: name, Ts: ts, Vs: vs})
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

// webTinyJob has one task with one CPU sample, at startMs, and a memory
// sample before it (Series[1], counter 0).
func webTinyJob(id string, startMs int64) *ship.Batch {
	return &ship.Batch{
		JobID: id,
		Tasks: []ship.Task{{Counter: 3, UUID: webUUID(1), Name: "tiny", StartMs: startMs}},
		Series: []ship.Series{
			{Resource: "cpu", Counter: 3, UUID: webUUID(1), Task: "tiny", Ts: []int64{startMs + 100}, Vs: []float64{7}},
			// Taken before the first task started, as collect does.
			{Resource: "memory", Counter: 0, Ts: []int64{startMs - 200}, Vs: []float64{40 << 20}},
		},
	}
}

// webLiveJob is running: its newest samples are from nowMs.
func webLiveJob(nowMs int64) *ship.Batch {
	start := nowMs - 20_000
	b := &ship.Batch{JobID: "web-live", Tasks: []ship.Task{{Counter: 3, UUID: webUUID(1), Name: "still running", StartMs: start}}}
	s := ship.Series{Resource: "cpu", Counter: 3, UUID: webUUID(1), Task: "still running"}
	for ts := start + 250; ts <= nowMs; ts += 250 {
		s.Ts = append(s.Ts, ts)
		s.Vs = append(s.Vs, float64(50+ts%40))
	}
	b.Series = append(b.Series, s)
	return b
}

// webBatchSeries keeps each posted batch under the server's default
// --max-batch-series (10,000).
const webBatchSeries = 5000

// webIngest posts a job to the server's JSON ingest with the collector's
// client, in batches of at most webBatchSeries series; the first carries
// the tasks and the last event.
func webIngest(t *testing.T, base string, b *ship.Batch) {
	t.Helper()
	c := ship.Client{BaseURL: base}
	part := ship.Batch{JobID: b.JobID, Tasks: b.Tasks, LastEvent: b.LastEvent, JobInfo: b.JobInfo}
	for from := 0; ; from += webBatchSeries {
		part.Series = b.Series[from:min(len(b.Series), from+webBatchSeries)]
		if err := c.Send(context.Background(), &part); err != nil {
			t.Fatalf("ingest %s: %v", b.JobID, err)
		}
		if from+webBatchSeries >= len(b.Series) {
			return
		}
		part = ship.Batch{JobID: b.JobID}
	}
}

// --- the graph payload, as the test reads it ---

func (g *graphDoc) series(resource string) *seriesDoc {
	for i := range g.Series {
		if g.Series[i].Resource == resource {
			return &g.Series[i]
		}
	}
	return nil
}

func (g *graphDoc) task(counter int64) *graphTaskDoc {
	for i := range g.Tasks {
		if g.Tasks[i].Counter == counter {
			return &g.Tasks[i]
		}
	}
	return nil
}

// webFetchGraph repeats a graph request the page made, to compare what
// it drew with what it got.
func webFetchGraph(t *testing.T, u string) *graphDoc {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var g graphDoc
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

// webDrawnCheck is what webDrawnJS finds on one chart's canvas.
type webDrawnCheck struct {
	Points int    `json:"points"` // vertices (or dots) the chart placed
	Misses int    `json:"misses"` // payload points with no line pixel near
	First  string `json:"first"`  // the first miss, described
	Error  string `json:"error"`
}

// webDrawnJS checks a chart's canvas against payload points (ts, vs): it
// places each point with the scale the chart drew with (canvas.drawn)
// and looks for a pixel of the line's color within 2 device pixels. The
// pixels come from the canvas itself, so a point the drawing dropped
// (a spike, an end) is missed whatever the chart says it drew.
const webDrawnJS = `((resource, ts, vs) => {
	const chart = document.querySelector('.chart[data-resource="' + resource + '"]');
	const canvas = chart && chart.querySelector('canvas');
	const d = canvas && canvas.drawn;
	if (!d) return {points: 0, misses: ts.length, first: '', error: 'no drawn chart for ' + resource};
	const probe = document.createElement('canvas').getContext('2d', {willReadFrequently: true});
	probe.fillStyle = d.color;
	probe.fillRect(0, 0, 1, 1);
	const [lr, lg, lb] = probe.getImageData(0, 0, 1, 1).data;
	const img = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
	const near = (px, py) => {
		for (let dy = -2; dy <= 2; dy++) for (let dx = -2; dx <= 2; dx++) {
			const x = px + dx, y = py + dy;
			if (x < 0 || y < 0 || x >= img.width || y >= img.height) continue;
			const i = 4 * (y * img.width + x);
			const dr = img.data[i] - lr, dg = img.data[i + 1] - lg, db = img.data[i + 2] - lb;
			if (img.data[i + 3] >= 160 && dr * dr + dg * dg + db * db <= 110 * 110) return true;
		}
		return false;
	};
	let misses = 0, first = '';
	for (let k = 0; k < ts.length; k++) {
		const x = d.left + (ts[k] - d.from) / (d.to - d.from) * (d.right - d.left);
		const y = d.bottom - vs[k] / d.yMax * (d.bottom - d.top);
		if (!near(Math.floor(x * d.dpr), Math.floor(y * d.dpr))) {
			if (misses++ === 0) first = 'point ' + k + ' (t ' + ts[k] + ', v ' + vs[k] + ') at ' + x.toFixed(1) + ',' + y.toFixed(1);
		}
	}
	return {points: d.points, misses, first, error: ''};
})`

// checkDrawn checks that each chart drew every point of the payload's
// series: as many vertices as points, and line pixels where each point
// falls on the canvas.
func (tab *webTab) checkDrawn(t *testing.T, g *graphDoc) {
	t.Helper()
	charts := webEval[[]string](t, tab, `[...document.querySelectorAll('.chart')].map(c => c.dataset.resource)`)
	if len(charts) != len(g.Series) {
		t.Errorf("page draws charts %q, payload has %d series", charts, len(g.Series))
	}
	for _, s := range g.Series {
		ts, _ := json.Marshal(s.T)
		vs, _ := json.Marshal(s.V)
		got := webEval[webDrawnCheck](t, tab, fmt.Sprintf(`%s(%q, %s, %s)`, webDrawnJS, s.Resource, ts, vs))
		if got.Error != "" || got.Points != len(s.T) || got.Misses != 0 {
			t.Errorf("%s chart drew %d points, %d of the payload's %d have no line pixel (first: %s) %s",
				s.Resource, got.Points, got.Misses, len(s.T), got.First, got.Error)
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
