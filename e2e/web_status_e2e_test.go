package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/peakline/peakline/collector/ship"
)

// webStatusJob is a two-task job of template 55 whose sender reported
// status, with samples every 250 ms from startMs to endMs; its CPU peak
// (250 %) is in task 6 "link", its memory peak in task 3 "compile".
func webStatusJob(id, status string, startMs, endMs int64) *ship.Batch {
	mid := startMs + (endMs-startMs)/2
	b := &ship.Batch{JobID: id, JobInfo: ship.JobInfo{TemplateID: "55", TemplateName: "status-check", Status: status, Playbook: "status.yml"},
		Tasks: []ship.Task{{Counter: 3, UUID: webUUID(3), Name: "compile", StartMs: startMs}, {Counter: 6, UUID: webUUID(6), Name: "link", StartMs: mid}}}
	for _, tk := range b.Tasks {
		cpu := ship.Series{Resource: "cpu", Counter: tk.Counter, UUID: tk.UUID, Task: tk.Name}
		mem := ship.Series{Resource: "memory", Counter: tk.Counter, UUID: tk.UUID, Task: tk.Name}
		to := endMs
		if tk.Counter == 3 {
			to = mid - 1
		}
		for ts := tk.StartMs + 100; ts <= to; ts += 250 {
			c, m := 40.0, 100e6
			if tk.Counter == 6 && ts+250 > to {
				c = 250
			}
			if tk.Counter == 3 && ts+250 > to {
				m = 900e6
			}
			cpu.Ts, cpu.Vs = append(cpu.Ts, ts), append(cpu.Vs, c)
			mem.Ts, mem.Vs = append(mem.Ts, ts), append(mem.Vs, m)
		}
		b.Series = append(b.Series, cpu, mem)
	}
	return b
}

