//go:build !amd64 || purego

package downsample

// useAVX2 is false: this build has no vector kernel (see minmax_amd64.s).
var useAVX2 = false

// minMaxIdxVec has no vector kernel in this build.
func minMaxIdxVec([]float64) (iMin, iMax int, ran bool) { return -1, -1, false }
