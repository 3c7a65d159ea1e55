package ship

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"
)

// ErrRejected means the server refused a batch with a 4xx status other than
// 401 and 403 (the credentials, not the batch: it stays spooled, see
// Shipper.refused) and 408, 425 and 429 (retried): the batch itself is wrong (malformed, too large,
// outside the store's window) or the collector may not send it, and
// resending it would not help.
var ErrRejected = errors.New("batch rejected by the server")

// maxRetryAfter bounds the wait a Retry-After header asks for; past it the
// batch is offered again anyway.
const maxRetryAfter = 5 * time.Minute

// retryable reports whether a batch answered with status should be sent
// again, as the Prometheus remote-write specification has it: every 5xx,
// and of the 4xx only 408 Request Timeout, 425 Too Early and 429 Too Many
// Requests, which say "not now" rather than "not this". A status outside
// 4xx and 5xx (an unfollowed redirect) is retried too: it says nothing
// about the batch.
func retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return status < 400 || status >= 500
}

// shipEntry is one queued batch: in memory (body) or spooled (file).
type shipEntry struct {
	body    []byte
	file    string
	samples int  // unknown (0) for a batch of an earlier run
	earlier bool // spooled by an earlier run (LoadSpool)
}

// Shipper sends ingest batches to the server in order, one at a time, and
// never blocks the caller: batches queue in memory up to MaxQueueSamples,
// then go to the spool directory. A network error or a retryable answer
// (see retryable) is retried with exponential backoff (MinBackoff doubling
// up to MaxBackoff, ±20% jitter), or after the wait a Retry-After header
// asks for (at least MinBackoff, at most 5 minutes). Any other 4xx
// answer drops the batch: it is logged with the server's message, counted,
// and kept in the spool as <name>.rejected for inspection, never resent.
// Batches spooled by an earlier run are sent first (LoadSpool). The server
// answers only after its WAL commit and stores a resent sample once, so a
// batch leaves the queue only on a 2xx answer or a rejection.
//
// Enqueue and Stats are safe for concurrent use with Run and with each
// other; batches of one job keep their order when one goroutine enqueues
// them. Finish ends Run.
type Shipper struct {
	client                 *Client
	spool                  *Spool // nil: no usable directory, memory only
	maxQueue               int
	minBackoff, maxBackoff time.Duration
	log                    *slog.Logger
	// timer makes the backoff waits: a channel that fires after d, and
	// its stop function (time.NewTimer's).
	timer func(d time.Duration) (<-chan time.Time, func() bool)

	mu       sync.Mutex
	queue    []shipEntry
	inMemory int // samples in memory
	wake     chan struct{}
	draining chan struct{} // closed by finish
	done     chan struct{} // closed when run returns
	spoolErr bool          // a spool write failed (logged once)

	sentSamples, sentBatches, spooledBatches int
	rejectedSamples, rejectedBatches         int // samples is 0 for batches of an earlier run
}

// ShipperConfig configures NewShipper. Zero values take the defaults.
type ShipperConfig struct {
	// Server is the Peakline server's base URL, e.g. http://host:9090.
	Server string
	// HTTP does the requests; its Transport carries the token and the TLS
	// settings (NewTransport). nil: http.DefaultClient.
	HTTP *http.Client
	// TokenFile names the token file HTTP sends, for the log line of a
	// 401 or 403 (see AuthError); "" when none is sent.
	TokenFile string
	// Spool takes the batches that do not fit in memory and those left
	// at Finish; nil keeps everything in memory (and loses it at exit).
	Spool *Spool
	// MaxQueueSamples bounds the samples queued in memory before batches
	// go to Spool (default 100000).
	MaxQueueSamples int
	// MinBackoff and MaxBackoff bound the wait between retries of a
	// failing send (defaults 500ms and 30s).
	MinBackoff, MaxBackoff time.Duration
	// Logger receives the shipper's log (nil: discarded).
	Logger *slog.Logger
}

