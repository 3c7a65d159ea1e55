//go:build amd64 && !purego

package downsample

import "golang.org/x/sys/cpu"

// useAVX512 says whether pickAny runs the vector kernel (it needs
// VCVTQQ2PD, which converts int64 to float64 exactly as Go does). Tests
// turn it off to check the portable loop on the same inputs.
var useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// pickVecMin is the bucket length from which pickAny runs the vector
// kernel; below it, setting up the vectors and reducing the lanes cost
// about what they save (a bucket of 10 samples measured no faster).
const pickVecMin = 32

// pickAreasAVX512 returns pickAny's pick among all of ct/cv and its area,
// or -1 and -1 if none compares. Implemented in lttb_amd64.s.
//
//go:noescape
func pickAreasAVX512(ct []int64, cv []float64, ta int64, ay, dx, dy float64) (pick int, best float64)

// pickAnyVec is pickAny's vector kernel: it returns the pick and its area
// among the first n samples, n = len(ct), or n = 0 if it cannot run.
func pickAnyVec(ct []int64, cv []float64, ta int64, ay, dx, dy float64) (pick int, best float64, n int) {
	if !useAVX512 || len(ct) < pickVecMin {
		return -1, -1, 0
	}
	pick, best = pickAreasAVX512(ct, cv[:len(ct)], ta, ay, dx, dy)
	return pick, best, len(ct)
}
