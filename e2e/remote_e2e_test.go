package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peakline/peakline/tsdb/remote/remotetest"
)

// Stateless replicas over a remote engine: the tests below start a real
// engine (VictoriaMetrics single-node, Prometheus) from ./bin (make
// tools), two `peakline serve --remote-write-url --remote-query-url`
// processes over it, write through one and read through the other.

// engine is a running Prometheus-compatible engine.
type engine struct {
	name               string
	writeURL, queryURL string
	// flush makes what was written visible to reads.
	flush func(t *testing.T)
	// relTol is the relative difference allowed between a float the
	// engine gives back and the one written: VictoriaMetrics keeps about
	// 12 significant digits (its decimal encoding), Prometheus all.
	relTol float64
	// noDelete: the engine has no series delete API (Mimir, Thanos), so a
	// delete through a replica is refused with 501.
	noDelete bool
}

// engineBin returns the module root's bin/NAME, where make tools puts it
// (see remotetest.Bin).
func engineBin(t *testing.T, name string) string {
	t.Helper()
	return remotetest.Bin(t, filepath.Join("..", "bin", name))
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string { t.Helper(); return remotetest.FreeAddr(t) }

// startProcess starts an engine and waits until GET readyURL answers 200.
func startProcess(t *testing.T, bin string, args []string, readyURL string) {
	t.Helper()
	remotetest.Start(t, bin, args, readyURL)
}

// startVictoriaMetrics starts a single-node VictoriaMetrics. Its rollup
// cache is off: the test data is older than -search.cacheTimestampOffset,
// so a cached answer from before a write could hide it (an operator
// backfilling old jobs does the same or resets the cache).
func startVictoriaMetrics(t *testing.T) *engine {
	bin := engineBin(t, "victoria-metrics")
	addr := freeAddr(t)
	base := "http://" + addr
	startProcess(t, bin, []string{"-storageDataPath=" + t.TempDir(), "-retentionPeriod=100y", "-httpListenAddr=" + addr,
		"-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=ERROR"}, base+"/health")
	return &engine{name: "victoriametrics", writeURL: base + "/api/v1/write", queryURL: base, relTol: 1e-11,
		flush: func(t *testing.T) {
			t.Helper()
			resp, err := http.Get(base + "/internal/force_flush")
			must(t, err)
			resp.Body.Close()
		}}
}

// startPrometheus starts Prometheus as a remote write receiver with an
// out-of-order window (old jobs are backfilled) and the admin API (for
// deletes). --query.max-samples is small so that reading a job needs
// the split into windows.
func startPrometheus(t *testing.T) *engine {
	bin := engineBin(t, "prometheus")
	addr := freeAddr(t)
	base := "http://" + addr
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	must(t, os.WriteFile(cfg, []byte("storage:\n  tsdb:\n    out_of_order_time_window: 100y\n"), 0o644))
	startProcess(t, bin, []string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--web.enable-remote-write-receiver", "--web.enable-admin-api",
		"--query.max-samples=60", "--log.level=error"}, base+"/-/ready")
	return &engine{name: "prometheus", writeURL: base + "/api/v1/write", queryURL: base, flush: func(*testing.T) {}}
}

// replica starts one stateless serve over e.
func replica(t *testing.T, e *engine, settings string, extra ...string) *served {
	t.Helper()
	return serve(t, append([]string{"--remote-write-url", e.writeURL, "--remote-query-url", e.queryURL,
		"--settings", settings, "--events-url", eventsTemplate}, extra...)...)
}

// promQueries are Prometheus API requests whose answers through a
// remote replica must equal the embedded store's.
var promQueries = []string{
	"/prometheus/api/v1/query?query=" + url.QueryEscape(`max by (task) (peakline_memory_bytes{job_id="demo2"})`) + "&time=2026-11-30T03:39:40Z",
	"/prometheus/api/v1/query_range?query=" + url.QueryEscape(`sum by (job_id) (peakline_cpu_percent)`) + "&start=2026-11-30T03:39:30Z&end=2026-11-30T04:22:30Z&step=15s",
	"/prometheus/api/v1/query?query=" + url.QueryEscape(`count by (counter) (peakline_task_start{job_id="loops"})`) + "&time=2026-11-30T04:22:30Z",
	"/prometheus/api/v1/label/job_id/values",
	"/prometheus/api/v1/series?match[]=" + url.QueryEscape(`peakline_task_start{job_id="demo2"}`),
}