// TestWebStatus: the jobs list and the job page show each job's status
// (successful, failed, running; AWX's "error" as failed), the list the
// task behind each peak and a status filter; a job page is live while
// its status says running and no longer once its last batch says it
// ended, even with samples seconds old; an ended job shows its end time
// with its zone.
func TestWebStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("browser end-to-end test: skipped under -short")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the web status test needs Debian's chromium in PATH (%v)", err)
	}
	bin := webBuild(t)
	srv := webServe(t, bin, t.TempDir(), "--events-url", webEventsTemplate)
	now := time.Now().UnixMilli()
	jobs := []struct {
		id, status, state string
		start, end        int64
	}{
		{"st-ok", "successful", "successful", now - 3600_000, now - 3540_000},
		{"st-failed", "failed", "failed", now - 3000_000, now - 2950_000},
		{"st-error", "error", "failed", now - 2800_000, now - 2790_000},
		// Ended two seconds ago: no longer live, though its samples are fresh.
		{"st-just-done", "successful", "successful", now - 20_000, now - 2000},
		{"st-running", "running", "running", now - 30_000, now},
	}
	lastSample := map[string]int64{}
	for _, j := range jobs {
		b := webStatusJob(j.id, j.status, j.start, j.end)
		for _, s := range b.Series {
			lastSample[j.id] = max(lastSample[j.id], s.Ts[len(s.Ts)-1])
		}
		webIngest(t, srv.URL, b)
	}
	browser := webBrowser(t, chromium)

	// The list: one row per job with its state, template, playbook and
	// the task of each peak; live only for the running job.
	tab := webOpenTab(t, browser)
	tab.navigate(t, srv.URL+"/")
	tab.poll(t, `window.peakline && window.peakline.ready && window.peakline.done`)
	type row struct {
		Job, State, Text, Playbook, CPUTask, MemTask string
		Live                                         bool
	}
	rows := webEval[[]row](t, tab, `[...document.querySelectorAll('#jobs-body tr')].map(tr => ({
		Job: tr.dataset.job, State: tr.querySelector('td.job-state .state').dataset.state,
		Text: tr.querySelector('td.job-state').textContent, Playbook: tr.querySelector('td.playbook').textContent,
		CPUTask: tr.querySelector('td.peak[data-resource="cpu"] .peak-of').textContent,
		MemTask: tr.querySelector('td.peak[data-resource="memory"] .peak-of').textContent,
		Live: tr.querySelector('td.name .live') !== null}))`)
	if len(rows) != len(jobs) {
		t.Fatalf("the list shows %d jobs, want %d: %+v", len(rows), len(jobs), rows)
	}
	for _, j := range jobs {
		i := slices.IndexFunc(rows, func(r row) bool { return r.Job == j.id })
		if i < 0 {
			t.Fatalf("job %s not listed: %+v", j.id, rows)
		}
		r := rows[i]
		if r.State != j.state || r.Text != j.state || r.Playbook != "status.yml" || r.CPUTask != "link" || r.MemTask != "compile" || r.Live != (j.state == "running") {
			t.Errorf("job %s row %+v, want state %s, playbook status.yml, CPU peak in link, memory peak in compile, live %t", j.id, r, j.state, j.state == "running")
		}
	}
	if title := webEval[string](t, tab, `document.querySelector('#jobs-body tr[data-job="st-error"] .state').title`); !strings.Contains(title, "error") {
		t.Errorf("the failed state of a job AWX reported as error has title %q, want it to name error", title)
	}
	started := webEval[string](t, tab, `document.querySelector('#jobs-body tr[data-job="st-ok"] td.time').textContent`)
	if !webHasZone(started) {
		t.Errorf("the start time %q names no time zone", started)
	}
	// The status filter: failed keeps the failed jobs, in the address too.
	tab.do(t, chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('status-filter'); s.value = 'failed'; s.dispatchEvent(new Event('change')); })()`))
	tab.poll(t, `window.peakline.status === 'failed' && window.peakline.done && document.querySelectorAll('#jobs-body tr').length === 2`)
	got := webEval[[]string](t, tab, `[...document.querySelectorAll('#jobs-body tr')].map(tr => tr.dataset.job).sort()`)
	if fmt.Sprint(got) != "[st-error st-failed]" || !strings.Contains(webEval[string](t, tab, `location.search`), "status=failed") {
		t.Errorf("status filter failed lists %q at %s, want st-error and st-failed", got, webEval[string](t, tab, `location.search`))
	}
	tab.checkProblems(t)

	// The template page tells a small ?last window from a template with
	// few runs: its five runs are enough, the last two are not.
	tp := webOpenTab(t, browser)
	tp.navigate(t, srv.URL+"/templates/55?last=2")
	tp.poll(t, `window.peakline && window.peakline.ready`)
	msg := webEval[string](t, tp, `document.getElementById('status').textContent`)
	link := webEval[string](t, tp, `(document.querySelector('#status a') || {getAttribute: () => ''}).getAttribute('href')`)
	if !strings.Contains(msg, "only the last 2 of the template's 5 runs") || link != "/templates/55?last=5" {
		t.Errorf("template page with ?last=2 says %q, links %q; want the window named and a link to the last 5", msg, link)
	}
	tp.navigate(t, srv.URL+"/templates/55")
	tp.poll(t, `window.peakline && window.peakline.ready && window.peakline.runs === 5`)
	if msg := webEval[string](t, tp, `document.getElementById('status').hidden ? '' : document.getElementById('status').textContent`); msg != "" {
		t.Errorf("template page of 5 runs says %q, want nothing about too few runs", msg)
	}
	tp.checkProblems(t)

	// The job pages.
	page := func(id string) *webTab {
		t.Helper()
		p := webOpenTab(t, browser)
		p.navigate(t, srv.URL+"/jobs/"+id)
		p.waitLoads(t, 1)
		return p
	}
	for _, j := range jobs {
		p := page(j.id)
		state := webEval[string](t, p, `document.querySelector('#job-state .state').dataset.state`)
		live := webEval[bool](t, p, `window.peakline.live && !document.getElementById('live').hidden`)
		when := webEval[string](t, p, `(document.querySelector('#job-state .state-when') || {textContent: ''}).textContent`)
		if state != j.state || live != (j.state == "running") {
			t.Errorf("job page %s: state %q live %t, want %s and live %t", j.id, state, live, j.state, j.state == "running")
		}
		if j.state != "running" && (!strings.Contains(when, "ended ") || !webHasZone(when)) {
			t.Errorf("job page %s says %q, want when it ended, with the zone", j.id, when)
		}
		// The end is the last time the job shows: its last sample here.
		if end := webEval[int64](t, p, `window.peakline.end || 0`); j.state != "running" && end != lastSample[j.id] {
			t.Errorf("job page %s: end %d, want its last sample's time %d", j.id, end, lastSample[j.id])
		}
		p.checkProblems(t)
	}

	// A running job's page refreshes; once its last batch says it
	// ended, the next refresh ends live.
	p := page("st-running")
	last := webStatusJob("st-running", "successful", now-30_000, time.Now().UnixMilli())
	last.Tasks = nil
	last.Series = nil
	webIngest(t, srv.URL, last)
	p.waitLoads(t, 2)
	if webEval[bool](t, p, `window.peakline.live || !document.getElementById('live').hidden`) || webEval[string](t, p, `window.peakline.status`) != "successful" {
		t.Errorf("after the job's final batch its page is still live (status %q)", webEval[string](t, p, `window.peakline.status`))
	}
	loads := webEval[int](t, p, `window.peakline.loads`)
	time.Sleep(6 * time.Second) // longer than the 5 s refresh
	if n := webEval[int](t, p, `window.peakline.loads`); n != loads {
		t.Errorf("an ended job's page loaded %d more times", n-loads)
	}
	p.checkProblems(t)
}

// webHasZone reports whether a time shown to people names its zone.
func webHasZone(s string) bool { return strings.Contains(s, "UTC") }
