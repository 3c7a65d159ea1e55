package ship

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The helper process of TestSpoolSurvivesKill is this test binary run
// again with these variables set.
const (
	killHelperEnv = "PEAKLINE_SPOOL_KILL_HELPER" // spool dir
	killServerEnv = "PEAKLINE_SPOOL_KILL_SERVER" // ingest base URL
	killFirstEnv  = "PEAKLINE_SPOOL_KILL_FIRST"  // first batch number to make
	killCountEnv  = "PEAKLINE_SPOOL_KILL_COUNT"  // batches to make; 0 drains the spool and exits
)

// killBatchSamples is the number of samples of each resource in a batch
// of the kill test.
const killBatchSamples = 25

// killBatch is batch number k of the kill test: the same bytes whichever
// process makes it, with values that tell its samples apart.
func killBatch(k int) *Batch {
	b := &Batch{JobID: "kill"}
	for r, resource := range []string{"cpu", "memory"} {
		s := Series{Resource: resource}
		for i := range killBatchSamples {
			s.Ts = append(s.Ts, 1_790_000_000_000+int64(k*killBatchSamples+i)*10)
			s.Vs = append(s.Vs, killValue(k, r, i))
		}
		b.Series = append(b.Series, s)
	}
	return b
}

func killValue(k, resource, i int) float64 { return float64(k*1000+resource*100+i) + 0.5 }

// killHelper is the collector side of TestSpoolSurvivesKill. With a count,
// it resends the spool and spools batches first..first+count-1 (a queue of
// 0 samples sends every batch through the spool), printing "acked K" once
// enqueue has returned for batch K (after "ready" once the spool is
// loaded), then keeps shipping until it is
// killed. With a count of 0 it sends what is spooled, prints "unsent N"
// and exits.
func killHelper() {
	dir, url := os.Getenv(killHelperEnv), os.Getenv(killServerEnv)
	first, err1 := strconv.Atoi(os.Getenv(killFirstEnv))
	count, err2 := strconv.Atoi(os.Getenv(killCountEnv))
	sp, err := OpenSpool(dir, time.Now)
	if err1 != nil || err2 != nil || err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err1, err2, err)
		os.Exit(3)
	}
	s := newShipper(url, &http.Client{Timeout: 5 * time.Second}, sp, 0,
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s.minBackoff, s.maxBackoff = time.Millisecond, 5*time.Millisecond
	s.LoadSpool()
	ctx, cancel := context.WithCancel(context.Background())
	go s.Run(ctx)
	if count == 0 {
		s.Finish(cancel, 30*time.Second)
		fmt.Printf("unsent %d\n", len(s.queue)) // batches; the samples of an earlier run's are not known
		os.Exit(0)
	}
	fmt.Println("ready")
	var enc Encoder
	for k := first; k < first+count; k++ {
		body, err := enc.Encode(killBatch(k))
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(3)
		}
		s.Enqueue(body, 2*killBatchSamples)
		s.mu.Lock()
		failed := s.spoolErr
		s.mu.Unlock()
		if failed {
			os.Exit(4) // kept in memory: not acknowledged
		}
		fmt.Printf("acked %d\n", k) // os.Stdout is unbuffered
	}
	select {}
}

// dedupIngest is an ingest endpoint that stores samples the way the store
// does: a sample whose series and time it already holds is a no-op when
// the value is the same, and a 400 when it differs. While faulty it
// answers some POSTs 503 before storing and drops the connection of others
// after storing (the answer is lost, so the batch is sent again).
type dedupIngest struct {
	t *testing.T

	mu                                   sync.Mutex
	rng                                  *rand.Rand
	faulty                               bool
	samples                              map[dedupKey]float64
	posts, resent, refused, dropped, bad int
}

type dedupKey struct {
	job, resource string
	counter, t    int64
}