// TestRemoteReplicas: the real test trees imported through replica A
// read back through replica B give the embedded store's golden payloads
// (graph, tasks, jobs list) and its Prometheus API answers.
func TestRemoteReplicas(t *testing.T) {
	trees := []string{"../testdata/ansible/runner-basic", "../testdata/ansible/recap-csv", "../testdata/ansible/runner-loops"}
	data := t.TempDir()
	if out, err := run(t, append([]string{"import", "--data", data}, trees...)...); err != nil {
		t.Fatalf("import --data: %v\n%s", err, out)
	}
	embedded := serve(t, "--data", data, "--events-url", eventsTemplate)
	for _, start := range remoteEngines(t) {
		e := start(t)
		t.Run(e.name, func(t *testing.T) {
			settings := filepath.Join(t.TempDir(), "settings.json")
			a, b := replica(t, e, settings, "--remote-cache-ttl", "200ms"), replica(t, e, settings, "--remote-cache-ttl", "200ms")
			if out, err := run(t, append([]string{"import", "--server", a.URL}, trees...)...); err != nil {
				t.Fatalf("import --server A: %v\n%s", err, out)
			}
			e.flush(t)
			for _, job := range []string{"demo2", "ansible-perf-2026-11-30T03:39:20.072139", "loops"} {
				for _, q := range []string{"graph?points=1000", "graph?points=10", "graph?points=4&algorithm=lttb", "tasks"} {
					code, body := b.get(t, "/api/v1/jobs/"+url.PathEscape(job)+"/"+q)
					if code != 200 {
						t.Fatalf("B: %s %s: %d %s", job, q, code, body)
					}
					name := strings.NewReplacer("?", "_", "=", "-", "&", "_", ":", "-").Replace(job + "_" + q)
					want, err := os.ReadFile(filepath.Join("../testdata", "golden", name+".json"))
					must(t, err)
					sameJSON(t, "B: "+job+" "+q, want, body, e.relTol)
				}
			}
			code, body := b.get(t, "/api/v1/jobs")
			want, err := os.ReadFile(filepath.Join("../testdata", "golden", "jobs.json"))
			must(t, err)
			if code != 200 {
				t.Fatalf("B: jobs: %d %s", code, body)
			}
			sameJSON(t, "B: jobs", want, body, e.relTol)
			for _, q := range promQueries {
				_, wantBody := embedded.get(t, q)
				code, body := b.get(t, q)
				if code != 200 {
					t.Fatalf("B: %s: %d %s", q, code, body)
				}
				sameJSON(t, "B: "+q, wantBody, body, e.relTol)
			}

			// The collection policy set through A is what B answers.
			put(t, a.URL+"/api/v1/templates/17", `{"collection":"off"}`)
			if _, body := b.get(t, "/api/v1/templates/17"); !strings.Contains(string(body), `"collection":"off"`) {
				t.Errorf("B: template 17 after A turned it off: %s", body)
			}

			// A delete through A is seen by B once its cache entry of the
			// job is older than --remote-cache-ttl.
			req, _ := http.NewRequest(http.MethodDelete, a.URL+"/api/v1/jobs/loops", nil)
			req.Header.Set("X-Requested-With", "peakline")
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if e.noDelete {
				if resp.StatusCode != http.StatusNotImplemented {
					t.Fatalf("A: delete loops on %s, which cannot delete series: %d %s, want 501", e.name, resp.StatusCode, msg)
				}
				return
			}
			if resp.StatusCode != 200 {
				t.Fatalf("A: delete loops: %d %s", resp.StatusCode, msg)
			}
			e.flush(t)
			for deadline := time.Now().Add(5 * time.Second); ; {
				code, body := b.get(t, "/api/v1/jobs/loops/tasks")
				if code == 404 {
					break
				}
				if code != 200 || time.Now().After(deadline) {
					t.Fatalf("B: tasks of deleted job: %d %s, want 404 within --remote-cache-ttl", code, body)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

func put(t *testing.T, u, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Requested-With", "peakline")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("PUT %s: %d %s", u, resp.StatusCode, msg)
	}
}

// sameJSON compares two JSON documents: equal structure and strings,
// numbers equal within relTol of the larger.
func sameJSON(t *testing.T, what string, want, got []byte, relTol float64) {
	t.Helper()
	var w, g any
	dw := json.NewDecoder(bytes.NewReader(want))
	dw.UseNumber()
	dg := json.NewDecoder(bytes.NewReader(got))
	dg.UseNumber()
	if err := dw.Decode(&w); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	if err := dg.Decode(&g); err != nil {
		t.Fatalf("%s: got: %v\n%s", what, err, got)
	}
	sortResult(w)
	sortResult(g)
	if path, diff := jsonDiff("", w, g, relTol); diff != "" {
		t.Errorf("%s differs at %s: %s", what, path, diff)
	}
}

// sortResult puts the series of a Prometheus API answer in label order:
// the API does not fix the order of an instant vector.
func sortResult(doc any) {
	m, _ := doc.(map[string]any)
	data, _ := m["data"].(map[string]any)
	result, _ := data["result"].([]any)
	key := func(v any) string { b, _ := json.Marshal(v.(map[string]any)["metric"]); return string(b) }
	slices.SortStableFunc(result, func(a, b any) int { return strings.Compare(key(a), key(b)) })
}

func jsonDiff(path string, w, g any, relTol float64) (string, string) {
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok || len(gv) != len(wv) {
			return path, fmt.Sprintf("want %v, got %v", w, g)
		}
		for k := range wv {
			if p, d := jsonDiff(path+"."+k, wv[k], gv[k], relTol); d != "" {
				return p, d
			}
		}
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			return path, fmt.Sprintf("want %d elements %v, got %v", len(wv), w, g)
		}
		for i := range wv {
			if p, d := jsonDiff(path+"["+strconv.Itoa(i)+"]", wv[i], gv[i], relTol); d != "" {
				return p, d
			}
		}
	case json.Number:
		gv, ok := g.(json.Number)
		if !ok {
			return path, fmt.Sprintf("want %v, got %v", w, g)
		}
		if wv == gv {
			return "", ""
		}
		a, err1 := wv.Float64()
		b, err2 := gv.Float64()
		if err1 != nil || err2 != nil || relTol == 0 || abs(a-b) > relTol*max(abs(a), abs(b)) {
			return path, fmt.Sprintf("want %v, got %v", wv, gv)
		}
	case string:
		// Prometheus API values are strings of numbers.
		gv, ok := g.(string)
		if !ok {
			return path, fmt.Sprintf("want %q, got %v", wv, g)
		}
		if wv != gv {
			a, err1 := strconv.ParseFloat(wv, 64)
			b, err2 := strconv.ParseFloat(gv, 64)
			if err1 != nil || err2 != nil || relTol == 0 || abs(a-b) > relTol*max(abs(a), abs(b)) {
				return path, fmt.Sprintf("want %q, got %q", wv, gv)
			}
		}
	default:
		if w != g {
			return path, fmt.Sprintf("want %v, got %v", w, g)
		}
	}
	return "", ""
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// failover is the address replicas sit behind: it forwards to the first
// live replica and, once a request to it fails, to the next, answering
// that failed request 502 (as a load balancer does while its health
// check catches up).
type failover struct {
	targets []*url.URL
	cur     atomic.Int32
	srv     *http.Server
	URL     string
}

func newFailover(t *testing.T, targets ...string) *failover {
	t.Helper()
	f := &failover{}
	for _, s := range targets {
		u, err := url.Parse(s)
		must(t, err)
		f.targets = append(f.targets, u)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(f.targets[min(int(f.cur.Load()), len(f.targets)-1)])
			r.Out.Host = r.In.Host
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(r.Context().Err(), err) {
				return
			}
			f.cur.Add(1)
			http.Error(w, "upstream: "+err.Error(), http.StatusBadGateway)
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	f.srv = &http.Server{Handler: proxy}
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(func() { _ = f.srv.Close() })
	f.URL = "http://" + ln.Addr().String()
	return f
}

// TestRemoteReplicaKilled: a collector ships a live job through the
// replicas' address; replica A is killed (SIGKILL) in the middle; the
// collector's retries land through B, and the engine holds every sample
// the collector took, once.
func TestRemoteReplicaKilled(t *testing.T) {
	needCgroups(t)
	for _, start := range remoteEngines(t) {
		e := start(t)
		t.Run(e.name, func(t *testing.T) {
			settings := filepath.Join(t.TempDir(), "settings.json")
			a, b := replica(t, e, settings), replica(t, e, settings)
			lb := newFailover(t, a.URL, b.URL)
			cmd := exec.Command(peaklineBin(t), "collect", "--server", lb.URL, "--job", "killed-"+e.name, "--poll-interval", "50ms",
				"--spool-dir", t.TempDir(), "--", "sh", "-c", "sleep 4; exit 7")
			outFile, err := os.CreateTemp(t.TempDir(), "collect")
			must(t, err)
			cmd.Stdout, cmd.Stderr = outFile, outFile
			must(t, cmd.Start())
			time.Sleep(1500 * time.Millisecond)
			must(t, a.cmd.Process.Kill())
			_ = a.cmd.Wait()
			err = cmd.Wait()
			out, _ := os.ReadFile(outFile.Name())
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
				t.Fatalf("collect exit: %v, want the command's code 7\n%s", err, out)
			}
			m := samplesRE.FindSubmatch(out)
			if m == nil {
				t.Fatalf("collect did not report its samples:\n%s", out)
			}
			taken, _ := strconv.Atoi(string(m[1]))
			if lb.cur.Load() == 0 {
				t.Fatalf("no request failed over to B; was A killed mid-job?\n%s", out)
			}
			e.flush(t)
			stored := b.rawSamples(t, "killed-"+e.name)
			t.Logf("collector took %d samples, A killed after 1.5s; B reads %d from %s", taken, stored, e.name)
			if stored != taken || taken < 3*40 {
				t.Fatalf("collector took %d samples, B reads %d (want equal, and >= 120 at 50ms over 4s)\n%s", taken, stored, out)
			}
		})
	}
}
