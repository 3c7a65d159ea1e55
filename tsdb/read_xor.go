package tsdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// This file decodes the TSDB's float chunks (the "XOR" encoding of
// Gorilla, as the Prometheus TSDB stores it) straight into a column, one
// tight loop per chunk instead of an iterator call per sample. It is
// written from the chunk format:
//
//   - 2 bytes, big-endian: the number of samples;
//   - the first sample: its time as a signed varint, its value as 64 raw
//     bits (big-endian);
//   - the second sample: the time delta from the first as an unsigned
//     varint, then its value XOR-coded (below);
//   - every later sample: the delta of the time delta, then the value
//     XOR-coded. The delta of delta dod is coded as '0' for 0; '10' and
//     14 bits, '110' and 17 bits, '1110' and 20 bits for a dod that fits
//     that width (two's complement, the largest positive value
//     included); '1111' and 64 bits otherwise;
//   - a value: XOR with the previous value's bits. '0' when equal; '10'
//     and the meaningful bits within the previous window of leading and
//     trailing zeros when they fit in it; '11', 5 bits of leading zeros, 6
//     bits of meaningful-bit count (0 meaning 64) and those bits
//     otherwise, setting a new window.
//
// Bits are written from the most significant end of each byte, and
// everything after the header is one bit stream.

var errXORTruncated = errors.New("xor chunk ends before its last sample")

// xorReader reads a bit stream from the most significant bit of each
// byte. w holds the next bits left-aligned; n of them are loaded. Bits of
// w past n are either zero or the stream's own next bits.
type xorReader struct {
	b   []byte
	pos int // next byte of b to load into w
	w   uint64
	n   uint
}

// fill loads bytes until at least 56 bits are loaded or b is exhausted.
func (r *xorReader) fill() {
	if r.pos+8 <= len(r.b) {
		r.w |= binary.BigEndian.Uint64(r.b[r.pos:]) >> r.n
		k := (63 - r.n) >> 3
		r.pos += int(k)
		r.n += k << 3
		return
	}
	for r.n <= 56 && r.pos < len(r.b) {
		r.w |= uint64(r.b[r.pos]) << (56 - r.n)
		r.pos++
		r.n += 8
	}
}

// take consumes k <= 56 bits, known to be loaded, and returns them.
func (r *xorReader) take(k uint) uint64 {
	v := r.w >> (64 - k) // 0 when k is 0: Go shifts by 64 give 0
	r.w <<= k
	r.n -= k
	return v
}

// need makes sure k <= 56 bits are loaded, or reports that the stream
// has fewer.
func (r *xorReader) need(k uint) bool {
	if r.n < k {
		r.fill()
	}
	return r.n >= k
}

// xorSamples reads the sample count of an XOR chunk's bytes.
func xorSamples(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(b))
}

