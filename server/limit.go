package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/semaphore"
)

// errBusy marks a request refused because the server already serves as
// many of its kind as it allows; the client should retry later.
var errBusy = errors.New("too many requests")

// ingestRetryAfter is the Retry-After, in seconds, of a refused ingest
// request: about the time one batch takes to decode and append.
const ingestRetryAfter = "1"

// ingestRoutes are the routes whose requests decode a body into memory.
var ingestRoutes = map[string]bool{
	"/api/v1/ingest":           true,
	"/api/v1/write":            true,
	"/prometheus/api/v1/write": true,
}

// DefaultBodyReadTimeout is Config.BodyReadTimeout when it is 0: the
// longest an ingest body may take to arrive (16 MiB at 2 MB/s).
const DefaultBodyReadTimeout = 10 * time.Second

// DefaultMaxBodyBytesInFlight is Config.MaxBodyBytesInFlight when it is
// 0: eight bodies of the default --max-body-bytes.
const DefaultMaxBodyBytesInFlight = 8 * DefaultMaxBodyBytes

// Chunks of a body being received: the first is small, each next one as
// large as what has arrived so far, up to maxBodyChunk. A client that
// trickles bytes holds no more than twice what it sent, plus 512.
const (
	minBodyChunk = 512
	maxBodyChunk = 256 << 10
)

// limitIngest serves an ingest request (JSON and remote write) in two
// steps. First its body is received into memory: within
// Config.BodyReadTimeout (else 408) and within the bytes all bodies being
// received may hold at once, Config.MaxBodyBytesInFlight (else 429).
// Only then does it take one of the Config.MaxConcurrentIngest slots in
// which bodies are decoded and stored, so a slow client holds no slot.
// One more is refused at once with 429 and Retry-After rather than
// queued: a queued request would hold its body, which is the memory the
// limits bound.
func (s *Server) limitIngest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !ingestRoutes[c.Path()] {
			return next(c)
		}
		body, err := s.bodies.receive(c, s.cfg.BodyReadTimeout)
		defer body.release()
		if err != nil {
			return err
		}
		c.Request().Body = body
		select {
		case s.ingests <- struct{}{}:
		default:
			c.Response().Header().Set(echo.HeaderRetryAfter, ingestRetryAfter)
			return fmt.Errorf("%w: %d ingest requests are being served, at most %d at once (serve --max-concurrent-ingest); retry after %s s",
				errBusy, cap(s.ingests), cap(s.ingests), ingestRetryAfter)
		}
		defer func() { <-s.ingests }()
		return next(c)
	}
}

// bodyBudget bounds the bytes of the ingest bodies being received and
// held by their requests. Safe for concurrent use.
type bodyBudget struct {
	max       int64
	sem       *semaphore.Weighted
	reserved  atomic.Int64 // bytes reserved now, for tests and metrics
	receiving atomic.Int64 // bodies being received now
}

func newBodyBudget(maxBytes int64) *bodyBudget {
	return &bodyBudget{max: maxBytes, sem: semaphore.NewWeighted(maxBytes)}
}

// receive reads c's request body into chunks reserved from the budget,
// with the connection's read deadline at timeout from now (the socket's
// deadline is wall-clock time, so the clock is not injected). The
// returned body is never nil: release it when the request is done, also
// after an error.
func (b *bodyBudget) receive(c echo.Context, timeout time.Duration) (*receivedBody, error) {
	out := &receivedBody{budget: b}
	b.receiving.Add(1)
	defer b.receiving.Add(-1)
	rc := http.NewResponseController(c.Response())
	// Embedded behind a writer without deadlines (ErrNotSupported), the
	// body is read without one; serve's server always has them.
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	// Once the body is in, nothing more is read for this request: the
	// deadline must not cancel it while it is served. A body not read to
	// its end closes the connection (the rest is not drained), and keeps
	// the deadline, so nothing waits for a slow client's remainder.
	done := func() (*receivedBody, error) {
		if deadline {
			_ = rc.SetReadDeadline(time.Time{})
		}
		return out, nil
	}
	fail := func(err error) (*receivedBody, error) {
		c.Response().Header().Set(echo.HeaderConnection, "close")
		return out, err
	}
	r := c.Request()
	var total int64
	for {
		n := min(max(total, minBodyChunk), maxBodyChunk)
		if r.ContentLength >= 0 {
			if n = min(n, r.ContentLength-total); n == 0 {
				return done()
			}
		}
		if !b.sem.TryAcquire(n) {
			c.Response().Header().Set(echo.HeaderRetryAfter, ingestRetryAfter)
			return fail(fmt.Errorf("%w: the ingest bodies being received would pass the %d bytes allowed at once (serve --max-body-bytes-in-flight); retry after %s s",
				errBusy, b.max, ingestRetryAfter))
		}
		out.reserved += n
		b.reserved.Add(n)
		chunk := make([]byte, n)
		m, err := io.ReadFull(r.Body, chunk)
		out.chunks = append(out.chunks, chunk[:m])
		total += int64(m)
		switch {
		case err == nil:
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return done()
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fail(echo.NewHTTPError(http.StatusRequestTimeout,
				fmt.Sprintf("body: not received within %s (serve --ingest-body-timeout); send it faster or in smaller batches", timeout)))
		default:
			var he *echo.HTTPError
			if errors.As(err, &he) {
				return fail(he) // over --max-body-bytes
			}
			return fail(badRequest("body: read: %v", err))
		}
	}
}

