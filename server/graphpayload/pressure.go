package graphpayload

import (
	"math"

	"github.com/peakline/peakline/tsdb/history"
)

// StallColumn is one stall signal of a job as the graph's pressure band
// reads it: Vs[i] is the seconds the job stalled during the sample
// interval that ends at Ts[i] (the collector's stall resources, stamped
// like the CPU samples they ride on). Ts strictly increases.
type StallColumn struct {
	Signal string // "cpu", "memory", "throttled", "node_cpu" (TaskSummary.Waited's keys)
	Ts     []int64
	Vs     []float64
}

// PressureBand is the share of each sample interval the job stalled on
// one signal: Share[k] of the interval from From[k] to T[k] (unix ms),
// 0 to 1, the stall seconds over the interval's length. Intervals follow
// each other (From[k] is T[k−1]). With
// more samples than points, runs of consecutive intervals are merged
// into one: their stall seconds over their length, so the band's area
// is the job's stall time whatever the resolution. RawSamples is the
// signal's sample count in the window.
type PressureBand struct {
	Signal     string    `json:"signal"`
	RawSamples int       `json:"raw_samples"`
	From       []int64   `json:"from"`
	T          []int64   `json:"t"`
	Share      []float64 `json:"share"`
}

// Pressure builds the bands of the graph payload's "pressure" field, at
// most points intervals each, in the order of cols; a column without
// samples has no band. The first sample's interval starts where the
// sampler's previous reading was, which the window does not hold: it is
// taken to be the column's median interval long (as history.CPUSeconds
// counts it). A column of one sample has no interval to divide by and no
// band.
func Pressure(cols []StallColumn, points int) []PressureBand {
	var out []PressureBand
	for _, c := range cols {
		n := min(len(c.Ts), len(c.Vs))
		if n < 2 || points < 1 {
			continue
		}
		typical := max(history.MedianInterval(c.Ts[:n]), 1)
		per := (n + points - 1) / points // samples merged into one interval
		b := PressureBand{Signal: c.Signal, RawSamples: n}
		for lo := 0; lo < n; lo += per {
			hi := min(lo+per, n)
			from := c.Ts[lo] - typical
			if lo > 0 {
				from = c.Ts[lo-1]
			}
			stalled := 0.0
			for _, v := range c.Vs[lo:hi] {
				if finite(v) && v > 0 {
					stalled += v
				}
			}
			span := float64(c.Ts[hi-1]-from) / 1000
			if span <= 0 {
				continue
			}
			b.From = append(b.From, from)
			b.T = append(b.T, c.Ts[hi-1])
			b.Share = append(b.Share, math.Round(min(stalled/span, 1)*1e4)/1e4)
		}
		out = append(out, b)
	}
	return out
}