// NewShipper returns a shipper that sends nothing until Run.
func NewShipper(cfg ShipperConfig) *Shipper {
	if cfg.MaxQueueSamples <= 0 {
		cfg.MaxQueueSamples = 100_000
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := newShipper(cfg.Server, cfg.HTTP, cfg.Spool, cfg.MaxQueueSamples, log)
	s.client.TokenFile = cfg.TokenFile
	if cfg.MinBackoff > 0 {
		s.minBackoff = cfg.MinBackoff
	}
	if cfg.MaxBackoff > 0 {
		s.maxBackoff = cfg.MaxBackoff
	}
	return s
}

// ShipperStats counts what a shipper did so far.
type ShipperStats struct {
	SentSamples, SentBatches, SpooledBatches int
	// RejectedSamples does not count the samples of batches an earlier
	// run spooled (unknown).
	RejectedSamples, RejectedBatches int
}

// Stats returns the counts so far. It is safe for concurrent use.
func (s *Shipper) Stats() ShipperStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ShipperStats{
		SentSamples: s.sentSamples, SentBatches: s.sentBatches, SpooledBatches: s.spooledBatches,
		RejectedSamples: s.rejectedSamples, RejectedBatches: s.rejectedBatches,
	}
}

func newShipper(server string, client *http.Client, sp *Spool, maxQueue int, log *slog.Logger) *Shipper {
	return &Shipper{
		client:     &Client{BaseURL: server, HTTP: client},
		spool:      sp,
		maxQueue:   maxQueue,
		minBackoff: 500 * time.Millisecond,
		maxBackoff: 30 * time.Second,
		log:        log,
		timer: func(d time.Duration) (<-chan time.Time, func() bool) {
			t := time.NewTimer(d)
			return t.C, t.Stop
		},
		wake:     make(chan struct{}, 1),
		draining: make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// LoadSpool queues the batches an earlier run left in the spool directory,
// ahead of everything else. It returns how many there were.
func (s *Shipper) LoadSpool() int {
	if s.spool == nil {
		return 0
	}
	files, err := s.spool.list()
	if err != nil {
		s.log.Warn("cannot resend spooled batches", "err", err)
		return 0
	}
	entries := make([]shipEntry, len(files))
	for i, f := range files {
		entries[i] = shipEntry{file: f, earlier: true}
	}
	s.mu.Lock()
	s.queue = append(entries, s.queue...)
	s.mu.Unlock()
	s.poke()
	return len(files)
}

// Enqueue queues a gzip-encoded batch of n samples. It takes ownership of
// body.
func (s *Shipper) Enqueue(body []byte, n int) {
	e := shipEntry{body: body, samples: n}
	s.mu.Lock()
	full := s.inMemory+n > s.maxQueue && s.spool != nil
	s.mu.Unlock()
	if full {
		// The write happens outside the lock: a slow disk holds up this
		// caller only.
		if file, err := s.spool.write(body); err == nil {
			e = shipEntry{file: file, samples: n}
		} else {
			s.noteSpoolErr(err)
		}
	}
	s.mu.Lock()
	s.queue = append(s.queue, e)
	if e.body != nil {
		s.inMemory += n
	} else {
		s.spooledBatches++
	}
	s.mu.Unlock()
	s.poke()
}

func (s *Shipper) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Shipper) noteSpoolErr(err error) {
	s.mu.Lock()
	first := !s.spoolErr
	s.spoolErr = true
	s.mu.Unlock()
	if first {
		s.log.Error("cannot spool; keeping batches in memory", "err", err)
	}
}

// Run sends queued batches until ctx is done, or until Finish was called
// and the queue is empty or a send fails.
func (s *Shipper) Run(ctx context.Context) {
	defer close(s.done)
	backoff := s.minBackoff
	failing := false
	for {
		s.mu.Lock()
		var e shipEntry
		have := len(s.queue) > 0
		if have {
			e = s.queue[0]
		}
		s.mu.Unlock()
		if !have {
			select {
			case <-ctx.Done():
				return
			case <-s.draining:
				return
			case <-s.wake:
				continue
			}
		}
		err := s.post(ctx, e)
		switch {
		case err == nil:
			s.pop(e)
			if failing {
				s.log.Info("server reachable again", "url", s.client.BaseURL)
				failing = false
			}
			backoff = s.minBackoff
			continue
		case s.refused(err): // 401/403: keep everything spooled
			return
		case errors.Is(err, ErrRejected):
			s.keepRejected(e, err)
			s.pop(e)
			continue
		case errors.Is(err, fs.ErrNotExist) && e.file != "":
			s.pop(e) // another collector sent and removed this spooled batch
			continue
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case <-s.draining:
			// At exit, nobody waits for a failing server.
			s.log.Warn("cannot send batch at exit; giving up on the server", "err", err)
			return
		default:
		}
		if !failing {
			s.log.Warn("cannot send batch; retrying with backoff", "err", err)
			failing = true
		} else {
			s.log.Debug("cannot send batch", "err", err, "backoff", backoff)
		}
		wait := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		if se := (*StatusError)(nil); errors.As(err, &se) && se.RetryAfter > 0 {
			wait = min(max(se.RetryAfter, s.minBackoff), maxRetryAfter)
		}
		fired, stop := s.timer(wait)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-s.draining:
			stop()
			return
		case <-fired:
		}
		backoff = min(backoff*2, s.maxBackoff)
	}
}

