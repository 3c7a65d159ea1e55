package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestRatioAndPercentile(t *testing.T) {
	f := func(a, b, want float64) {
		t.Helper()
		got := ratio(a, b)
		if !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("ratio(%v, %v) = %v, want %v", a, b, got, want)
		}
	}
	f(10, 5, 2)
	f(0, 0, 1)
	f(3, 0, math.Inf(1))
	f(math.NaN(), 1, math.NaN())
	xs := []float64{5, 1, 4, 2, 3}
	if p := percentile(xs, 50); p != 3 {
		t.Fatalf("p50 = %v", p)
	}
	if p := percentile(xs, 99); p != 5 {
		t.Fatalf("p99 = %v", p)
	}
	if xs[0] != 5 {
		t.Fatal("percentile sorted its input")
	}
	if !math.IsNaN(percentile(nil, 50)) {
		t.Fatal("percentile of nothing is not NaN")
	}
	if c := cost("w", "s", "p", "m", "u", 2, 6); c.Speedup != 3 {
		t.Fatalf("cost speedup %v, want 3 (peer cost / Peakline cost)", c.Speedup)
	}
	if g := gain("w", "s", "p", "m", "u", 6, 2); g.Speedup != 3 {
		t.Fatalf("gain speedup %v, want 3", g.Speedup)
	}
}

func TestReportWriters(t *testing.T) {
	r := &Report{Title: "t"}
	r.Add(cost("1e6x200", "graph", "promql", "p50 latency", "ms", 10, 40),
		gain("50 jobs", "peakline remote write", "prometheus remote write", "throughput", "samples/s", 2e6, 1e6),
		alone("soak", "server RSS max", "server", "MiB", 123.5))
	r.Note("a note %d", 7)
	var table bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## t", "p50 latency (ms)", "1e6x200", "4.00x", "2.00x", "123.5", "- a note 7"} {
		if !strings.Contains(table.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, js.String())
	}
	if len(got) != 3 {
		t.Fatalf("%d objects, want 3", len(got))
	}
	for _, k := range []string{"workload", "subject", "peer", "metric", "value", "peer_value", "speedup"} {
		if _, ok := got[0][k]; !ok {
			t.Fatalf("object lacks %q: %v", k, got[0])
		}
	}
	if got[0]["speedup"] != 4.0 || got[2]["speedup"] != nil || got[2]["peer_value"] != nil {
		t.Fatalf("speedups: %v, %v (want 4 and null)", got[0]["speedup"], got[2]["speedup"])
	}
}

// checkSVG fails unless s is well-formed XML with an svg root.
func checkSVG(t *testing.T, s string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(s))
	root := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
}

func TestSVG(t *testing.T) {
	charts := []Chart{
		{Title: "latency <vs> size", XLabel: "samples", YLabel: "ms", LogX: true, LogY: true, Lines: []Line{
			{Name: "graph", X: []float64{1e3, 1e4, 1e5, 1e6}, Y: []float64{1, 2, 10, 50}, Marks: true},
			{Name: "promql", X: []float64{1e3, 1e4, 1e5, 1e6}, Y: []float64{50, 80, 400, math.NaN()}, Dashed: true},
		}},
		{Title: "raw", Lines: []Line{{Name: "raw", X: []float64{0, 1, 2}, Y: []float64{3, -1, 2}, Thin: true}, {Name: "dots", X: []float64{0, 2}, Y: []float64{1, 1}, Dots: true}}},
		{Title: "bars", Categories: []string{"peakline remote write", "prometheus"}, Lines: []Line{{Name: "samples/s", Y: []float64{1.2, 0.9}}}},
		{Title: "empty"},
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, "a & b", charts); err != nil {
		t.Fatal(err)
	}
	checkSVG(t, b.String())
	for _, want := range []string{"<polyline", "<rect", "<circle", "latency &lt;vs&gt; size", "stroke-dasharray", "no data", "1M"} {
		if !strings.Contains(b.String(), want) {
			t.Fatalf("SVG lacks %q", want)
		}
	}
}

func TestEnvelope(t *testing.T) {
	ts := make([]int64, 10_000)
	vs := make([]float64, len(ts))
	for i := range ts {
		ts[i] = int64(i) * 250
		vs[i] = math.Sin(float64(i) / 100)
	}
	vs[5000] = 9
	x, y := envelope(ts, vs, 100)
	if len(x) != len(y) || len(x) > 200 || len(x) < 100 {
		t.Fatalf("envelope of 10000 samples in 100 columns: %d points", len(x))
	}
	top := math.Inf(-1)
	for i := range y {
		top = max(top, y[i])
		if i > 0 && x[i] < x[i-1] {
			t.Fatal("envelope goes back in time")
		}
	}
	if top != 9 {
		t.Fatalf("envelope lost the peak: max %v", top)
	}
}

func TestScrape(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "# HELP x y\n# TYPE a counter\na 2\nb{k=\"v\"} 1.5\nb{k=\"w\"} 2.5\nab 7\nc 1e3 1700000000000\n")
	}))
	defer hs.Close()
	m, err := scrape(t.Context(), hs.URL, "a", "b", "c", "missing")
	if err != nil {
		t.Fatal(err)
	}
	if m["a"] != 2 || m["b"] != 4 || m["c"] != 1000 || len(m) != 3 {
		t.Fatalf("scrape: %v", m)
	}
}

func TestReadProc(t *testing.T) {
	st, err := readProc(osGetpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.rss < 1<<20 || st.cpu < 0 {
		t.Fatalf("readProc of self: %+v", st)
	}
}

func TestDirFilters(t *testing.T) {
	f := func(keep func(string) bool, rel string, want bool) {
		t.Helper()
		if keep(rel) != want {
			t.Fatalf("%q: got %v, want %v", rel, !want, want)
		}
	}
	f(blockFile, "01HZX3Y4Z5A6B7C8D9E0F1G2H3/chunks/000001", true)
	f(blockFile, "01HZX3Y4Z5A6B7C8D9E0F1G2H3/index", true)
	f(blockFile, "wal/00000000", false)
	f(blockFile, "chunks_head/000001", false)
	f(blockFile, "lock", false)
	f(vmStorageFile, "data/small/2026_11/x", true)
	f(vmStorageFile, "indexdb/abc/y", true)
	f(vmStorageFile, "cache/z", false)
}

func osGetpid() int { return os.Getpid() }
