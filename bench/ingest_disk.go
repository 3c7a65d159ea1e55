package bench

import (
	"fmt"
	"math"

	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/peakline/peakline/bench/workload"
)

// xorSamplesPerChunk is how many samples the Prometheus TSDB head puts in
// one XOR chunk by default.
const xorSamplesPerChunk = 120

// xorBreakdown encodes each resource of a job as the TSDB does (XOR
// chunks of 120 samples per task series) and returns the chunk bytes per
// sample: as generated, and with timestamps snapped to the nominal
// interval (no jitter), to show what the timestamps cost.
func xorBreakdown(st *workload.Stream) (asIs, onGrid map[string]float64, err error) {
	asIs, onGrid = map[string]float64{}, map[string]float64{}
	n := map[string]int{}
	var c workload.Chunk
	st.Reset()
	defer st.Reset()
	interval := st.Spec().IntervalMs
	for st.Next(&c, 0) {
		for r, res := range c.Resources {
			for _, grid := range []bool{false, true} {
				b, err := xorBytes(c.Ts, c.Vs[r], grid, interval)
				if err != nil {
					return nil, nil, fmt.Errorf("encode %s: %w", res, err)
				}
				if grid {
					onGrid[res] += float64(b)
				} else {
					asIs[res] += float64(b)
				}
			}
			n[res] += len(c.Ts)
		}
	}
	for res, k := range n {
		asIs[res] /= float64(k)
		onGrid[res] /= float64(k)
	}
	return asIs, onGrid, nil
}

// xorBytes is the size of the XOR chunks holding one series.
func xorBytes(ts []int64, vs []float64, grid bool, intervalMs int64) (int, error) {
	total := 0
	for start := 0; start < len(ts); start += xorSamplesPerChunk {
		end := min(start+xorSamplesPerChunk, len(ts))
		ch := chunkenc.NewXORChunk()
		app, err := ch.Appender()
		if err != nil {
			return 0, err
		}
		for i := start; i < end; i++ {
			t := ts[i]
			if grid {
				t = ts[0] + int64(math.Round(float64(ts[i]-ts[0])/float64(intervalMs)))*intervalMs
			}
			app.Append(0, t, vs[i])
		}
		total += len(ch.Bytes())
	}
	return total, nil
}
