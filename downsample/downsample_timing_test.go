package downsample_test

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	lttb "github.com/dgryski/go-lttb"

	"github.com/peakline/peakline/bench/workload"
	"github.com/peakline/peakline/downsample"
)

// The benchmarks follow Prometheus' chunkenc/benchmark_test.go: a fixed-seed
// matrix of workload shapes and sizes, generated once, one sub-benchmark per
// algorithm, shape and size, with ns/point and allocations reported and the
// output checked so the work cannot be optimised away. go-lttb, the anchor,
// runs on its own []Point input built outside the timer.
//
// The whole matrix (6 algorithms x 6 shapes x 3 sizes) takes about three
// minutes with the default -benchtime and holds ~2 GB of series at its peak.
// On a shared machine, compare minimums over -count runs, not single runs.
// To compare algorithms side by side:
//
//	go test -run='^$' -bench='BenchmarkDownsample$' -benchmem -count=6 ./downsample/ | tee bench.txt
//	benchstat -col /algo bench.txt
//
// Narrow it with e.g. -bench='BenchmarkDownsample/algo=(go-lttb|lttb)$/shape=randomwalk/n=1e7'.

const benchOut = 1000 // points asked of every algorithm

var benchSizes = []struct {
	name string
	n    int
}{{"1e4", 10_000}, {"1e6", 1_000_000}, {"1e7", 10_000_000}}

type benchSeries struct {
	ts  []int64
	vs  []float64
	pts []lttb.Point[float64]
}

var (
	benchMu   sync.Mutex
	benchData = map[string]*benchSeries{}
)

// series returns the shape at the size, generating it (seed 1) on first use.
func series(shape string, size int, points bool) *benchSeries {
	benchMu.Lock()
	defer benchMu.Unlock()
	key := fmt.Sprint(shape, size)
	s := benchData[key]
	if s == nil {
		s = &benchSeries{}
		s.ts, s.vs = workload.Shape(shape, size, 1)
		benchData[key] = s
	}
	if points && s.pts == nil {
		s.pts = make([]lttb.Point[float64], size)
		for i := range s.pts {
			s.pts[i] = lttb.Point[float64]{X: float64(s.ts[i]), Y: s.vs[i]}
		}
	}
	return s
}

var benchAlgos = []string{"go-lttb", "lttb", "minmaxlttb", "m4", "minmax", "peaklttb"}

func BenchmarkDownsample(b *testing.B) {
	for _, algo := range benchAlgos {
		b.Run("algo="+algo, func(b *testing.B) {
			for _, shape := range workload.Shapes {
				b.Run("shape="+shape, func(b *testing.B) {
					for _, size := range benchSizes {
						b.Run("n="+size.name, func(b *testing.B) {
							benchOne(b, algo, series(shape, size.n, algo == "go-lttb"))
						})
					}
				})
			}
		})
	}
}

// BenchmarkDownsampleScaling runs the algorithms that split their scan
// across goroutines on one core and on every core, setting GOMAXPROCS in
// the leaf. (With -cpu, the testing package runs each leaf's first b.Loop
// measurement while it discovers the sub-benchmarks, before it applies the
// first -cpu value, so that row is measured on the default core count.)
//
//	go test -run='^$' -bench='BenchmarkDownsampleScaling' -count=6 ./downsample/ | tee scaling.txt
//	benchstat -col /procs scaling.txt
//
// algo=sum is not an algorithm but the ceiling: a plain split read of the
// same values.
func BenchmarkDownsampleScaling(b *testing.B) {
	procs := []int{1}
	if n := runtime.NumCPU(); n > 1 {
		procs = append(procs, n)
	}
	for _, algo := range []string{"minmax", "m4", "minmaxlttb", "sum"} {
		b.Run("algo="+algo, func(b *testing.B) {
			for _, shape := range []string{"randomwalk", "gaps"} {
				b.Run("shape="+shape, func(b *testing.B) {
					for _, size := range benchSizes[1:] {
						b.Run("n="+size.name, func(b *testing.B) {
							for _, p := range procs {
								b.Run(fmt.Sprint("procs=", p), func(b *testing.B) {
									defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(p))
									s := series(shape, size.n, false)
									if algo == "sum" {
										benchSum(b, s.vs, p)
										return
									}
									benchOne(b, algo, s)
								})
							}
						})
					}
				})
			}
		})
	}
}

// benchSum is the scaling benchmark's reference: it reads every value once,
// as the min/max scan does, adding their bits as integers in four chains
// (so the adds never wait on each other) on each of procs goroutines, the
// series split the way MinMax splits its scan. Its speedup is what this
// machine's caches and memory give a plain parallel read of the series.
func benchSum(b *testing.B, vs []float64, procs int) {
	b.ReportAllocs()
	bits := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(vs))), len(vs))
	sums := make([]uint64, procs)
	part := func(w int) {
		var s0, s1, s2, s3 uint64
		c := bits[w*len(bits)/procs : (w+1)*len(bits)/procs]
		for i := 0; i+4 <= len(c); i += 4 {
			q := c[i : i+4 : i+4]
			s0 += q[0]
			s1 += q[1]
			s2 += q[2]
			s3 += q[3]
		}
		sums[w] = s0 + s1 + s2 + s3
	}
	for b.Loop() {
		if procs == 1 {
			part(0)
			continue
		}
		var wg sync.WaitGroup
		for w := range procs {
			wg.Go(func() { part(w) })
		}
		wg.Wait()
	}
	if sums[0] == 0 {
		b.Fatal("the series' bits sum to 0")
	}
	reportPerPoint(b, len(vs))
}

func benchOne(b *testing.B, algo string, s *benchSeries) {
	b.ReportAllocs()
	size := len(s.ts)
	if algo == "go-lttb" {
		var out []lttb.Point[float64]
		for b.Loop() {
			out = lttb.LTTB(s.pts, benchOut)
		}
		if len(out) != benchOut || out[0] != s.pts[0] || out[len(out)-1] != s.pts[size-1] {
			b.Fatalf("go-lttb returned %d points", len(out))
		}
		reportPerPoint(b, size)
		return
	}
	dst := make([]int, 0, benchOut*(1+downsample.MinMaxLTTBRatio))
	var err error
	for b.Loop() {
		dst, err = downsample.Select(dst[:0], algo, s.ts, s.vs, benchOut, nil)
	}
	if err != nil {
		b.Fatal(err)
	}
	if len(dst) < 2 || len(dst) > benchOut || dst[0] != 0 || dst[len(dst)-1] != size-1 {
		b.Fatalf("%s returned %d indices (%v ... %v)", algo, len(dst), dst[:min(3, len(dst))], dst[max(0, len(dst)-3):])
	}
	reportPerPoint(b, size)
}

func reportPerPoint(b *testing.B, size int) {
	b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size), "ns/point")
}
