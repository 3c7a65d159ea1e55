package downsample

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMinMaxIdx checks the kernels of minMaxIdx against the obvious loop
// on lengths around their block sizes, with NaN, ±Inf, ±0 and ties.
func TestMinMaxIdx(t *testing.T) {
	want := func(vs []float64) (iMin, iMax int) {
		iMin, iMax = -1, -1
		for i, v := range vs {
			if !isFinite(v) {
				continue
			}
			if iMin < 0 || v < vs[iMin] {
				iMin = i
			}
			if iMax < 0 || v > vs[iMax] {
				iMax = i
			}
		}
		return iMin, iMax
	}
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 1, -1}
	for size := range 300 {
		for trial := range 20 {
			vs := make([]float64, size)
			v := 0.0
			for i := range vs {
				v += rng.NormFloat64()
				vs[i] = v
				if trial%2 == 1 {
					vs[i] = float64(rng.IntN(5)) // many ties
				}
			}
			for range trial / 4 {
				if size > 0 {
					vs[rng.IntN(size)] = specials[rng.IntN(len(specials))]
				}
			}
			gMin, gMax := minMaxIdx(vs)
			wMin, wMax := want(vs)
			if gMin != wMin || gMax != wMax {
				t.Fatalf("size %d trial %d: got %d, %d, want %d, %d (%v)", size, trial, gMin, gMax, wMin, wMax, vs)
			}
			if vMin, vMax, ran := minMaxIdxVec(vs); ran && vMin >= 0 && isFinite(vs[vMin]) && isFinite(vs[vMax]) && (vMin != wMin || vMax != wMax) {
				t.Fatalf("minMaxIdxVec size %d trial %d: got %d, %d, want %d, %d", size, trial, vMin, vMax, wMin, wMax)
			} else if useAVX2 && size >= 16 && !ran {
				t.Fatalf("minMaxIdxVec did not run on %d values with AVX2", size)
			} else if hasNaN := slices.ContainsFunc(vs, math.IsNaN); ran && (vMin < 0) != hasNaN {
				t.Fatalf("minMaxIdxVec size %d trial %d: NaN reported %v, held %v", size, trial, vMin < 0, hasNaN)
			}
			if size > 0 {
				bMin, bMax := blockMinMax(vs)
				if isFinite(vs[bMin]) && isFinite(vs[bMax]) && (bMin != wMin || bMax != wMax) {
					t.Fatalf("blockMinMax size %d trial %d: got %d, %d, want %d, %d", size, trial, bMin, bMax, wMin, wMax)
				}
			}
		}
	}
}

// TestSearchNear checks searchNear against searchTS for every guess.
func TestSearchNear(t *testing.T) {
	ts := []int64{1, 2, 2, 2, 5, 7, 7, 9, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 11, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 40}
	for from := 0; from <= len(ts); from++ {
		for to := from; to <= len(ts); to++ {
			for q := int64(0); q <= 41; q++ {
				want := searchTS(ts, from, to, q)
				for guess := from - 3; guess <= to+3; guess++ {
					if got := searchNear(ts, from, to, q, guess); got != want {
						t.Fatalf("searchNear(ts, %d, %d, %d, %d) = %d, want %d", from, to, q, guess, got, want)
					}
				}
			}
		}
	}
}
