package remote

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
)

// endlessBytes is how long the fake engine's answer would be: 2 GiB,
// never sent whole (the reader stops at its limit).
const endlessBytes = 2 << 30

// endlessEngine is a fake engine on loopback whose every read answers
// with 2 GiB of valid-looking JSON, generated as it is written: one
// series whose samples go on and on, in the export format (VictoriaMetrics)
// or, when export is false, as a matrix of the query API (export answers
// 404 then). written counts the bytes the engine got to write.
func endlessEngine(t testing.TB, export bool) (srv *httptest.Server, written *atomic.Int64) {
	t.Helper()
	written = new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/export" && !export {
			http.NotFound(w, r)
			return
		}
		head, sep := `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"peakline_cpu_percent","job_id":"42","counter":"3"},"values":[`, ","
		sample := func(dst []byte, i int64) []byte {
			dst = append(dst, '[')
			dst = strconv.AppendInt(dst, 1796009960+i/1000, 10)
			dst = append(dst, '.')
			dst = strconv.AppendInt(dst, 100+i%900, 10)
			dst = append(dst, `,"104.88"]`...)
			return dst
		}
		if export {
			// One export line whose values never end: it has no
			// timestamps before the limit, as a line is values first.
			head = `{"metric":{"__name__":"peakline_cpu_percent","job_id":"42","counter":"3"},"values":[`
			sample = func(dst []byte, i int64) []byte { return strconv.AppendFloat(dst, 100+float64(i%1000)/8, 'f', -1, 64) }
		}
		buf := make([]byte, 0, 32<<10)
		buf = append(buf, head...)
		for i, n := int64(0), int64(0); n < endlessBytes; {
			for len(buf) < 31<<10 {
				if i > 0 {
					buf = append(buf, sep...)
				}
				buf = sample(buf, i)
				i++
			}
			m, err := w.Write(buf)
			n += int64(m)
			written.Add(int64(m))
			if err != nil {
				return // the reader hung up
			}
			buf = buf[:0]
		}
	}))
	t.Cleanup(srv.Close)
	return srv, written
}

func endlessClient(t testing.TB, srv *httptest.Server, maxBytes, budget int64) *Client {
	t.Helper()
	c, err := New(Config{WriteURL: srv.URL + "/api/v1/write", QueryURL: srv.URL, MaxResponseBytes: maxBytes, MemoryBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// selectJob reads job 42 through a querier of c, closed after.
func selectJob(c *Client) error {
	q, _ := c.Querier(0, 10_000)
	defer q.Close()
	set := q.Select(context.Background(), false, nil, labels.MustNewMatcher(labels.MatchEqual, "job_id", "42"))
	for set.Next() {
	}
	return set.Err()
}

// TestAnswerOverLimit: an answer longer than the limit is ErrTooLarge
// (never ErrRejected: the engine refused nothing) naming the engine and
// the limit, and the read stops as soon as the limit is passed: the
// engine gets to write at most the limit and what the sockets buffer.
func TestAnswerOverLimit(t *testing.T) {
	const limit = 64 << 20
	for _, export := range []bool{true, false} {
		t.Run(fmt.Sprintf("export=%v", export), func(t *testing.T) {
			srv, written := endlessEngine(t, export)
			c := endlessClient(t, srv, limit, 1<<30)
			err := selectJob(c)
			path := "/api/v1/query"
			if export {
				path = "/api/v1/export"
			}
			want := fmt.Sprintf("engine answer too large: %s%s: more than 64 MiB, the most one answer may take; read a shorter time range", srv.URL, path)
			if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrRejected) || !strings.HasSuffix(err.Error(), want) {
				t.Fatalf("Select = %v, want ErrTooLarge ending %q", err, want)
			}
			srv.Close() // waits for the handler, which has seen the hang-up
			// Loopback sockets buffer a few MiB at most each way.
			if n := written.Load(); n > limit+16<<20 {
				t.Fatalf("the engine wrote %d bytes, want at most %d: the read went on past the limit", n, limit+16<<20)
			}
			if got := c.budget.inUse(); got != 0 {
				t.Fatalf("after the read %d bytes of the budget are held, want 0", got)
			}
		})
	}
}

// heapSlack is what the heap may hold beyond the memory budget while
// reads decode (TestMemoryBudget), at GOGC=10: garbage up to 10% of the
// live heap (12.8 MiB at a full 128 MiB budget) plus the bytes allocated
// while a collection marks, and each reader's unreserved buffers (the
// answer's 64 KiB read buffer, a string of at most maxStringBytes and
// its copy, the transport's 4 KiB buffers: under 3 MiB each, 8 readers).
const heapSlack = 48 << 20

// TestMemoryBudget: 8 reads at once of endless answers hold no more
// heap than the budget and heapSlack, however the answer is shaped; each
// read is refused as too large (its answer passed the limit, or its
// columns alone the budget) or for the budget (the others held it),
// never as a refusal of the engine; every reservation is released.
func TestMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 8×64 MiB")
	}
	const limit, budget, readers = 64 << 20 / raceShrink, 128 << 20 / raceShrink, 8
	for _, export := range []bool{true, false} {
		t.Run(fmt.Sprintf("export=%v", export), func(t *testing.T) {
			srv, _ := endlessEngine(t, export)
			c := endlessClient(t, srv, limit, budget)
			defer debug.SetGCPercent(debug.SetGCPercent(10))
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base := ms.HeapInuse
			var peak atomic.Uint64
			stop, sampled := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(sampled)
				var ms runtime.MemStats
				for {
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
					select {
					case <-stop:
						return
					case <-time.After(2 * time.Millisecond):
					}
				}
			}()
			errs := make([]error, readers)
			var wg sync.WaitGroup
			for i := range readers {
				wg.Go(func() { errs[i] = selectJob(c) })
			}
			wg.Wait()
			close(stop)
			<-sampled
			tooLarge, busy := 0, 0
			for i, err := range errs {
				switch {
				case errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrRejected):
					tooLarge++
				case errors.Is(err, ErrBudget) && strings.Contains(err.Error(), "memory budget of "+formatBytes(budget)):
					busy++
				default:
					t.Errorf("reader %d: %v, want ErrTooLarge or ErrBudget naming the budget", i, err)
				}
			}
			grown := int64(peak.Load()) - int64(base)
			t.Logf("heap grew by %.1f MiB at most (budget %d MiB + slack %d MiB); %d too large, %d refused for the budget",
				float64(grown)/(1<<20), budget>>20, heapSlack>>20, tooLarge, busy)
			if grown > budget+heapSlack {
				t.Fatalf("heap grew by %d bytes while reading, want at most the budget %d + %d", grown, budget, heapSlack)
			}
			if got := c.budget.inUse(); got != 0 {
				t.Fatalf("after the reads %d bytes of the budget are held, want 0", got)
			}
		})
	}
}

