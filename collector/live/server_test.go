package live

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"github.com/peakline/peakline/collector/ship/shiptest"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// gotSample is one sample as the test server stored it.
type gotSample struct {
	resource string
	t        int64
	v        float64
	counter  int64
	task     string
	job      string
}

// ingestBody is the server's view of a batch.
type ingestBody = shiptest.Batch

// ingestServer is a Peakline server stand-in: policy endpoints and ingest.
// It can answer 503 or refuse connections (down) to test the spool.
type ingestServer struct {
	t *testing.T

	mu       sync.Mutex
	state    string // "up", "503", "down"
	settings string // /api/v1/settings collection; "" answers 404
	template map[string]string
	samples  []gotSample
	tasks    map[int64]string // counter → name
	last     int64            // newest last_event counter
	infos    []string         // template_id/template_name/status/measured of the batches carrying any
	playbook string           // the newest playbook a batch named
	posts    map[string]int   // answers given, by state
	srv      *http.Server
	ln       net.Listener
	addr     string
}

func newIngestServer(t *testing.T) *ingestServer {
	s := &ingestServer{t: t, state: "up", settings: "all", template: map[string]string{},
		tasks: map[int64]string{}, posts: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	s.serve(ln)
	t.Cleanup(func() { s.setState("down") })
	return s
}

func (s *ingestServer) url() string { return "http://" + s.addr }

func (s *ingestServer) serve(ln net.Listener) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/settings", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.settings == "" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"collection": s.settings})
	})
	mux.HandleFunc("GET /api/v1/templates/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		c := s.template[r.PathValue("id")]
		if c == "" {
			c = "default"
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"id": r.PathValue("id"), "collection": c})
	})
	mux.HandleFunc("POST /api/v1/ingest", s.ingest)
	s.srv = &http.Server{Handler: mux, ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)}
	s.ln = ln
	go func() { _ = s.srv.Serve(ln) }()
}

func (s *ingestServer) ingest(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.posts[s.state]++
	if s.state != "up" {
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	var b ingestBody
	if err := dec.Decode(&b); err != nil {
		s.t.Errorf("server: cannot decode batch: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if b.JobID == "" {
		s.t.Errorf("server: batch without job_id")
	}
	n := 0
	for _, sr := range b.Series {
		if len(sr.T) != len(sr.V) {
			s.t.Errorf("server: series %s counter %d: %d times, %d values", sr.Resource, sr.Counter, len(sr.T), len(sr.V))
		}
		for i := range sr.T {
			if i > 0 && sr.T[i] <= sr.T[i-1] {
				s.t.Errorf("server: series %s times not increasing: %v", sr.Resource, sr.T)
			}
			s.samples = append(s.samples, gotSample{resource: sr.Resource, t: sr.T[i], v: sr.V[i], counter: sr.Counter, task: sr.Task, job: b.JobID})
			n++
		}
	}
	for _, tk := range b.Tasks {
		s.tasks[tk.Counter] = tk.Name
	}
	if b.LastEvent != nil {
		s.last = max(s.last, b.LastEvent.Counter)
	}
	if b.Playbook != "" {
		s.playbook = b.Playbook
	}
	if b.TemplateID != "" || b.TemplateName != "" || b.Status != "" || b.Measured != "" {
		s.infos = append(s.infos, b.TemplateID+"/"+b.TemplateName+"/"+b.Status+"/"+b.Measured)
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"job_id": b.JobID, "samples": n, "tasks": len(b.Tasks)})
}

// setState switches to "up", "503" or "down" (connections refused).
func (s *ingestServer) setState(state string) {
	s.mu.Lock()
	old := s.state
	s.state = state
	s.mu.Unlock()
	switch {
	case state == "down" && old != "down":
		_ = s.srv.Close()
	case state != "down" && old == "down":
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			s.t.Fatalf("cannot listen again on %s: %v", s.addr, err)
		}
		s.serve(ln)
	}
}

func (s *ingestServer) got() []gotSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]gotSample(nil), s.samples...)
}

func (s *ingestServer) answered(state string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts[state]
}

// scaled stretches a test's deadline d by PEAKLINE_TEST_TIME_SCALE (a
// number of at least 1; 1 when unset): under emulation (make test-v2 boots
// a cgroup v2 kernel in qemu without KVM) the same work takes 2 to 20 times
// as long as on the host. A bad value panics: every test would be wrong.
func scaled(d time.Duration) time.Duration {
	s := os.Getenv("PEAKLINE_TEST_TIME_SCALE")
	if s == "" {
		return d
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 1 {
		panic(fmt.Sprintf("PEAKLINE_TEST_TIME_SCALE=%q: want a number of at least 1", s))
	}
	return time.Duration(float64(d) * f)
}

// waitFor polls cond until it holds, failing after 30s (scaled).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(scaled(30 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testTuning is production tuning with short waits (the deadlines among
// them scaled).
func testTuning() liveTuning {
	tune := defaultLiveTuning()
	tune.settle = 500 * time.Millisecond
	tune.flushEvery = 50 * time.Millisecond
	tune.flushTimeout = scaled(5 * time.Second)
	tune.eventsEvery = 20 * time.Millisecond
	tune.minBackoff = 5 * time.Millisecond
	tune.maxBackoff = 40 * time.Millisecond
	tune.identWait = scaled(5 * time.Second)
	tune.client = &http.Client{Timeout: scaled(5 * time.Second)}
	return tune
}
