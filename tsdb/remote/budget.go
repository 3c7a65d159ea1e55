package remote

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
)

// The memory budget. Every read of an engine answer holds a reservation
// of the client's budget for what it keeps: it reserves readBase before
// it sends the request (waiting at most Config.BudgetWait, FIFO, for
// others to release), and its decoder charges every column, label and
// string before allocating it, growing the reservation in steps of
// reserveStep. Growing never waits: a read that holds memory and waited
// for more could wait on another that waits on it, so a read that finds
// the budget held by others is refused (ErrBudget, try later), and one
// whose own data passes the whole budget is too large (ErrTooLarge).
// A querier's reads share one reservation, released by Close, as the
// series it returned are the caller's until then.

// DefaultMemoryBudget is Config.MemoryBudget when zero: 2 GiB, a quarter
// of a replica with 8 GiB, twice what one answer may be.
const DefaultMemoryBudget = 2 << 30

// DefaultBudgetWait is Config.BudgetWait when zero.
const DefaultBudgetWait = 5 * time.Second

// readBase is what a read reserves before it starts: its 64 KiB read
// buffer, the transport's buffers and the decoder's state.
const readBase = 128 << 10

// reserveStep is the least a reservation grows by, so that a large read
// takes the budget's lock once per MiB, not once per column.
const reserveStep = 1 << 20

// budget is the memory all reads of a client may hold at once.
type budget struct {
	total   int64
	wait    time.Duration
	sem     *semaphore.Weighted
	used    atomic.Int64
	refused prometheus.Counter
}

func newBudget(total int64, wait time.Duration, refused prometheus.Counter) *budget {
	return &budget{total: total, wait: wait, sem: semaphore.NewWeighted(total), refused: refused}
}

// inUse is the part of the budget reservations hold, in bytes.
func (b *budget) inUse() int64 { return b.used.Load() }

// reserve waits for readBase of the budget, at most b.wait, and returns
// a reservation holding it; what names the read in a refusal.
func (b *budget) reserve(ctx context.Context, what string) (*reservation, error) {
	wctx, cancel := context.WithTimeout(ctx, b.wait)
	defer cancel()
	if err := b.sem.Acquire(wctx, readBase); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		b.refused.Inc()
		return nil, fmt.Errorf("%w: %s: waited %s for the remote memory budget of %s, which other reads hold; try again later",
			ErrBudget, what, b.wait, formatBytes(b.total))
	}
	b.used.Add(readBase)
	return &reservation{b: b, held: readBase, what: what}, nil
}

// reservation is the part of the budget one read, or one querier's
// reads, holds. Safe for concurrent use.
type reservation struct {
	b    *budget
	mu   sync.Mutex
	held int64  // bytes taken from b
	used int64  // bytes charged, at most held
	what string // the read under way, for refusals
}

// charge accounts n more bytes the read is about to allocate, growing
// the reservation without waiting. It refuses with ErrTooLarge when the
// read alone would pass the whole budget, with ErrBudget when others
// hold what it needs.
func (r *reservation) charge(n int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.used+n <= r.held {
		r.used += n
		return nil
	}
	if r.used+n > r.b.total {
		return fmt.Errorf("%w: %s: its samples and labels need more than the remote memory budget of %s; read a shorter time range",
			ErrTooLarge, r.what, formatBytes(r.b.total))
	}
	need := r.used + n - r.held
	more := min(max(need, reserveStep), r.b.total-r.held)
	if !r.b.sem.TryAcquire(more) {
		if more = need; !r.b.sem.TryAcquire(more) { // the step did not fit: what is needed may
			r.b.refused.Inc()
			return fmt.Errorf("%w: %s: reading it needs %s more of the remote memory budget of %s, of which reads hold %s; try again later",
				ErrBudget, r.what, formatBytes(more), formatBytes(r.b.total), formatBytes(r.b.inUse()))
		}
	}
	r.b.used.Add(more)
	r.held += more
	r.used += n
	return nil
}

// uncharge gives back n bytes charged before (a column's array replaced
// by a larger one), keeping them reserved for the read.
func (r *reservation) uncharge(n int64) {
	r.mu.Lock()
	r.used = max(r.used-n, 0)
	r.mu.Unlock()
}

// start names the next read of the reservation.
func (r *reservation) start(what string) {
	r.mu.Lock()
	r.what = what
	r.mu.Unlock()
}

// release gives everything back to the budget; the reservation may be
// released again (a no-op).
func (r *reservation) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held > 0 {
		r.b.sem.Release(r.held)
		r.b.used.Add(-r.held)
	}
	r.held, r.used = 0, 0
}

// lazyReservation is a querier's reservation, taken at its first read.
type lazyReservation struct {
	mu  sync.Mutex
	res *reservation
}

// get returns the reservation, waiting for one at the first call.
func (l *lazyReservation) get(ctx context.Context, b *budget, what string) (*reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.res == nil {
		res, err := b.reserve(ctx, what)
		if err != nil {
			return nil, err
		}
		l.res = res
	}
	l.res.start(what)
	return l.res, nil
}

func (l *lazyReservation) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.res != nil {
		l.res.release()
		l.res = nil
	}
}

// grow makes room for one more element of col, charging the new array
// (8 bytes an element) before allocating it and giving back the old one.
func grow[T int64 | float64](res *reservation, col []T) ([]T, error) {
	if len(col) < cap(col) {
		return col, nil
	}
	n := max(2*cap(col), 8) // a vector's series hold one sample
	if err := res.charge(int64(n) * 8); err != nil {
		return col, err
	}
	out := make([]T, len(col), n)
	copy(out, col)
	res.uncharge(int64(cap(col)) * 8)
	return out, nil
}

// formatBytes renders a size in the largest binary unit it reaches,
// exactly where the unit divides it, else to a tenth.
func formatBytes(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		switch {
		case n >= u.size && n%u.size == 0:
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		case n >= u.size:
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
