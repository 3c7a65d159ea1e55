package downsample

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPickAnyKernels checks that pickAny picks the same sample with and
// without its vector kernel, on buckets around the kernel's block size,
// with exact ties (constant and small-integer values), areas that overflow
// to +Inf and areas that are NaN (+Inf - +Inf).
func TestPickAnyKernels(t *testing.T) {
	if !useAVX512 {
		t.Skip("LTTB's AVX-512 kernel was not compared with its Go loop: this CPU lacks AVX-512F/DQ " +
			"(or the build is purego or not amd64), so only the Go loop runs here; " +
			"the other tests check it, and make test's purego run covers the Go loops on any machine")
	}
	defer func() { useAVX512 = true }()
	rng := rand.New(rand.NewPCG(5, 6))
	for c := range 20000 {
		size := rng.IntN(4 * 32) // around the kernel's blocks of 8 and 32
		ct := make([]int64, size)
		cv := make([]float64, size)
		t0 := rng.Int64N(1 << 40)
		tm := t0
		v := 0.0
		style := c % 5
		for i := range ct {
			tm += rng.Int64N(3) // duplicates too
			ct[i] = tm
			switch style {
			case 0:
				v += rng.NormFloat64()
			case 1:
				v = float64(rng.IntN(3))
			case 2:
				v = 5
			case 3:
				v = rng.NormFloat64() * 1e300
			default:
				v = float64(rng.IntN(7)) - 3
			}
			cv[i] = v
		}
		ta := t0 - rng.Int64N(1000)
		ax, ay := float64(ta-t0), rng.NormFloat64()
		avgX, avgY := float64(tm-t0)+rng.Float64()*1e4, rng.NormFloat64()
		switch c % 7 {
		case 0:
			avgY = ay // a flat line: areas are exact multiples, many ties
		case 1:
			avgY, ay = math.MaxFloat64, -math.MaxFloat64 // +Inf and NaN areas
		}
		useAVX512 = true
		got := pickAny(ct, cv, ta, ax, ay, avgX, avgY)
		useAVX512 = false
		want := pickAny(ct, cv, ta, ax, ay, avgX, avgY)
		if got != want {
			t.Fatalf("case %d (size %d, style %d): vector kernel picked %d, loop %d", c, size, style, got, want)
		}
	}
}
