//go:build amd64 && !purego

package downsample

import "golang.org/x/sys/cpu"

// useAVX512 says whether pickAny runs the vector kernel (it needs
// VCVTQQ2PD, which converts int64 to float64 exactly as Go does). Tests
// turn it off to check the portable loop on the same inputs.
var useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// pickBlock is how many samples a pass of the vector kernel takes.
const pickBlock = 32

// pickLanes is the vector kernel's result: per lane, the largest area and
// the index of the first sample that reached it (-1 if none did).
type pickLanes struct {
	best [pickBlock]float64
	idx  [pickBlock]int64
}

// pickAreasAVX512 computes the areas of pickAny for the first
// len(ct)&^(pickBlock-1) samples into out. Implemented in lttb_amd64.s.
//
//go:noescape
func pickAreasAVX512(ct []int64, cv []float64, ta int64, ay, dx, dy float64, out *pickLanes)

// pickAnyVec is pickAny's vector kernel: it returns the pick and its area
// among the first n samples, n = len(ct) rounded down to pickBlock, or n = 0
// if it cannot run.
func pickAnyVec(ct []int64, cv []float64, ta int64, ay, dx, dy float64) (pick int, best float64, n int) {
	if !useAVX512 || len(ct) < pickBlock {
		return -1, -1, 0
	}
	var out pickLanes
	pickAreasAVX512(ct, cv[:len(ct)], ta, ay, dx, dy, &out)
	pick, best = -1, -1.0
	for k, b := range out.best {
		if i := int(out.idx[k]); b > best || b == best && i < pick {
			best, pick = b, i
		}
	}
	return pick, best, len(ct) &^ (pickBlock - 1)
}