func (d *dedupIngest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var b ingestBody
	zr, err := gzip.NewReader(r.Body)
	if err == nil {
		err = json.NewDecoder(zr).Decode(&b)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.posts++
	if err != nil {
		d.bad++
		d.t.Errorf("server: a batch that does not decode (half a batch?): %v", err)
		http.Error(w, `{"error": "cannot decode"}`, http.StatusBadRequest)
		return
	}
	fault := 2 // stored and answered
	if d.faulty {
		fault = d.rng.IntN(6)
	}
	if fault == 0 {
		d.refused++
		http.Error(w, `{"error": "try later"}`, http.StatusServiceUnavailable)
		return
	}
	fresh := 0
	for _, s := range b.Series {
		for i, ts := range s.T {
			k := dedupKey{b.JobID, s.Resource, s.Counter, ts}
			old, ok := d.samples[k]
			switch {
			case !ok:
				d.samples[k] = s.V[i]
				fresh++
			case old != s.V[i]:
				d.bad++
				d.t.Errorf("server: sample %+v sent as %v and as %v", k, old, s.V[i])
				http.Error(w, `{"error": "duplicate sample for timestamp"}`, http.StatusBadRequest)
				return
			}
		}
	}
	if fresh == 0 {
		d.resent++
	}
	if fault == 1 {
		d.dropped++
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
		return
	}
	_, _ = io.WriteString(w, `{}`)
}

// raceBuild tells whether this test binary was built with -race.
func raceBuild() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}

// killPoint is when TestSpoolSurvivesKill kills a child: delay after it
// printed "ready" and acks acknowledgements, or with acks -1 delay after
// its start.
type killPoint struct {
	acks  int
	delay time.Duration
}

