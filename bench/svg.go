package bench

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// Chart is one panel of a plot: lines over shared axes.
type Chart struct {
	Title          string
	XLabel, YLabel string
	LogX, LogY     bool
	Lines          []Line
	// Categories makes a bar chart: Lines[j].Y[i] is the bar of line j
	// in category i; X is not used.
	Categories []string
}

// Line is one series of a chart. Points with a NaN coordinate, or a
// non-positive one on a log axis, are left out.
type Line struct {
	Name   string
	X, Y   []float64
	Dashed bool
	Thin   bool // a faint reference line (raw data)
	Marks  bool // draw a dot at each point
	Dots   bool // draw only dots, no line (a scatter)
}

// Panel geometry, px.
const (
	panelW, panelH = 520, 340
	marginL        = 72
	marginR        = 16
	marginT        = 34
	marginB        = 46
	columns        = 2
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// WriteSVG draws charts as a grid of panels under a title.
func WriteSVG(w io.Writer, title string, charts []Chart) error {
	bw := bufio.NewWriter(w)
	cols := min(columns, max(len(charts), 1))
	rows := (len(charts) + cols - 1) / cols
	// Wide enough for the title (about 8 px a character at 15 px bold).
	width, height := max(cols*panelW, 8*len(title)+40), rows*panelH+30
	left := (width - cols*panelW) / 2
	fmt.Fprintf(bw, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", width, height, width, height)
	fmt.Fprintf(bw, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(bw, `<text x="%d" y="20" font-size="15" font-weight="bold" text-anchor="middle">%s</text>`+"\n", width/2, html.EscapeString(title))
	for i, c := range charts {
		x0, y0 := left+(i%cols)*panelW, 30+(i/cols)*panelH
		fmt.Fprintf(bw, `<g transform="translate(%d,%d)">`+"\n", x0, y0)
		drawChart(bw, c)
		fmt.Fprintln(bw, "</g>")
	}
	fmt.Fprintln(bw, "</svg>")
	return bw.Flush()
}

// axis maps data to pixels along one dimension.
type axis struct {
	lo, hi float64
	log    bool
	p0, p1 float64 // pixel of lo, hi
}

func (a axis) ok(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!a.log || v > 0)
}

func (a axis) px(v float64) float64 {
	lo, hi := a.lo, a.hi
	if a.log {
		v, lo, hi = math.Log10(v), math.Log10(lo), math.Log10(hi)
	}
	if hi == lo {
		return (a.p0 + a.p1) / 2
	}
	return a.p0 + (v-lo)/(hi-lo)*(a.p1-a.p0)
}

// ticks returns tick values: powers of ten on a log axis, 1-2-5 steps on
// a linear one.
func (a axis) ticks() []float64 {
	var out []float64
	if a.log {
		// Powers of ten over three decades or more, else 1-2-5 steps.
		for _, steps := range [][]float64{{1}, {1, 2, 5}} {
			out = out[:0]
			for e := math.Floor(math.Log10(a.lo)); e <= math.Ceil(math.Log10(a.hi)); e++ {
				for _, m := range steps {
					if v := m * math.Pow(10, e); v >= a.lo*0.999 && v <= a.hi*1.001 {
						out = append(out, v)
					}
				}
			}
			if len(out) >= 3 {
				return out
			}
		}
		if len(out) >= 2 {
			return out
		}
		out = nil
	}
	span := a.hi - a.lo
	if span <= 0 {
		return []float64{a.lo}
	}
	step := math.Pow(10, math.Floor(math.Log10(span/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 6 {
			step *= m
			break
		}
	}
	for v := math.Ceil(a.lo/step) * step; v <= a.hi+step*1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func drawChart(w io.Writer, c Chart) {
	if len(c.Categories) > 0 {
		drawBars(w, c)
		return
	}
	// The legend goes under the plot, two entries a row, so it never
	// hides a line.
	named := 0
	for _, l := range c.Lines {
		if l.Name != "" {
			named++
		}
	}
	bottom := panelH - marginB - 14*((named+1)/2)
	xa := axis{lo: math.Inf(1), hi: math.Inf(-1), log: c.LogX, p0: marginL, p1: panelW - marginR}
	ya := axis{lo: math.Inf(1), hi: math.Inf(-1), log: c.LogY, p0: float64(bottom), p1: marginT}
	for _, l := range c.Lines {
		for i := range min(len(l.X), len(l.Y)) {
			if xa.ok(l.X[i]) && ya.ok(l.Y[i]) {
				xa.lo, xa.hi = min(xa.lo, l.X[i]), max(xa.hi, l.X[i])
				ya.lo, ya.hi = min(ya.lo, l.Y[i]), max(ya.hi, l.Y[i])
			}
		}
	}
	fmt.Fprintf(w, `<text x="%d" y="16" font-size="13" text-anchor="middle">%s</text>`+"\n", (marginL+panelW-marginR)/2, html.EscapeString(c.Title))
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", marginL, marginT, panelW-marginL-marginR, bottom-marginT)
	if math.IsInf(xa.lo, 0) {
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle" fill="#888">no data</text>`+"\n", panelW/2, panelH/2)
		return
	}
	pad := func(a *axis) {
		if a.log {
			a.lo, a.hi = a.lo/1.15, a.hi*1.15
			return
		}
		d := (a.hi - a.lo) * 0.05
		if d == 0 {
			d = math.Max(math.Abs(a.hi)*0.05, 1)
		}
		a.lo, a.hi = a.lo-d, a.hi+d
	}
	pad(&ya)
	if xa.log {
		pad(&xa)
	}
	for _, t := range xa.ticks() {
		x := xa.px(t)
		fmt.Fprintf(w, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`, x, marginT, x, bottom)
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, bottom+14, tickLabel(t))
	}
	for _, t := range ya.ticks() {
		y := ya.px(t)
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`, marginL, y, panelW-marginR, y)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-4, y+4, tickLabel(t))
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (marginL+panelW-marginR)/2, bottom+30, html.EscapeString(c.XLabel))
	fmt.Fprintf(w, `<text transform="translate(14,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (marginT+bottom)/2, html.EscapeString(c.YLabel))
	entry := 0
	for i, l := range c.Lines {
		color := palette[i%len(palette)]
		width, opacity, dash := 1.6, 1.0, ""
		if l.Thin {
			color, width, opacity = "#999", 1, 0.8
		}
		if l.Dashed {
			dash = ` stroke-dasharray="5,3"`
		}
		var pts []byte
		var marks []string
		for k := range min(len(l.X), len(l.Y)) {
			if !xa.ok(l.X[k]) || !ya.ok(l.Y[k]) {
				continue
			}
			x, y := xa.px(l.X[k]), ya.px(l.Y[k])
			pts = fmt.Appendf(pts, "%.1f,%.1f ", x, y)
			if l.Marks || l.Dots {
				marks = append(marks, fmt.Sprintf(`<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, x, y, color))
			}
		}
		if !l.Dots {
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="%.1f" stroke-opacity="%.2f"%s points="%s"/>`+"\n", color, width, opacity, dash, pts)
		}
		for _, m := range marks {
			fmt.Fprintln(w, m)
		}
		if l.Name != "" {
			lx := marginL + (entry%2)*(panelW-marginL-marginR)/2
			ly := bottom + 48 + 14*(entry/2)
			if l.Dots {
				fmt.Fprintf(w, `<circle cx="%d" cy="%d" r="3" fill="%s"/>`, lx+9, ly-4, color)
			} else {
				fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`, lx, ly-4, lx+18, ly-4, color, dash)
			}
			fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", lx+22, ly, html.EscapeString(l.Name))
			entry++
		}
	}
}

