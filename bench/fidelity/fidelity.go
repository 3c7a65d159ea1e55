// Package fidelity owns how Peakline measures what a downsampled series
// looks like next to the raw one: both are drawn as 1-pixel lines on the
// same 800x250 canvas, with the x and y limits of the raw data, and compared
// by the share of differing pixels and by DSSIM, the method of the
// MinMaxLTTB paper (Van Der Donckt et al., 2023) and of its companion
// "Data Point Selection for Line Chart Visualization" (2023).
//
// It does not own the algorithms (downsample) or the series (bench/workload),
// and draws no anti-aliasing, widths or colours: the measure is meant to
// rank algorithms against each other, not to mimic a browser. Standard
// library only.
package fidelity

import "math"

// Canvas size in pixels, a typical graph panel.
const (
	Width  = 800
	Height = 250
)

// Measure draws the raw series ts/vs and the samples idx of it (ascending
// indices, as the downsample package returns) as lines on a Width x Height
// canvas with the x range of the first to last finite raw sample and the y
// range of the finite raw values, and returns the share of canvas pixels
// that differ (0 to 1) and the DSSIM, (1 - mean SSIM)/2 over 8x8 windows (0
// for identical images, at most 1). Non-finite samples are skipped: the
// line joins the finite ones around them. Indices out of range are ignored.
//
// Measure allocates its canvases; it is safe for concurrent use and does not
// modify its inputs.
func Measure(ts []int64, vs []float64, idx []int) (pixelErr, dssim float64) {
	size := min(len(ts), len(vs))
	ts, vs = ts[:size], vs[:size]
	v := newViewport(ts, vs)
	raw := make([]bool, Width*Height)
	got := make([]bool, Width*Height)
	px, py, started := 0, 0, false
	for i := range ts {
		if x, y, ok := v.pixel(ts[i], vs[i]); ok {
			if started {
				drawLine(raw, px, py, x, y)
			} else {
				raw[y*Width+x] = true
			}
			px, py, started = x, y, true
		}
	}
	started = false
	for _, i := range idx {
		if i < 0 || i >= size {
			continue
		}
		if x, y, ok := v.pixel(ts[i], vs[i]); ok {
			if started {
				drawLine(got, px, py, x, y)
			} else {
				got[y*Width+x] = true
			}
			px, py, started = x, y, true
		}
	}
	diff := 0
	for i := range raw {
		if raw[i] != got[i] {
			diff++
		}
	}
	return float64(diff) / float64(len(raw)), DSSIM(raw, got, Width, Height)
}

// viewport maps samples to pixels, (0, 0) top left.
type viewport struct {
	t0, t1 int64
	v0, v1 float64
}

func newViewport(ts []int64, vs []float64) viewport {
	v := viewport{v0: math.Inf(1), v1: math.Inf(-1)}
	first := true
	for i, y := range vs {
		if math.IsNaN(y) || math.IsInf(y, 0) {
			continue
		}
		if first {
			v.t0, first = ts[i], false
		}
		v.t1 = ts[i]
		v.v0, v.v1 = min(v.v0, y), max(v.v1, y)
	}
	return v
}

func (v viewport) pixel(t int64, y float64) (px, py int, ok bool) {
	if math.IsNaN(y) || math.IsInf(y, 0) {
		return 0, 0, false
	}
	fx, fy := 0.5, 0.5
	if v.t1 > v.t0 {
		fx = float64(t-v.t0) / float64(v.t1-v.t0)
	}
	if v.v1 > v.v0 {
		fy = (v.v1 - y) / (v.v1 - v.v0)
	}
	px = int(math.Round(fx * (Width - 1)))
	py = int(math.Round(fy * (Height - 1)))
	return min(max(px, 0), Width-1), min(max(py, 0), Height-1), true
}

// drawLine sets the pixels of the segment (x0, y0)-(x1, y1) by Bresenham's
// algorithm; both ends must be on the canvas.
func drawLine(img []bool, x0, y0, x1, y1 int) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		img[y0*Width+x0] = true
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
