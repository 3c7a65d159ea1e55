package downsample_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/peakline/peakline/bench/workload"
)

// FuzzSelect fuzzes the parameters of the workload generator, in the style
// of Prometheus' FuzzXORChunk: shape, size, seed and n, plus masks that put
// NaN, ±Inf and duplicate timestamps at 64 evenly spread places, and a
// keep list drawn from the seed. Every algorithm must keep every invariant.
func FuzzSelect(f *testing.F) {
	f.Add(int64(1), uint16(1000), uint32(10_000), uint64(0), uint64(0), uint8(0), uint8(0))
	f.Add(int64(2), uint16(3), uint32(100), uint64(1<<63|1), uint64(0), uint8(4), uint8(1))
	f.Add(int64(3), uint16(200), uint32(70_000), uint64(0xf0f0), uint64(0xff00ff), uint8(1), uint8(50))
	f.Fuzz(func(t *testing.T, seed int64, n uint16, size uint32, nanMask, dupMask uint64, shape, keepCount uint8) {
		shapes := append(slices.Clone(workload.Shapes), workload.NaN)
		ts, vs := workload.Shape(shapes[int(shape)%len(shapes)], int(size%(1<<17)), seed)
		for b := range 64 {
			at := b * len(ts) / 64
			if at >= len(ts) {
				break
			}
			if nanMask&(1<<b) != 0 {
				vs[at] = [...]float64{math.NaN(), math.Inf(1), math.Inf(-1)}[b%3]
			}
			if dupMask&(1<<b) != 0 && at > 0 {
				ts[at] = ts[at-1]
			}
		}
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		keep := randomKeep(rng, len(ts), min(int(keepCount), int(n)/2))
		runAll(t, ts, vs, int(n), keep)
	})
}

// FuzzSelectBytes decodes raw bytes into a series: each sample is a 2-byte
// timestamp step (0 gives a duplicate) and 8 bytes of float64 bits (any NaN
// payload, ±Inf, subnormals, ±MaxFloat64). With raw set, the timestamps are
// instead 8 raw bytes each, unsorted and extreme.
func FuzzSelectBytes(f *testing.F) {
	f.Add([]byte("\x01\x00\x00\x00\x00\x00\x00\x00\xf0\x3f\x01\x00\x00\x00\x00\x00\x00\x00\x00\x40"), uint16(3), false)
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\xf8\x7f\xff\xff\xff\xff\xff\xff\xef\x7f\x00\x00"), uint16(2), true)
	f.Fuzz(func(t *testing.T, data []byte, n uint16, raw bool) {
		step := 10
		if raw {
			step = 16
		}
		size := len(data) / step
		ts := make([]int64, size)
		vs := make([]float64, size)
		var now int64
		for i := range size {
			rec := data[i*step:]
			if raw {
				ts[i] = int64(binary.LittleEndian.Uint64(rec))
				vs[i] = math.Float64frombits(binary.LittleEndian.Uint64(rec[8:]))
				continue
			}
			now += int64(binary.LittleEndian.Uint16(rec))
			ts[i] = now
			vs[i] = math.Float64frombits(binary.LittleEndian.Uint64(rec[2:]))
		}
		var keep []int
		for i := 0; i < size && len(keep) < int(n)/2; i += 3 + int(n)%7 {
			keep = append(keep, i)
		}
		runAll(t, ts, vs, int(n), keep)
	})
}