// tickLabel prints a tick value compactly: 250k, 1.5M, 0.5, 1e-3.
func tickLabel(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', 3, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	case a < 1e-2:
		return strconv.FormatFloat(v, 'e', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// envelope reduces a raw series to the min and max of each of cols
// columns of its time range: what a line of it looks like on a panel
// cols pixels wide, without writing millions of points into the SVG.
func envelope(ts []int64, vs []float64, cols int) (x, y []float64) {
	if len(ts) == 0 {
		return nil, nil
	}
	t0, t1 := float64(ts[0]), float64(ts[len(ts)-1])
	col := func(t int64) int {
		if t1 == t0 {
			return 0
		}
		return min(int((float64(t)-t0)/(t1-t0)*float64(cols)), cols-1)
	}
	i := 0
	for c := 0; c < cols && i < len(ts); c++ {
		lo, hi := i, i
		j := i
		for ; j < len(ts) && col(ts[j]) == c; j++ {
			if vs[j] < vs[lo] {
				lo = j
			}
			if vs[j] > vs[hi] {
				hi = j
			}
		}
		if j == i {
			continue
		}
		a, b := min(lo, hi), max(lo, hi)
		x = append(x, float64(ts[a]), float64(ts[b]))
		y = append(y, vs[a], vs[b])
		i = j
	}
	return x, y
}

// drawBars draws a bar chart: one group per category, one bar per line,
// from zero.
func drawBars(w io.Writer, c Chart) {
	ya := axis{lo: 0, hi: math.Inf(-1), p0: panelH - marginB - 30, p1: marginT + 14*float64(len(c.Lines))}
	for _, l := range c.Lines {
		for _, y := range l.Y {
			if ya.ok(y) {
				ya.hi = max(ya.hi, y)
			}
		}
	}
	fmt.Fprintf(w, `<text x="%d" y="16" font-size="13" text-anchor="middle">%s</text>`+"\n", (marginL+panelW-marginR)/2, html.EscapeString(c.Title))
	fmt.Fprintf(w, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", marginL, marginT, panelW-marginL-marginR, panelH-marginT-marginB)
	if math.IsInf(ya.hi, 0) || ya.hi <= 0 {
		fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle" fill="#888">no data</text>`+"\n", panelW/2, panelH/2)
		return
	}
	ya.hi *= 1.08
	for _, t := range ya.ticks() {
		y := ya.px(t)
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`, marginL, y, panelW-marginR, y)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-4, y+4, tickLabel(t))
	}
	fmt.Fprintf(w, `<text transform="translate(14,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (marginT+panelH-marginB)/2, html.EscapeString(c.YLabel))
	slot := float64(panelW-marginL-marginR) / float64(len(c.Categories))
	barW := slot * 0.8 / float64(max(len(c.Lines), 1))
	for i, name := range c.Categories {
		x0 := float64(marginL) + slot*float64(i) + slot*0.1
		for j, l := range c.Lines {
			if i >= len(l.Y) || !ya.ok(l.Y[i]) {
				continue
			}
			x, y := x0+barW*float64(j), ya.px(l.Y[i])
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, x, y, barW-2, ya.px(0)-y, palette[j%len(palette)])
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", x+barW/2-1, y-3, tickLabel(l.Y[i]))
		}
		// Category names, two lines when long.
		a, b := name, ""
		if len(name) > 16 {
			if k := strings.LastIndexByte(name[:len(name)/2+4], ' '); k > 0 {
				a, b = name[:k], name[k+1:]
			}
		}
		cx := float64(marginL) + slot*(float64(i)+0.5)
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`, cx, ya.px(0)+13, html.EscapeString(a))
		fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10">%s</text>`+"\n", cx, ya.px(0)+25, html.EscapeString(b))
	}
	for j, l := range c.Lines {
		ly := marginT + 14 + 13*j
		fmt.Fprintf(w, `<rect x="%d" y="%d" width="14" height="9" fill="%s"/>`, marginL+8, ly-9, palette[j%len(palette)])
		fmt.Fprintf(w, `<text x="%d" y="%d">%s</text>`+"\n", marginL+26, ly, html.EscapeString(l.Name))
	}
}
