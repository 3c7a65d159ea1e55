package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/peakline/peakline/server"
	"github.com/peakline/peakline/tsdb"
)

// get answers GET hs+path: status, Retry-After, body with the engine's
// URL as ENGINE.
func get(t *testing.T, hs *httptest.Server, path, engine string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(hs.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), strings.ReplaceAll(string(body), engine, "ENGINE")
}

// writeExport writes an export answer of one series of job with n
// samples, values first, with digits decimals or as few as they need
// (-1); with hold it stops before the timestamps, flushes and waits for
// hold (or the reader to hang up).
func writeExport(w http.ResponseWriter, r *http.Request, job string, n, digits int, hold <-chan struct{}) {
	fmt.Fprintf(w, `{"metric":{"__name__":"peakline_cpu_percent","job_id":%q,"counter":"3","task":"t"},"values":[`, job)
	buf := make([]byte, 0, 64<<10)
	for i := range n {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendFloat(buf, 100+float64(i%1000)/8, 'f', digits, 64)
		if len(buf) > 60<<10 {
			w.Write(buf)
			buf = buf[:0]
		}
	}
	w.Write(buf)
	if hold != nil {
		w.(http.Flusher).Flush()
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		return
	}
	buf = append(buf[:0], `],"timestamps":[`...)
	for i := range n {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, 1796009960000+int64(i)*10, 10)
		if len(buf) > 60<<10 {
			w.Write(buf)
			buf = buf[:0]
		}
	}
	w.Write(append(buf, "]}\n"...))
}

// A misbehaving engine is the engine's fault, not the client's: an
// answer past the limit or cut short, or a 5xx, is a 502 naming the
// engine and the limit; an engine that does not answer in time a 504; a
// read the memory budget cannot hold while others hold it a 503 with
// Retry-After naming the budget. None is a 400, which tells clients not
// to try again.
func TestRemoteEngineMisbehaves(t *testing.T) {
	const limit, budget = 4 << 20, 8 << 20
	hold := make(chan struct{})
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/export" {
			http.NotFound(w, r)
			return
		}
		sel := r.FormValue("match[]")
		switch {
		case strings.Contains(sel, `"huge"`): // 17 MiB, 8 MiB of columns
			writeExport(w, r, "huge", 1<<20, 12, nil)
		case strings.Contains(sel, `"held"`): // 327680 values, 2.3 MiB, held open
			writeExport(w, r, "held", 5<<16, -1, hold)
		case strings.Contains(sel, `"small"`): // 100000 samples, 2.2 MiB
			writeExport(w, r, "small", 100_000, -1, nil)
		case strings.Contains(sel, `"failing"`):
			http.Error(w, "vmselect: cannot fetch data from vmstorage", http.StatusInternalServerError)
		case strings.Contains(sel, `"slow"`):
			<-r.Context().Done()
		default:
			io.WriteString(w, "")
		}
	}))
	defer engine.Close()
	defer close(hold)
	reg := prometheus.NewRegistry()
	srv, err := server.Open(server.Setup{
		Remote: tsdb.Remote{WriteURL: engine.URL + "/api/v1/write", QueryURL: engine.URL, Timeout: 2 * time.Second,
			MaxAnswerBytes: limit, MemoryBudget: budget},
		Config: server.Config{SettingsPath: filepath.Join(t.TempDir(), "settings.json")},
	}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	f := func(path string, wantCode int, wantRetryAfter, wantBody string) {
		t.Helper()
		code, retryAfter, body := get(t, hs, path, engine.URL)
		if code != wantCode || retryAfter != wantRetryAfter || body != wantBody {
			t.Fatalf("GET %s: %d Retry-After %q\n%s\nwant %d %q\n%s", path, code, retryAfter, body, wantCode, wantRetryAfter, wantBody)
		}
	}
	f("/api/v1/jobs/huge/graph", http.StatusBadGateway, "",
		`{"error":"read job \"huge\": export {job_id=\"huge\"}: engine answer too large: ENGINE/api/v1/export: more than 4 MiB, the most one answer may take; read a shorter time range"}`+"\n")
	f("/prometheus/api/v1/query?query=peakline_cpu_percent%7Bjob_id%3D%22huge%22%7D&time=1796009970", http.StatusBadGateway, "",
		`{"status":"error","errorType":"internal","error":"expanding series: export {job_id=\"huge\",__name__=\"peakline_cpu_percent\"}: engine answer too large: ENGINE/api/v1/export: more than 4 MiB, the most one answer may take; read a shorter time range"}`+"\n")
	f("/api/v1/jobs/failing/graph", http.StatusBadGateway, "",
		`{"error":"read job \"failing\": export {job_id=\"failing\"}: engine failed: export: HTTP 500: vmselect: cannot fetch data from vmstorage"}`+"\n")
	f("/api/v1/jobs/slow/graph", http.StatusGatewayTimeout, "",
		`{"error":"read job \"slow\": engine timed out: ENGINE/api/v1/export: no answer within 2s"}`+"\n")

	// One read holds most of the budget: another that needs more than
	// is left is refused for the budget, and passes once it is free.
	held := make(chan string)
	go func() {
		code, _, body := get(t, hs, "/api/v1/jobs/held/graph", engine.URL)
		held <- fmt.Sprint(code, " ", body)
	}()
	for start := time.Now(); gauge(t, reg, "peakline_remote_memory_reserved_bytes") < 4<<20; time.Sleep(time.Millisecond) {
		// Until the held read has decoded its 327680 values.
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the held read reserved %v bytes after 10s, want 4 MiB", gauge(t, reg, "peakline_remote_memory_reserved_bytes"))
		}
	}
	code, retryAfter, body := get(t, hs, "/api/v1/jobs/small/graph", engine.URL)
	if code != http.StatusServiceUnavailable || retryAfter == "" || !strings.Contains(body, "remote memory budget exhausted") || !strings.Contains(body, "more of the remote memory budget of 8 MiB, of which reads hold") {
		t.Fatalf("GET small while held: %d Retry-After %q %s, want 503 with Retry-After naming the budget of 8 MiB", code, retryAfter, body)
	}
	hold <- struct{}{}
	if got, want := <-held, `502 {"error":"read job \"held\": export {job_id=\"held\"}: engine failed: ENGINE/api/v1/export: malformed answer: answer ends within a value"}`+"\n"; got != want {
		t.Fatalf("GET held, cut short: %s, want %s", got, want)
	}
	if code, _, body := get(t, hs, "/api/v1/jobs/small/graph", engine.URL); code != http.StatusOK || !strings.Contains(body, `"raw_samples":100000`) {
		t.Fatalf("GET small once free: %d %.300s, want 200 with 100000 raw samples", code, body)
	}
	if got := gauge(t, reg, "peakline_remote_memory_reserved_bytes"); got != 0 {
		t.Fatalf("%v bytes of the budget held after every read, want 0", got)
	}
}

// gauge reads a gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