// TestSpoolSurvivesKill runs the shipper in a child process (this test
// binary again) that spools and ships numbered batches to a real HTTP
// server, and kills it with SIGKILL at random points, over and over; each
// new child resends the spool and goes on from the first batch the last
// one did not acknowledge, as a producer that was not told "spooled"
// would. The server stores a sample once, answers some POSTs 503 and
// loses the answer to others. At the end a last child drains the spool
// against a healthy server. Every acknowledged batch must be stored, each
// sample once with its own value; every spool file seen between kills
// must be a whole batch; and the spool must end empty, with no temporary
// or rejected file.
//
// SIGKILL tests a crash of the process, whose writes the kernel still
// holds; the fsyncs that make a spooled batch survive a power cut are not
// exercised here (that needs a block device that drops unsynced writes).
func TestSpoolSurvivesKill(t *testing.T) {
	if os.Getenv(killHelperEnv) != "" {
		killHelper()
		return
	}
	srv := &dedupIngest{t: t, rng: rand.New(rand.NewPCG(7, 11)), faulty: true, samples: map[dedupKey]float64{}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	dir := t.TempDir()
	kills := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))

	// child runs one helper and returns the lines it printed, but
	// "ready". With a kill point it kills the child there, else it waits
	// for it to exit.
	child := func(first, count int, kill *killPoint) []string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolSurvivesKill$")
		cmd.Env = append(os.Environ(), killHelperEnv+"="+dir, killServerEnv+"="+ts.URL,
			killFirstEnv+"="+strconv.Itoa(first), killCountEnv+"="+strconv.Itoa(count))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1<<12)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var out []string
		if kill != nil {
			if kill.acks >= 0 {
				for range kill.acks + 1 { // "ready", then the acks
					l, ok := <-lines
					if !ok {
						break
					}
					out = append(out, l)
				}
			}
			// The point is a kill at an arbitrary moment of the child's
			// work, so this wait is real time on purpose.
			time.Sleep(kill.delay)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		for l := range lines {
			out = append(out, l)
		}
		err = cmd.Wait()
		if kill == nil && err != nil {
			t.Fatalf("draining child: %v\n%s", err, stderr.String())
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); kill != nil && !(ok && ws.Signaled()) {
			t.Fatalf("child ended before the kill: %v\n%s", err, stderr.String())
		}
		return slices.DeleteFunc(out, func(l string) bool { return l == "ready" })
	}

	next, rounds := 0, 12
	if raceBuild() {
		rounds = 6 // a race-instrumented child spools several times slower
	}
	awaited := 0 // acknowledgements the kills waited for
	for range rounds {
		// Spooling a batch costs two fsyncs, tens of milliseconds on a
		// busy disk, so most kills wait for a few acknowledgements; a
		// quarter land while the child starts and resends the spool.
		kill := &killPoint{acks: -1, delay: time.Duration(kills.IntN(50)) * time.Millisecond}
		if kills.IntN(4) != 0 {
			kill = &killPoint{acks: 1 + kills.IntN(2), delay: time.Duration(kills.IntN(30)) * time.Millisecond}
			awaited += kill.acks
		}
		for _, line := range child(next, 1000, kill) {
			k, err := strconv.Atoi(strings.TrimPrefix(line, "acked "))
			if err != nil || k != next {
				t.Fatalf("child printed %q, want \"acked %d\"", line, next)
			}
			next++
		}
		// Whatever the kill interrupted, a spool name holds a whole batch.
		files, _ := filepath.Glob(filepath.Join(dir, "*"+spoolExt))
		for _, f := range files {
			body, err := os.ReadFile(f)
			var b ingestBody
			if err == nil {
				var zr *gzip.Reader
				if zr, err = gzip.NewReader(bytes.NewReader(body)); err == nil {
					err = json.NewDecoder(zr).Decode(&b)
				}
			}
			if err == nil && (len(b.Series) != 2 || len(b.Series[0].T) != killBatchSamples) {
				err = fmt.Errorf("%d series", len(b.Series))
			}
			if err != nil {
				t.Fatalf("spool file %s after a kill is not a whole batch: %v", filepath.Base(f), err)
			}
		}
	}
	srv.mu.Lock()
	srv.faulty = false
	srv.mu.Unlock()
	if out := child(0, 0, nil); len(out) != 1 || out[0] != "unsent 0" {
		t.Fatalf("draining child printed %q, want \"unsent 0\"", out)
	}

	srv.mu.Lock()
	defer srv.mu.Unlock()
	t.Logf("%d kills, %d batches acknowledged; server: %d posts, %d answered 503, %d answers lost, %d batches stored already (resent), %d distinct samples",
		rounds, next, srv.posts, srv.refused, srv.dropped, srv.resent, len(srv.samples))
	if next < awaited {
		t.Fatalf("%d batches acknowledged, but the kills waited for %d", next, awaited)
	}
	for k := range next {
		for r, resource := range []string{"cpu", "memory"} {
			for i := range killBatchSamples {
				key := dedupKey{"kill", resource, 0, 1_790_000_000_000 + int64(k*killBatchSamples+i)*10}
				if v, ok := srv.samples[key]; !ok || v != killValue(k, r, i) {
					t.Fatalf("acknowledged batch %d: %s sample %d is %v (stored: %v), want %v", k, resource, i, v, ok, killValue(k, r, i))
				}
			}
		}
	}
	// The server holds nothing but whole batches, at most one of them
	// unacknowledged (spooled, then killed before it could say so).
	if n := len(srv.samples); n != next*2*killBatchSamples && n != (next+1)*2*killBatchSamples {
		t.Errorf("server holds %d samples, want %d acknowledged (+%d for one spooled but unacknowledged batch)", n, next*2*killBatchSamples, 2*killBatchSamples)
	}
	// A batch whose answer was lost stays spooled until a 2xx, so each
	// lost answer is followed by a resend of a batch already stored.
	if srv.bad != 0 || srv.resent < srv.dropped {
		t.Errorf("%d bad batches (want 0), %d resent batches (want at least the %d whose answer was lost)", srv.bad, srv.resent, srv.dropped)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		names := make([]string, len(left))
		for i, e := range left {
			names[i] = e.Name()
		}
		t.Errorf("spool not empty after draining: %v", names)
	}
}
