package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/peakline/peakline/collector/ship"
)

// webPressureShares are the stall shares of the pressure job's 12 sample
// intervals of 500 ms: CPU and memory.
var webPressureShares = map[string][]float64{
	"cpu":    {0, 0.1, 0.2, 0.4, 0.8, 1, 0.6, 0.3, 0.05, 0, 0.5, 0.25},
	"memory": {0.5, 0.25, 0, 0, 0.1, 0.2, 0, 0, 0.7, 0.9, 0.4, 0},
}

// webPressureJob has one task of 6 s with CPU and memory samples every
// 500 ms and stall samples beside them: in interval k the job waited
// webPressureShares[signal][k] × 0.5 s.
func webPressureJob(startMs int64) *ship.Batch {
	b := &ship.Batch{JobID: "web-pressure", LastEvent: &ship.Event{Counter: 3, TimeMs: startMs + 6000}}
	b.Tasks = []ship.Task{{Counter: 3, UUID: webUUID(0), Name: "contended", StartMs: startMs}}
	add := func(res string, v func(k int) float64) {
		s := ship.Series{Resource: res, Counter: 3, UUID: webUUID(0), Task: "contended"}
		for k := range 12 {
			s.Ts, s.Vs = append(s.Ts, startMs+int64(500*(k+1))), append(s.Vs, v(k))
		}
		b.Series = append(b.Series, s)
	}
	add("cpu", func(k int) float64 { return 40 + 5*float64(k) })
	add("memory", func(k int) float64 { return float64(100+10*k) * (1 << 20) })
	add("cpu_stall", func(k int) float64 { return webPressureShares["cpu"][k] * 0.5 })
	add("memory_stall", func(k int) float64 { return webPressureShares["memory"][k] * 0.5 })
	return b
}

// webBandCheck is what webBandJS measures on one chart.
type webBandCheck struct {
	Signal  string    `json:"signal"`
	Share   []float64 `json:"share"`
	From    []int64   `json:"from"`
	T       []int64   `json:"t"`
	Heights []float64 `json:"heights"` // the band's height at each interval, CSS px
	PlotH   float64   `json:"plotH"`
	OffNull bool      `json:"offNull"` // toggled off, nothing was drawn
	OffDiff int       `json:"offDiff"` // pixels that changed, toggled off and on again
	Legend  string    `json:"legend"`
	Checked bool      `json:"checked"`
	Error   string    `json:"error"`
}

// webBandJS reads a chart's pressure band back: what the chart says it
// drew (canvas.pressure) and, from the pixels, how high the band is at
// the middle of each interval: from the chart's bottom to the highest row
// of that column that changes when the legend's toggle turns the band
// off (the grid and the line, drawn over the band, hide rows of it). It turns the band on again and
// counts the pixels that differ from the first drawing (none expected).
const webBandJS = `((resource) => {
	const chart = document.querySelector('.chart[data-resource="' + resource + '"]');
	const canvas = chart && chart.querySelector('canvas');
	const d = canvas && canvas.drawn, p = canvas && canvas.pressure;
	const box = chart && chart.querySelector('input.pressure-toggle');
	if (!d || !p || !box) return {error: 'no band drawn on the ' + resource + ' chart'};
	const ctx = canvas.getContext('2d');
	const img = () => ctx.getImageData(0, 0, canvas.width, canvas.height);
	const on = img();
	box.click();
	const offNull = canvas.pressure === null;
	const off = img();
	box.click();
	const again = img();
	const differs = (a, b, i) => Math.abs(a.data[i] - b.data[i]) + Math.abs(a.data[i + 1] - b.data[i + 1]) + Math.abs(a.data[i + 2] - b.data[i + 2]) > 6;
	let offDiff = 0;
	for (let i = 0; i < on.data.length; i += 4) if (differs(on, again, i)) offDiff++;
	const xOf = (t) => d.left + (t - d.from) / (d.to - d.from) * (d.right - d.left);
	const heights = p.t.map((t, k) => {
		const x = Math.floor((Math.max(d.left, xOf(p.from[k])) + Math.min(d.right, xOf(t))) / 2 * d.dpr);
		const bottom = Math.floor(d.bottom * d.dpr);
		for (let y = Math.ceil(d.top * d.dpr); y < bottom; y++) if (differs(on, off, 4 * (y * on.width + x))) return (d.bottom * d.dpr - y) / d.dpr;
		return 0;
	});
	return {signal: p.signal, share: p.share, from: p.from, t: p.t, heights, plotH: d.bottom - d.top, offNull, offDiff,
		legend: chart.querySelector('.pressure-legend').textContent, checked: box.checked, error: ''};
})`