// pop removes e, the queue's head, after it was handled.
func (s *Shipper) pop(e shipEntry) {
	s.mu.Lock()
	s.queue = s.queue[1:]
	if e.body != nil {
		s.inMemory -= e.samples
	}
	s.mu.Unlock()
	if e.file != "" {
		if err := s.spool.remove(e.file); err != nil {
			s.log.Warn("cannot remove a sent batch from the spool; it may be sent again", "err", err)
		}
	}
}

// keepRejected counts a refused batch, keeps it in the spool as
// *.rejected and logs it once; call it before pop.
func (s *Shipper) keepRejected(e shipEntry, err error) {
	s.mu.Lock()
	s.rejectedBatches++
	s.rejectedSamples += e.samples
	s.mu.Unlock()
	if s.spool == nil {
		s.log.Error("server rejected a batch; dropping it", "samples", e.samples, "err", err)
		return
	}
	kept, kerr := s.spool.reject(e.file, e.body)
	if kerr != nil {
		s.log.Error("server rejected a batch; dropping it", "samples", e.samples, "err", err, "keep_err", kerr)
		return
	}
	s.log.Error("server rejected a batch; kept it", "file", kept, "samples", e.samples, "err", err)
}

// post sends one gzip-encoded batch: the bytes it queued or spooled,
// unchanged.
func (s *Shipper) post(ctx context.Context, e shipEntry) error {
	body := e.body
	if body == nil {
		var err error
		if body, err = os.ReadFile(e.file); err != nil {
			return err
		}
	}
	err := s.client.SendEncoded(ctx, body)
	var se *StatusError
	switch {
	case err == nil:
		s.mu.Lock()
		s.sentSamples += e.samples
		s.sentBatches++
		s.mu.Unlock()
		return nil
	case errors.As(err, &se) && !retryable(se.StatusCode):
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return err
}

// Finish ends Run: it lets Run send what is queued for up to timeout, or
// until a send fails, then writes what is left in memory to the spool. It
// returns the samples left unsent (spooled, or lost without a spool).
func (s *Shipper) Finish(cancelRun context.CancelFunc, timeout time.Duration) (unsent int) {
	close(s.draining)
	t := time.NewTimer(timeout)
	select {
	case <-s.done:
		t.Stop()
	case <-t.C:
		cancelRun()
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	earlier := 0 // batches an earlier run spooled, whose samples are not counted
	for i, e := range s.queue {
		unsent += e.samples
		if e.earlier {
			earlier++
		}
		if e.body == nil {
			continue
		}
		if s.spool == nil {
			s.log.Error("no spool directory: samples lost", "samples", e.samples)
			continue
		}
		file, err := s.spool.write(e.body)
		if err != nil {
			s.log.Error("cannot spool batch: samples lost", "samples", e.samples, "err", err)
			continue
		}
		s.queue[i] = shipEntry{file: file, samples: e.samples}
		s.spooledBatches++
	}
	s.inMemory = 0
	if earlier > 0 {
		s.log.Warn("batches spooled by an earlier run are still unsent; the next collect resends them", "batches", earlier)
	}
	return unsent
}
