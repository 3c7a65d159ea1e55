package downsample

// isFinite reports whether v is neither NaN nor ±Inf: v-v is NaN for both.
func isFinite(v float64) bool { return v-v == 0 }

// finiteBounds returns the indices of the first and last finite values of
// vs, or -1, -1 if there are none.
func finiteBounds(vs []float64) (lo, hi int) {
	lo = -1
	for i, v := range vs {
		if isFinite(v) {
			lo = i
			break
		}
	}
	if lo < 0 {
		return -1, -1
	}
	hi = lo
	for i := len(vs) - 1; i > lo; i-- {
		if isFinite(vs[i]) {
			hi = i
			break
		}
	}
	return lo, hi
}

// appendFinite appends off+i for every finite vs[i].
func appendFinite(dst []int, vs []float64, off int) []int {
	for i, v := range vs {
		if isFinite(v) {
			dst = append(dst, off+i)
		}
	}
	return dst
}

// clampSmall handles the cases every algorithm shares: it reports done=true
// with the final result when n <= 0, n >= len(vs), there is at most one
// finite sample, n < minN, or n is at least the span between the first and
// last finite samples. Otherwise it returns the first and last finite
// indices and done=false.
func clampSmall(dst []int, vs []float64, n, minN int) (out []int, lo, hi int, done bool) {
	if n <= 0 {
		return dst, -1, -1, true
	}
	if n >= len(vs) {
		return appendFinite(dst, vs, 0), -1, -1, true
	}
	lo, hi = finiteBounds(vs)
	switch {
	case lo < 0:
		return dst, -1, -1, true
	case n == 1 || lo == hi:
		return append(dst, lo), -1, -1, true
	case n >= hi-lo+1:
		return appendFinite(dst, vs[lo:hi+1], lo), -1, -1, true
	case n < minN:
		return append(dst, lo, hi), -1, -1, true
	}
	return dst, lo, hi, false
}
