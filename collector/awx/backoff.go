package awx

import (
	"context"
	"errors"
	"time"
)

// Backoff spaces the requests after a retryable failure: Base doubled per
// failure in a row, at most Max, or the server's Retry-After when longer
// (capped at Max too). Jitter, when set, returns a number in [0, 1) and
// takes up to a fifth off each delay, so that agents that failed together
// do not come back together. Tries bounds the requests Retry makes for one
// call (0 means DefaultTries). The zero value starts at DefaultBackoffBase
// and stays under DefaultBackoffMax.
type Backoff struct {
	Base, Max time.Duration
	Jitter    func() float64
	Tries     int
}

// Defaults of Backoff.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = 5 * time.Minute
	DefaultTries       = 8
)

// Delay returns the wait before the next request after failures failed
// requests in a row (1 for the first), whose last asked to wait retryAfter.
func (b Backoff) Delay(failures int, retryAfter time.Duration) time.Duration {
	base, maxDelay := b.Base, b.Max
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if maxDelay <= 0 {
		maxDelay = DefaultBackoffMax
	}
	d := base
	for i := 1; i < failures && d < maxDelay; i++ {
		d *= 2
	}
	if b.Jitter != nil {
		d -= time.Duration(b.Jitter() * float64(d) / 5)
	}
	return min(max(d, retryAfter), maxDelay)
}

// Retry calls do until it succeeds, fails with an error that is not a
// *RetryableError, or has failed b.Tries times, waiting b.Delay between
// tries with sleep (nil: Sleep). It returns do's last error.
func Retry(ctx context.Context, b Backoff, sleep func(context.Context, time.Duration) error, do func() error) error {
	if sleep == nil {
		sleep = Sleep
	}
	tries := b.Tries
	if tries <= 0 {
		tries = DefaultTries
	}
	for failures := 1; ; failures++ {
		err := do()
		var re *RetryableError
		if err == nil || !errors.As(err, &re) || failures >= tries {
			return err
		}
		if err := sleep(ctx, b.Delay(failures, re.RetryAfter)); err != nil {
			return err
		}
	}
}

// Sleep waits d or until ctx is done, returning ctx's error then: Retry's
// sleep unless told otherwise.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