// decodeXOR decodes the samples of the XOR chunk b into ts and vs, which
// must hold at least xorSamples(b) samples, and returns how many it wrote.
// Samples are written as stored: non-finite values included.
func decodeXOR(b []byte, ts []int64, vs []float64) (int, error) {
	if len(b) < 2 {
		return 0, fmt.Errorf("xor chunk of %d bytes has no header", len(b))
	}
	total := xorSamples(b)
	if total == 0 {
		return 0, nil
	}
	if len(ts) < total || len(vs) < total {
		return 0, fmt.Errorf("xor chunk of %d samples decoded into %d slots", total, min(len(ts), len(vs)))
	}
	ts, vs = ts[:total], vs[:total]
	p := b[2:]
	t, k := binary.Varint(p)
	if k <= 0 || len(p) < k+8 {
		return 0, errXORTruncated
	}
	p = p[k:]
	vb := binary.BigEndian.Uint64(p)
	p = p[8:]
	ts[0], vs[0] = t, math.Float64frombits(vb)
	if total == 1 {
		return 1, nil
	}
	d, k := binary.Uvarint(p)
	if k <= 0 {
		return 0, errXORTruncated
	}
	delta := int64(d)
	t += delta
	r := xorReader{b: p[k:]}
	var lead, trail uint // the current window; none before the first
	if vb, lead, trail, k = r.value(vb, 0xff, 0); k != 0 {
		return 0, errXORTruncated
	}
	ts[1], vs[1] = t, math.Float64frombits(vb)
	for i := 2; i < total; i++ {
		// The hot loop: bits are taken straight from r.w, which holds at
		// least 56 loaded bits after fill unless the stream ends.
		if r.n < 56 {
			r.fill()
		}
		if r.n == 0 {
			return i, errXORTruncated
		}
		if r.w>>63 != 0 {
			var dod int64
			switch ones := bits.LeadingZeros64(^r.w); {
			case ones == 1 && r.n >= 2+14:
				dod = signed(r.w<<2>>(64-14), 14)
				r.w <<= 2 + 14
				r.n -= 2 + 14
			case ones == 2 && r.n >= 3+17:
				dod = signed(r.w<<3>>(64-17), 17)
				r.w <<= 3 + 17
				r.n -= 3 + 17
			case ones == 3 && r.n >= 4+20:
				dod = signed(r.w<<4>>(64-20), 20)
				r.w <<= 4 + 20
				r.n -= 4 + 20
			case ones >= 4 && r.n >= 4+32:
				r.take(4)
				hi := r.take(32)
				if !r.need(32) {
					return i, errXORTruncated
				}
				dod = int64(hi<<32 | r.take(32))
			default:
				return i, errXORTruncated
			}
			delta += dod
		} else {
			r.w <<= 1
			r.n--
		}
		t += delta
		ts[i] = t
		// The value.
		if r.n < 13 {
			r.fill()
		}
		if r.n == 0 {
			return i, errXORTruncated
		}
		if r.w>>63 == 0 {
			r.w <<= 1
			r.n--
			vs[i] = math.Float64frombits(vb)
			continue
		}
		if r.w>>62 == 0b11 {
			if r.n < 13 {
				return i, errXORTruncated
			}
			lead = uint(r.w >> 57 & 31)
			sig := uint(r.w >> 51 & 63)
			if sig == 0 {
				sig = 64
			}
			if lead+sig > 64 {
				return i, errXORTruncated
			}
			trail = 64 - lead - sig
			r.w <<= 13
			r.n -= 13
		} else {
			if r.n < 2 || lead == 0xff {
				return i, errXORTruncated
			}
			r.w <<= 2
			r.n -= 2
		}
		sig := 64 - lead - trail
		if r.n < sig {
			r.fill()
		}
		var m uint64
		if r.n >= sig {
			m = r.w >> (64 - sig)
			r.w <<= sig
			r.n -= sig
		} else {
			// Over 56 meaningful bits: in two takes.
			if !r.need(sig - 32) {
				return i, errXORTruncated
			}
			m = r.take(sig-32) << 32
			if !r.need(32) {
				return i, errXORTruncated
			}
			m |= r.take(32)
		}
		vb ^= m << trail
		vs[i] = math.Float64frombits(vb)
	}
	return total, nil
}

// signed reads the low sz bits of v as a dod of that bucket: values above
// half the range are negative.
func signed(v uint64, sz uint) int64 {
	if v > 1<<(sz-1) {
		return int64(v) - 1<<sz
	}
	return int64(v)
}

// value reads one XOR-coded value following the value bits prev under
// the window lead, trail (lead 0xff: none yet) and returns its bits and
// the window after it; bad is non-zero when the stream ends first.
func (r *xorReader) value(prev uint64, lead, trail uint) (vb uint64, l, t uint, bad int) {
	if !r.need(1) {
		return 0, 0, 0, 1
	}
	if r.w>>63 == 0 {
		r.take(1)
		return prev, lead, trail, 0
	}
	if !r.need(2) {
		return 0, 0, 0, 1
	}
	if r.take(2) == 0b11 {
		if !r.need(11) {
			return 0, 0, 0, 1
		}
		lead = uint(r.take(5))
		sig := uint(r.take(6))
		if sig == 0 {
			sig = 64
		}
		if lead+sig > 64 {
			return 0, 0, 0, 1
		}
		trail = 64 - lead - sig
	} else if lead == 0xff {
		return 0, 0, 0, 1 // a value reusing a window before any was set
	}
	sig := 64 - lead - trail
	var m uint64
	if sig > 56 {
		if !r.need(sig - 32) {
			return 0, 0, 0, 1
		}
		m = r.take(sig-32) << 32
		sig = 32
	}
	if !r.need(sig) {
		return 0, 0, 0, 1
	}
	m |= r.take(sig)
	return prev ^ m<<trail, lead, trail, 0
}
