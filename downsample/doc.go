// Package downsample owns the pure point-selection algorithms that turn a
// series of raw samples into at most N points for a graph: LTTB, MinMaxLTTB,
// M4, MinMax and the peak-keeping PeakLTTB that the graph uses by default,
// plus Select, which runs one of them by name: columns in, indices out.
//
// It does not own storage, I/O, HTTP, rendering, the choice of N or the
// graph payload (server/graphpayload assembles that from the indices): it
// knows nothing of jobs, tasks or resources and imports no other Peakline
// package.
//
// # Data shape and contracts shared by every algorithm
//
// A series is two parallel columns, ts (unix milliseconds, non-decreasing;
// duplicates and irregular spacing are fine) and vs (values). Every function
// appends to dst the indices into ts/vs of the samples it keeps and returns
// the extended slice, like append: it allocates only when dst lacks capacity
// (MinMax and M4 on large inputs also start goroutines, see below), so a
// caller that reuses dst across calls allocates nothing. The result:
//
//   - holds at most n indices, strictly increasing, each a real sample;
//   - never holds the index of a NaN or ±Inf value, so "first and last"
//     means the first and last finite samples, and those are always kept
//     (for n >= 2);
//   - holds every finite index when n >= len(ts);
//   - for n too small for an algorithm, is clamped, never a panic:
//     n <= 0 gives nothing, n == 1 the first finite sample, and n below the
//     algorithm's own minimum (3 for the LTTB family, 4 for M4, 4 for MinMax)
//     gives the first and last finite samples only.
//
// If ts and vs differ in length the extra tail of the longer one is ignored
// (Select reports it as an error instead). If ts is not sorted, the
// invariants above still hold but which points are chosen is unspecified.
//
// The functions never modify ts, vs or keep and keep no reference to any of
// them or to dst after they return. They hold no state, so any number of
// calls may run in parallel as long as their dst slices do not share a
// backing array.
//
// # The algorithms
//
//   - LTTB: Steinarsson's Largest-Triangle-Three-Buckets (2013) with his
//     exact arithmetic and tie-breaking, on index buckets.
//   - MinMaxLTTB: MinMax preselection of n*ratio points, then LTTB on them
//     (Van Der Donckt et al., 2023); nearly LTTB's picture at MinMax's speed.
//   - M4: first, last, min and max of each of n/4 equal time buckets
//     (Jugel et al., 2014): pixel-exact for a line chart n/4 pixels wide.
//   - MinMax: min and max of each of (n-2)/2 equal time buckets.
//   - PeakLTTB: LTTB's picks plus the series' global max and min and the
//     caller's keep indices, less the LTTB picks with the smallest
//     Visvalingam-Whyatt triangles to stay within n. With nothing to keep,
//     if LTTB's own picks already show the max and min values, they are
//     returned untouched.
//
// M4 and MinMax (and so MinMaxLTTB's preselection) split large inputs
// (parallelMinPoints, 65,536 samples, or more) across GOMAXPROCS goroutines
// over contiguous bucket ranges; below that they stay on the calling
// goroutine.
//
// # Vector kernels
//
// Two inner loops have amd64 assembly versions, chosen at run time from
// the CPU's features: the min/max scan of MinMax, M4 and PeakLTTB (AVX2,
// minmax_amd64.s) and the area comparison of LTTB and PeakLTTB (AVX-512F
// and DQ, lttb_amd64.s). Each computes exactly what its Go loop computes,
// with the same IEEE operations and the same tie-breaking, and tests run
// both on the same inputs. The purego build tag, or another GOARCH, keeps
// the Go loops only.
//
// # Why the default is PeakLTTB
//
// Plain LTTB drops the global max or min in 54% of 500 random walks at
// n = 200 (MinMaxLTTB in 38%; TestLTTBMissesPeaks), and the high-water mark
// is what a Peakline user looks at first. PeakLTTB keeps both, and the
// graph's keep indices (each task's peak), by construction: it adds them to
// LTTB's picture and, to stay within n, drops the LTTB picks whose
// triangles with their neighbours are smallest. Letting the peaks replace
// their buckets' picks instead, or re-running LTTB with fewer buckets
// around them, redrew up to 0.5% of the canvas on step-like and spiky
// series; dropping the least significant picks moves at most a handful of
// pixels. On the fidelity measure of bench/fidelity (pixel error and DSSIM
// of the rendered line against the raw one, 800x250, 100k-sample series,
// 6 shapes x n 200, 1000, 4000, three seeds) its sum over the cells is
// 50.65% of pixels and 0.828 DSSIM against LTTB's 50.80% and 0.831, and
// 50.36% and 0.810 with a peak kept for each of 60 tasks; no cell is worse
// than LTTB's by more than 0.004% of the canvas (TestFidelity). M4 and MinMax
// keep peaks too but draw step and staircase series visibly worse (2 to 6
// times LTTB's pixel error at n 1000). PeakLTTB costs one LTTB run, a
// max/min scan (beside LTTB, on a second goroutine, for large inputs) and,
// when it adds points, a pass over the n picks.
package downsample
