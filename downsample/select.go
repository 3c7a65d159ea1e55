package downsample

import (
	"errors"
	"fmt"
	"slices"
)

// ErrUnknownAlgorithm is returned by Select for a name not in Names().
var ErrUnknownAlgorithm = errors.New("unknown downsampling algorithm")

// Default is the algorithm the graph uses when none is asked for: PeakLTTB,
// which keeps the global max and min that plain LTTB drops in about half of
// random-walk series, at no loss of fidelity (see the package doc).
const Default = "peaklttb"

// MinMaxLTTBRatio is the preselection ratio Select uses for "minmaxlttb",
// the value the MinMaxLTTB paper recommends.
const MinMaxLTTBRatio = 4

// Names lists every algorithm Select accepts, the default first.
func Names() []string {
	return []string{"peaklttb", "lttb", "minmaxlttb", "m4", "minmax"}
}

// Select runs the named algorithm ("" means Default) and appends to dst at
// most n strictly increasing indices into ts/vs, returning the extended dst.
//
// keep holds indices (ascending, unique, each < len(ts), at most n/2 of
// them) that must appear in the result; entries pointing at NaN or ±Inf
// values are dropped, since non-finite samples are never returned. PeakLTTB
// honours keep by construction and also always keeps the global max and min
// (n >= 8). The other algorithms run with n minus the finite keep entries
// and keep is merged into what they select, so the result stays <= n.
//
// Select returns an error, and dst unchanged, for an unknown name (wrapping
// ErrUnknownAlgorithm), for ts and vs of different lengths, and for a keep
// that breaks its contract. The package doc states the remaining contracts
// (clamping, non-finite values, ownership, concurrency).
func Select(dst []int, name string, ts []int64, vs []float64, n int, keep []int) ([]int, error) {
	if len(ts) != len(vs) {
		return dst, fmt.Errorf("select %s: %d timestamps but %d values", name, len(ts), len(vs))
	}
	if n > 0 && len(keep) > n/2 {
		return dst, fmt.Errorf("select %s: keep has %d indices, at most n/2 = %d allowed", name, len(keep), n/2)
	}
	for i, k := range keep {
		if k < 0 || k >= len(ts) {
			return dst, fmt.Errorf("select %s: keep[%d] = %d is outside the series of %d samples", name, i, k, len(ts))
		}
		if i > 0 && k <= keep[i-1] {
			return dst, fmt.Errorf("select %s: keep[%d] = %d is not above keep[%d] = %d; keep must be ascending and unique", name, i, k, i-1, keep[i-1])
		}
	}
	if name == "" {
		name = Default
	}
	if !slices.Contains(Names(), name) {
		return dst, fmt.Errorf("%w %q, want one of %v", ErrUnknownAlgorithm, name, Names())
	}
	if n <= 0 {
		return dst, nil
	}
	if n >= len(ts) {
		return appendFinite(dst, vs, 0), nil
	}
	if name == "peaklttb" {
		return PeakLTTB(dst, ts, vs, n, keep), nil
	}

	kept := 0
	for _, k := range keep {
		if isFinite(vs[k]) {
			kept++
		}
	}
	base := len(dst)
	budget := n - kept
	switch name {
	case "lttb":
		dst = LTTB(dst, ts, vs, budget)
	case "minmaxlttb":
		dst = MinMaxLTTB(dst, ts, vs, budget, MinMaxLTTBRatio)
	case "m4":
		dst = M4(dst, ts, vs, budget)
	case "minmax":
		dst = MinMax(dst, ts, vs, budget)
	}
	if kept == 0 {
		return dst, nil
	}
	return mergeKeep(dst, base, keep, vs), nil
}

// mergeKeep merges the finite entries of keep (ascending, in range) into
// the ascending indices dst[base:], in place from the back.
func mergeKeep(dst []int, base int, keep []int, vs []float64) []int {
	got := dst[base:]
	union := len(got)
	i := 0
	for _, k := range keep {
		if !isFinite(vs[k]) {
			continue
		}
		for i < len(got) && got[i] < k {
			i++
		}
		if i == len(got) || got[i] != k {
			union++
		}
	}
	r := len(dst) - 1
	dst = slices.Grow(dst, union-len(got))[:base+union]
	w := len(dst) - 1
	for j := len(keep) - 1; j >= 0; j-- {
		k := keep[j]
		if !isFinite(vs[k]) {
			continue
		}
		for r >= base && dst[r] > k {
			dst[w] = dst[r]
			w--
			r--
		}
		if r >= base && dst[r] == k {
			r--
		}
		dst[w] = k
		w--
	}
	return dst
}
