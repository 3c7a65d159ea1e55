//go:build !amd64 || purego

package downsample

// This build has no vector kernels (see minmax_amd64.s and lttb_amd64.s).
var (
	useAVX2   = false
	useAVX512 = false
)

// minMaxIdxVec has no vector kernel in this build.
func minMaxIdxVec([]float64) (iMin, iMax int, ran bool) { return -1, -1, false }

// pickAnyVec has no vector kernel in this build.
func pickAnyVec([]int64, []float64, int64, float64, float64, float64) (pick int, best float64, n int) {
	return -1, -1, 0
}