// TestBudget: a read waits for its first share at most BudgetWait, in
// order, and gets one as soon as another read releases; its cancellation
// is its own error, not the budget's; growing never waits: past the
// whole budget it is ErrTooLarge, past what others leave ErrBudget, both
// naming the read and the budget.
func TestBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b := newBudget(1<<20, 5*time.Second, prometheus.NewCounter(prometheus.CounterOpts{Name: "refused"}))
		a, err := b.reserve(ctx, "A")
		if err != nil {
			t.Fatal(err)
		}
		if err := a.charge(900 << 10); err != nil {
			t.Fatal(err)
		}
		if got := b.inUse(); got != 1<<20 {
			t.Fatalf("A holds %d bytes, want the whole budget (grown by at least a step, at most what is left)", got)
		}
		start := time.Now()
		if _, err := b.reserve(ctx, "B"); !errors.Is(err, ErrBudget) ||
			err.Error() != "remote memory budget exhausted: B: waited 5s for the remote memory budget of 1 MiB, which other reads hold; try again later" {
			t.Fatalf("B = %v, want ErrBudget after the wait", err)
		}
		if waited := time.Since(start); waited != 5*time.Second {
			t.Fatalf("B waited %s, want 5s", waited)
		}
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := b.reserve(canceled, "C"); !errors.Is(err, context.Canceled) || errors.Is(err, ErrBudget) {
			t.Fatalf("C, canceled = %v, want context.Canceled", err)
		}
		got := make(chan *reservation)
		go func() {
			d, err := b.reserve(ctx, "D")
			if err != nil {
				t.Error(err)
			}
			got <- d
		}()
		synctest.Wait()
		a.release()
		a.release() // again: a no-op
		d := <-got
		if b.inUse() != readBase {
			t.Fatalf("after A's release and D's reservation %d bytes are held, want %d", b.inUse(), readBase)
		}
		if err := d.charge(1<<20 + 1); !errors.Is(err, ErrTooLarge) ||
			err.Error() != "engine answer too large: D: its samples and labels need more than the remote memory budget of 1 MiB; read a shorter time range" {
			t.Fatalf("D past the budget = %v, want ErrTooLarge", err)
		}
		e, err := b.reserve(ctx, "E")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.charge(800 << 10); err != nil {
			t.Fatal(err)
		}
		// E got what it needed, though not a whole step: 800 KiB.
		if err := d.charge(300 << 10); !errors.Is(err, ErrBudget) ||
			err.Error() != "remote memory budget exhausted: D: reading it needs 172 KiB more of the remote memory budget of 1 MiB, of which reads hold 928 KiB; try again later" {
			t.Fatalf("D past what E leaves = %v, want ErrBudget", err)
		}
		d.release()
		e.release()
		if b.inUse() != 0 {
			t.Fatalf("%d bytes held after every release, want 0", b.inUse())
		}
	})
}

func TestFormatBytes(t *testing.T) {
	f := func(n int64, want string) {
		t.Helper()
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
	f(0, "0 bytes")
	f(1023, "1023 bytes")
	f(1024, "1 KiB")
	f(1536, "1.5 KiB")
	f(64<<20, "64 MiB")
	f(8127950, "7.8 MiB")
	f(2<<30, "2 GiB")
	f(3<<29, "1.5 GiB")
}