// TestWebPressureBand checks the job page's pressure band: for a job with
// known stall samples, the graph payload's pressure holds each
// interval's stall share exactly, the CPU and memory charts draw a band
// of that share's height (measured in pixels, within 3 px) behind their
// lines with a legend entry whose toggle removes it and brings it back;
// a job without stall samples has no pressure in its payload, no band and
// no legend entry.
func TestWebPressureBand(t *testing.T) {
	if testing.Short() {
		t.Skip("browser end-to-end test: skipped under -short")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the web page test needs Debian's chromium in PATH (%v): install it with `apt-get update && apt-get install -y chromium` (or run go test -short to skip it)", err)
	}
	bin := webBuild(t)
	srv := webServe(t, bin, t.TempDir())
	start := time.Now().Add(-time.Hour).UnixMilli()
	webIngest(t, srv.URL, webPressureJob(start))
	webIngest(t, srv.URL, webTinyJob("web-no-pressure", start))

	// The payload: each interval's share, the first one a median
	// interval (500 ms) long.
	var g struct {
		Pressure []struct {
			Signal     string    `json:"signal"`
			RawSamples int       `json:"raw_samples"`
			From       []int64   `json:"from"`
			T          []int64   `json:"t"`
			Share      []float64 `json:"share"`
		} `json:"pressure"`
	}
	code, body := srv.get(t, "/api/v1/jobs/web-pressure/graph?points=1000")
	if code != 200 || json.Unmarshal(body, &g) != nil {
		t.Fatalf("graph: %d %s", code, body)
	}
	if len(g.Pressure) != 2 || g.Pressure[0].Signal != "cpu" || g.Pressure[1].Signal != "memory" {
		t.Fatalf("pressure %+v, want a cpu and a memory band", g.Pressure)
	}
	for _, b := range g.Pressure {
		var from, to []int64
		for k := range 12 {
			from, to = append(from, start+int64(500*k)), append(to, start+int64(500*(k+1)))
		}
		if want := webPressureShares[b.Signal]; b.RawSamples != 12 || !slices.Equal(b.Share, want) || !slices.Equal(b.From, from) || !slices.Equal(b.T, to) {
			t.Errorf("%s band: %d samples, from %v, t %v, shares %v; want 12, from %v, t %v, shares %v", b.Signal, b.RawSamples, b.From, b.T, b.Share, from, to, want)
		}
	}
	g.Pressure = nil
	code, body = srv.get(t, "/api/v1/jobs/web-no-pressure/graph")
	if code != 200 || json.Unmarshal(body, &g) != nil || g.Pressure != nil {
		t.Fatalf("graph of a job without stall samples: %d %s; want no pressure", code, body)
	}

	browser := webBrowser(t, chromium)
	tab := webOpenTab(t, browser)
	tab.navigate(t, srv.URL+"/jobs/web-pressure")
	tab.waitLoads(t, 1)
	tab.settle()
	legend := map[string]string{"cpu": "waited for a CPU (share of interval)", "memory": "waited on memory (share of interval)"}
	for _, res := range []string{"cpu", "memory"} {
		got := webEval[webBandCheck](t, tab, fmt.Sprintf(`%s(%q)`, webBandJS, res))
		if got.Error != "" {
			t.Fatalf("%s chart: %s", res, got.Error)
		}
		if want := webPressureShares[res]; got.Signal != res || !slices.Equal(got.Share, want) || len(got.Heights) != len(want) {
			t.Fatalf("%s chart drew band %q with shares %v, want %v", res, got.Signal, got.Share, want)
		}
		for k, h := range got.Heights {
			if want := webPressureShares[res][k] * got.PlotH; math.Abs(h-want) > 3 {
				t.Errorf("%s chart: the band of interval %d (share %v) is %.1f px high, want %.1f (of %.0f)", res, k, webPressureShares[res][k], h, want, got.PlotH)
			}
		}
		if got.Legend != legend[res] || !got.Checked || !got.OffNull || got.OffDiff != 0 {
			t.Errorf("%s chart: legend %q checked %v; toggled off drew nothing: %v; on again differs in %d pixels; want %q, checked, true, 0",
				res, got.Legend, got.Checked, got.OffNull, got.OffDiff, legend[res])
		}
	}
	if n := webEval[int](t, tab, `document.querySelectorAll('.chart[data-resource="pids"] .pressure-legend:not([hidden])').length`); n != 0 {
		t.Errorf("the PIDs chart shows %d pressure legends, want none", n)
	}
	tab.checkProblems(t)

	tab.navigate(t, srv.URL+"/jobs/web-no-pressure")
	tab.waitLoads(t, 1)
	tab.settle()
	charts := webEval[[]string](t, tab, `[...document.querySelectorAll('.chart')].map((c) =>
		c.dataset.resource + ':' + (c.querySelector('canvas').pressure === null) + ':' + c.querySelectorAll('.pressure-legend:not([hidden]), input.pressure-toggle').length)`)
	if len(charts) == 0 {
		t.Errorf("job without stall samples: no charts drawn")
	}
	for _, c := range charts {
		if !strings.HasSuffix(c, ":true:0") {
			t.Errorf("job without stall samples: chart %q, want no band and no legend (resource:true:0)", c)
		}
	}
	tab.checkProblems(t)
}
