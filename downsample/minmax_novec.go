//go:build !(goexperiment.simd && amd64)

package downsample

// minMaxIdxVec has no vector kernel in this build: see minmax_simd_amd64.go.
func minMaxIdxVec([]float64) (iMin, iMax int, ok bool) { return -1, -1, false }
