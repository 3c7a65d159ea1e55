package fidelity

// SSIM window and constants (Wang, Bovik, Sheikh and Simoncelli, 2004) for
// images with values in [0, 1]: dynamic range L = 1, K1 = 0.01, K2 = 0.03.
const (
	window = 8
	c1     = 0.01 * 0.01
	c2     = 0.03 * 0.03
)

// DSSIM returns the structural dissimilarity (1 - SSIM)/2 of two binary
// images of w x h pixels, line pixels (true) being black (0) on white (1),
// with SSIM the mean over every 8x8 window (stride 1, uniform weights).
// Summed-area tables make it O(w*h). Images smaller than a window compare
// as one window.
func DSSIM(a, b []bool, w, h int) float64 {
	win := min(window, w, h)
	if win == 0 {
		return 0
	}
	// Summed-area tables of x, y, x², y², xy with a zero row and column.
	// For binary pixels x² = x, so three tables suffice.
	stride := w + 1
	sa := make([]float64, stride*(h+1))
	sb := make([]float64, stride*(h+1))
	sab := make([]float64, stride*(h+1))
	for y := range h {
		var ra, rb, rab float64
		for x := range w {
			pa, pb := pixel(a[y*w+x]), pixel(b[y*w+x])
			ra += pa
			rb += pb
			rab += pa * pb
			i := (y+1)*stride + x + 1
			sa[i] = sa[i-stride] + ra
			sb[i] = sb[i-stride] + rb
			sab[i] = sab[i-stride] + rab
		}
	}
	box := func(s []float64, x, y int) float64 {
		return s[(y+win)*stride+x+win] - s[y*stride+x+win] - s[(y+win)*stride+x] + s[y*stride+x]
	}
	n := float64(win * win)
	var total float64
	windows := 0
	for y := 0; y+win <= h; y++ {
		for x := 0; x+win <= w; x++ {
			ma, mb := box(sa, x, y)/n, box(sb, x, y)/n
			// Sample (n-1) variances, as the reference implementation.
			va := (box(sa, x, y) - n*ma*ma) / (n - 1)
			vb := (box(sb, x, y) - n*mb*mb) / (n - 1)
			cov := (box(sab, x, y) - n*ma*mb) / (n - 1)
			total += (2*ma*mb + c1) * (2*cov + c2) / ((ma*ma + mb*mb + c1) * (va + vb + c2))
			windows++
		}
	}
	return (1 - total/float64(windows)) / 2
}

// pixel is the intensity of a pixel: a line pixel is black.
func pixel(on bool) float64 {
	if on {
		return 0
	}
	return 1
}
