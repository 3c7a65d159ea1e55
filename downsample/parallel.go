package downsample

import (
	"math/bits"
	"runtime"
	"sync"
)

// parallelMinPoints is the number of samples from which MinMax and M4 split
// their scan across goroutines. Below it, starting and joining goroutines
// (a few microseconds) costs more than the scan saves: at about half a
// nanosecond per sample, 64Ki samples take ~30 µs on one core.
const parallelMinPoints = 1 << 16

// timeBins cuts the time range [t0, t0+span] into n bins of equal width:
// bin j starts at edge(j), and the last bin also holds t0+span.
type timeBins struct {
	t0   int64
	span uint64
	n    int
}

func newTimeBins(from, to int64, n int) timeBins {
	var span uint64
	if to > from {
		span = uint64(to - from) // exact even when to-from overflows int64
	}
	return timeBins{t0: from, span: span, n: n}
}

// edge returns t0 + floor(span*j/n) for 0 <= j <= n, without overflow.
func (b timeBins) edge(j int) int64 {
	h, l := bits.Mul64(b.span, uint64(j))
	q, _ := bits.Div64(h, l, uint64(b.n))
	return b.t0 + int64(q) // wraps back into range if q > MaxInt64
}

// binOf returns the bin holding time t: the last j < n with edge(j) <= t,
// or 0.
func (b timeBins) binOf(t int64) int {
	lo, hi := 0, b.n-1 // answer in [lo, hi]
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if b.edge(m) <= t {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// searchTS returns the first i in [from, to) with ts[i] >= t, or to. On
// unsorted ts it still returns some index in [from, to].
func searchTS(ts []int64, from, to int, t int64) int {
	for from < to {
		m := int(uint(from+to) >> 1)
		if ts[m] < t {
			from = m + 1
		} else {
			to = m
		}
	}
	return from
}

// searchNear is searchTS starting from a guess of the answer: it gallops
// away from guess until it brackets the answer, then bisects the bracket.
// A bisection over [from, to) touches ~log2(to-from) cache lines far from
// the bin; MinMaxLTTB's preselection asks once per few hundred samples,
// and on near-regular sampling the guess (the previous bin's width) lands
// within a few samples of the answer, so this reads only the bin's edge.
func searchNear(ts []int64, from, to int, t int64, guess int) int {
	guess = min(max(guess, from), to)
	lo, hi := from, to
	step := 8
	if guess < to && ts[guess] < t { // the answer is past guess
		lo = guess + 1
		for p := lo + step; p < to; p = lo + step {
			if ts[p] >= t {
				hi = p
				break
			}
			lo = p + 1
			step *= 2
		}
	} else { // the answer is at or before guess
		hi = guess
		for p := hi - step; p >= from; p = hi - step {
			if ts[p] < t {
				lo = p + 1
				break
			}
			hi = p
			step *= 2
		}
	}
	return searchTS(ts, lo, hi, t)
}

// binKernel says what runBins extracts from each bin.
type binKernel uint8

const (
	kernelMinMax binKernel = iota // 2 slots per bin: min and max, in index order
	kernelM4                      // 4 slots per bin: first, min, max, last
)

func (k binKernel) slots() int {
	if k == kernelM4 {
		return 4
	}
	return 2
}

// runBins fills slots (k.slots() per bin of tb) from the samples in
// [from, to), splitting the bins into contiguous ranges over goroutines
// when the input is large. Each goroutine writes only its own bins' slots,
// so the results need no merging, and the index ranges handed out are
// contiguous and ascending even on unsorted ts, so the slots stay ordered.
func runBins(slots []int, ts []int64, vs []float64, from, to int, tb timeBins, k binKernel) {
	workers := min(runtime.GOMAXPROCS(0), tb.n, (to-from)/(parallelMinPoints/2))
	if to-from < parallelMinPoints || workers < 2 {
		scanBins(slots, ts, vs, from, to, tb, 0, tb.n, k)
		return
	}
	var wg sync.WaitGroup
	pFrom, bFrom := from, 0
	for w := 1; w <= workers; w++ {
		pTo, bTo := to, tb.n
		if w < workers {
			// Balance samples, not bins: gaps make bins uneven.
			p := from + mulDiv(w, to-from, workers)
			bTo = max(tb.binOf(ts[p]), bFrom)
			pTo = searchTS(ts, pFrom, to, tb.edge(bTo))
		}
		p0, p1, b0, b1 := pFrom, pTo, bFrom, bTo
		wg.Go(func() { scanBins(slots, ts, vs, p0, p1, tb, b0, b1, k) })
		pFrom, bFrom = pTo, bTo
	}
	wg.Wait()
}

// scanBins fills the slots of bins [b0, b1) from the samples in [from, to):
// bin j gets the samples from the end of bin j-1 up to the first with a
// time at or past edge(j+1), and the last bin gets the rest.
func scanBins(slots []int, ts []int64, vs []float64, from, to int, tb timeBins, b0, b1 int, k binKernel) {
	per := k.slots()
	i0 := from
	width := (to - from) / max(b1-b0, 1) // guessed samples per bin
	for j := b0; j < b1; j++ {
		i1 := to
		if j+1 < b1 {
			i1 = searchNear(ts, i0, to, tb.edge(j+1), i0+width)
			width = i1 - i0
		}
		slot := slots[j*per : (j+1)*per]
		if k == kernelM4 {
			m4Bin(slot, vs[i0:i1], i0)
		} else {
			iMin, iMax := minMaxIdx(vs[i0:i1])
			switch {
			case iMin < 0:
				slot[0], slot[1] = -1, -1
			case iMin == iMax:
				slot[0], slot[1] = i0+iMin, -1
			default:
				slot[0], slot[1] = i0+min(iMin, iMax), i0+max(iMin, iMax)
			}
		}
		i0 = i1
	}
}

// compact moves the slot values that are above prev and above every value
// kept before them to the front of slots, in order, and returns how many
// it kept. It drops the -1 markers and repeats.
func compact(slots []int, prev int) int {
	w := 0
	for _, v := range slots {
		if v > prev {
			slots[w] = v
			w++
			prev = v
		}
	}
	return w
}
