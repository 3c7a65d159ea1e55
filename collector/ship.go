package collector

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

// ErrRejected means the server refused a batch as malformed (400, 413, 415
// or 422); resending it would not help.
var ErrRejected = errors.New("batch rejected by the server")

// shipEntry is one queued batch: in memory (body) or spooled (file).
type shipEntry struct {
	body    []byte
	file    string
	samples int
}

// shipper sends ingest batches to the server in order, one at a time, and
// never blocks the caller: batches queue in memory up to maxQueue samples,
// then go to the spool directory. A failed send is retried with
// exponential backoff (minBackoff doubling up to maxBackoff, ±20% jitter).
// Batches spooled by an earlier run are sent first (loadSpool). The server
// answers only after its WAL commit and stores a resent sample once, so a
// batch is dropped from the queue only on a 2xx answer.
//
// enqueue is safe for concurrent use with run; finish ends run.
type shipper struct {
	client                 *Client
	spool                  *spool // nil: no usable directory, memory only
	maxQueue               int
	minBackoff, maxBackoff time.Duration
	log                    *slog.Logger

	mu       sync.Mutex
	queue    []shipEntry
	inMemory int // samples in memory
	wake     chan struct{}
	draining chan struct{} // closed by finish
	done     chan struct{} // closed when run returns
	spoolErr bool          // a spool write failed (logged once)

	sentSamples, sentBatches, spooledBatches int
}

func newShipper(server string, client *http.Client, sp *spool, maxQueue int, log *slog.Logger) *shipper {
	return &shipper{
		client:     &Client{BaseURL: server, HTTP: client},
		spool:      sp,
		maxQueue:   maxQueue,
		minBackoff: 500 * time.Millisecond,
		maxBackoff: 30 * time.Second,
		log:        log,
		wake:       make(chan struct{}, 1),
		draining:   make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// loadSpool queues the batches an earlier run left in the spool directory,
// ahead of everything else. It returns how many there were.
func (s *shipper) loadSpool() int {
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
		entries[i] = shipEntry{file: f}
	}
	s.mu.Lock()
	s.queue = append(entries, s.queue...)
	s.mu.Unlock()
	s.poke()
	return len(files)
}

// enqueue queues a gzip-encoded batch of n samples. It takes ownership of
// body.
func (s *shipper) enqueue(body []byte, n int) {
	e := shipEntry{body: body, samples: n}
	s.mu.Lock()
	full := s.inMemory+n > s.maxQueue && s.spool != nil
	s.mu.Unlock()
	if full {
		// The write happens outside the lock; only this goroutine enqueues.
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

func (s *shipper) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *shipper) noteSpoolErr(err error) {
	s.mu.Lock()
	first := !s.spoolErr
	s.spoolErr = true
	s.mu.Unlock()
	if first {
		s.log.Error("cannot spool; keeping batches in memory", "err", err)
	}
}

// run sends queued batches until ctx is done, or until finish was called
// and the queue is empty or a send fails.
func (s *shipper) run(ctx context.Context) {
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
			return // at exit, nobody waits for a failing server
		default:
		}
		if !failing {
			s.log.Warn("cannot send batch; retrying with backoff", "err", err)
			failing = true
		} else {
			s.log.Debug("cannot send batch", "err", err, "backoff", backoff)
		}
		wait := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.draining:
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, s.maxBackoff)
	}
}

// pop removes e, the queue's head, after it was handled.
func (s *shipper) pop(e shipEntry) {
	s.mu.Lock()
	s.queue = s.queue[1:]
	if e.body != nil {
		s.inMemory -= e.samples
	}
	s.mu.Unlock()
	if e.file != "" {
		if err := os.Remove(e.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot remove sent spool file", "err", err)
		}
	}
}

// keepRejected keeps a refused batch in the spool as *.rejected; call it
// before pop.
func (s *shipper) keepRejected(e shipEntry, err error) {
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
func (s *shipper) post(ctx context.Context, e shipEntry) error {
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
	case errors.As(err, &se):
		switch se.StatusCode {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity:
			return fmt.Errorf("%w: %w", ErrRejected, err)
		}
	}
	return err
}

// finish ends run: it lets run send what is queued for up to timeout, or
// until a send fails, then writes what is left in memory to the spool. It
// returns the samples left unsent (spooled, or lost without a spool).
func (s *shipper) finish(cancelRun context.CancelFunc, timeout time.Duration) (unsent int) {
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
	for i, e := range s.queue {
		unsent += e.samples
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
	return unsent
}