// receivedBody is a request body held in memory as the chunks it
// arrived in, and the part of the budget they hold.
type receivedBody struct {
	budget   *bodyBudget
	chunks   [][]byte
	reserved int64
}

func (r *receivedBody) Read(p []byte) (int, error) {
	for len(r.chunks) > 0 && len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	return n, nil
}

func (r *receivedBody) Close() error { return nil }

// release gives the body's bytes back to the budget; the body is empty
// after it.
func (r *receivedBody) release() {
	r.chunks = nil
	if r.reserved > 0 {
		r.budget.reserved.Add(-r.reserved)
		r.budget.sem.Release(r.reserved)
		r.reserved = 0
	}
}

// DefaultMaxReadBytes is Config.MaxReadBytes when it is 0.
const DefaultMaxReadBytes = 512 << 20

// readRetryAfter is the Retry-After, in seconds, of a read refused
// because the reads being served hold the budget.
const readRetryAfter = "1"

// Estimates of the memory a heavy read holds while it is served, counted
// before its work starts. Measured on the history of 100 runs × 300
// tasks (TestHistoryMemoryWithinEstimate logs it): 319 bytes of heap per
// task and run for the runs, the matched tasks and the answer, 436 to 883
// under -race; the estimate is over twice the most seen. A job read
// that the store's cache does not hold decodes its samples (8-byte time,
// 8-byte value, a task index, and the chunk iterators' buffers).
const (
	historyTaskRunBytes = 2 << 10
	readSampleBytes     = 64
	readTaskBytes       = 1 << 10
	listSpanBytes       = 128
	listJobBytes        = 2 << 10
)

// readPool bounds the memory of the heavy reads served at once (history,
// a job's graph and tasks, the jobs list): each reserves its estimate
// before it starts, or is refused with 429 and Retry-After. A read
// estimated past the whole pool reserves all of it and runs alone. Safe
// for concurrent use.
type readPool struct {
	max      int64
	sem      *semaphore.Weighted
	reserved atomic.Int64 // bytes reserved now, for tests
}

func newReadPool(maxBytes int64) *readPool {
	return &readPool{max: maxBytes, sem: semaphore.NewWeighted(maxBytes)}
}

// reserve takes bytes of the pool for what (named in the refusal); the
// returned release gives them back.
func (p *readPool) reserve(c echo.Context, what string, bytes int64) (release func(), err error) {
	release, ok := p.tryReserve(bytes)
	if !ok {
		c.Response().Header().Set(echo.HeaderRetryAfter, readRetryAfter)
		return nil, fmt.Errorf("%w: %s needs about %d bytes, and the reads being served hold too much of the %d allowed at once (serve --max-read-bytes); retry after %s s",
			errBusy, what, bytes, p.max, readRetryAfter)
	}
	return release, nil
}

// tryReserve takes bytes of the pool (at most all of it) when they are
// free, for work no request waits on; ok is false when they are not.
func (p *readPool) tryReserve(bytes int64) (release func(), ok bool) {
	n := min(max(bytes, 1), p.max)
	if !p.sem.TryAcquire(n) {
		return nil, false
	}
	p.reserved.Add(n)
	return func() {
		p.reserved.Add(-n)
		p.sem.Release(n)
	}, true
}

// reserveJobRead reserves what reading job jobID in full holds: its
// samples and tasks, from its summary (cached by the store).
func (s *Server) reserveJobRead(c echo.Context, jobID string) (func(), error) {
	sum, err := s.store.Summary(c.Request().Context(), jobID)
	if err != nil {
		return nil, err
	}
	samples := 0
	for _, r := range sum.Resources {
		samples += r.Samples
	}
	return s.reads.reserve(c, fmt.Sprintf("job %q (%d samples, %d tasks)", jobID, samples, sum.Tasks),
		int64(samples)*readSampleBytes+int64(sum.Tasks)*readTaskBytes)
}
