package data

import "github.com/trainer/trainer/data/resamplesimd"

// resampleAVX2 turns on the AVX2 kernels of resamplesimd for the resampler's passes and the
// loader's normalisation (same bytes and floats as the Go code). A variable so that tests can
// compare both paths.
var resampleAVX2 = resamplesimd.Available()

// The tables below put every output's split weights where the kernels want them (the layouts are
// documented with resamplesimd.Horizontal and Vertical); they are rebuilt per resize, a few µs.

// hMaxPairs bounds the horizontal kernel's taps (2 per pair): beyond it (a shrink of more than 8×
// bicubic, 16× bilinear) the tables grow past the caches and the Go pass runs instead.
const hMaxPairs = 16

// horizontalSIMD is horizontal for RGB rows inRow bytes apart with the AVX2 kernel, into r.tmp
// with rows stride bytes apart (stride >= 3·w, padded for the kernel's 8-pixel stores). The
// kernel's reads past a row's own bytes (the next row's, or a wider image's) meet zero weights.
// ok is false, and nothing done,
// when the kernel does not apply (no AVX2, not RGB, too many taps). The table puts output j's
// coefficients at position j, those of w-1-j when flip, so the kernel writes the mirror image;
// the pixels past w in the last group get zero weights (their bytes land in the padding).
func (r *resampler) horizontalSIMD(src pixels, inRow, w int, filter Interp, flip bool) (mid pixels, stride int, ok bool) {
	if !resampleAVX2 || src.c != 3 {
		return pixels{}, 0, false
	}
	ks := r.coeffs(src.w, w, filter)
	maxCount, maxStart := 0, 0
	for x := range w {
		maxCount = max(maxCount, int(r.counts[x]))
		maxStart = max(maxStart, int(r.starts[x]))
	}
	pairs := (maxCount + 1) / 2
	if pairs > hMaxPairs || pairs < 1 {
		return pixels{}, 0, false
	}
	groups := (w + 7) / 8
	r.hoffs = growInt32(r.hoffs, groups*8)
	r.hw = growInt32(r.hw, groups*4*pairs*16)
	for g := range groups {
		for q := range 4 {
			for lane := range 2 {
				j := 8*g + 4*lane + q // output position
				x := j
				if flip {
					x = w - 1 - j
				}
				var s, n int
				var ws []int32
				if j < w {
					s, n = int(r.starts[x]), int(r.counts[x])
					ws = r.weights[x*ks : x*ks+n]
				}
				r.hoffs[g*8+2*q+lane] = int32(3 * s)
				for t := range pairs {
					var k0, k1 int32
					if 2*t < n {
						k0 = ws[2*t]
					}
					if 2*t+1 < n {
						k1 = ws[2*t+1]
					}
					lo, hi := resamplesimd.SplitWeights(k0, k1)
					e := r.hw[((g*4+q)*pairs+t)*16+4*lane:]
					e[0], e[1], e[2], e[3] = lo, lo, lo, lo
					e[8], e[9], e[10], e[11] = hi, hi, hi, hi
				}
			}
		}
	}
	// The kernel writes 24 bytes a group and 4 of junk after a row's last; it reads 16 bytes per 4 taps.
	stride = 24*groups + 8
	need := 3*maxStart + 12*((pairs+1)/2-1) + 16
	r.tmp = growBytes(r.tmp, src.h*stride)
	mid = pixels{w: w, h: src.h, c: 3, pix: r.tmp}
	safe := 0 // rows whose reads stay inside src.pix
	if len(src.pix) >= need {
		safe = min((len(src.pix)-need)/inRow+1, src.h)
	}
	if safe > 0 {
		resamplesimd.Horizontal(mid.pix, stride, src.pix, inRow, safe, r.hoffs, r.hw, groups, pairs)
	}
	if safe < src.h {
		r.pad = growBytes(r.pad, max(need, 3*src.w))
		for y := safe; y < src.h; y++ {
			clear(r.pad[copy(r.pad, src.pix[y*inRow:y*inRow+3*src.w]):])
			resamplesimd.Horizontal(mid.pix[y*stride:], stride, r.pad, inRow, 1, r.hoffs, r.hw, groups, pairs)
		}
	}
	return mid, stride, true
}

// verticalSIMD is vertical's loop with the AVX2 kernel (32 output bytes at a time, any channel
// count), after vertical's coeffs(mid.h, out.h) gave ks; false when it does not apply.
func (r *resampler) verticalSIMD(mid pixels, stride int, out pixels, ks int) bool {
	row := out.w * out.c
	if !resampleAVX2 || row < 32 {
		return false
	}
	for y := range out.h {
		s, n := int(r.starts[y]), int(r.counts[y])
		ws := r.weights[y*ks : y*ks+n]
		np := (n + 1) / 2
		if cap(r.vp) < np {
			r.vp = make([]resamplesimd.Pair, np)
		}
		vp := r.vp[:np]
		for t := range vp {
			a := int64((s + 2*t) * stride)
			b, k1 := a, int32(0)
			if 2*t+1 < n {
				b, k1 = a+int64(stride), ws[2*t+1]
			}
			lo, hi := resamplesimd.SplitWeights(ws[2*t], k1)
			vp[t] = resamplesimd.Pair{A: a, B: b, Lo: lo, Hi: hi}
		}
		o := out.pix[y*row : (y+1)*row]
		if np == 0 {
			clear(o) // no taps: Pillow's bias alone, 0
			continue
		}
		resamplesimd.Vertical(o, mid.pix, vp)
	}
	return true
}

// normalizer is the loader's normalisation, (v/255 - mean[ch]) / std[ch] in float32: as the
// table lut[ch][v] (NormalizeTable's floats) for the Go loop, and as the per-channel constants for
// the AVX2 kernels, which compute the same floats (simd, nil where they do not apply).
type normalizer struct {
	lut       [][256]float32
	mean, std []float32
	simd      *resamplesimd.Normalizer
}

// newNormalizer is NormalizeTable's normalisation for c channels, table is NormalizeTable's result.
func newNormalizer(mean, std, table []float32, c int) normalizer {
	n := normalizer{lut: make([][256]float32, c), mean: make([]float32, c), std: make([]float32, c)}
	for i, v := range table {
		n.lut[i%c][i/c] = v
	}
	if len(mean) == 0 && len(std) == 0 {
		mean, std = []float32{0}, []float32{1}
	}
	for ch := range c {
		n.mean[ch], n.std[ch] = mean[min(ch, len(mean)-1)], std[min(ch, len(std)-1)]
	}
	n.simd, _ = resamplesimd.NewNormalizer(n.mean, n.std)
	return n
}

// normalizeInto writes the normalised value of each byte v of pix (channel ch = index mod
// channels) into dst: with AVX2 resamplesimd's Normalizer (the arithmetic 8 values a step, streaming
// stores); else the table lookup, the RGB loop written for Go's compiler: the three tables in
// registers, four pixels a step through fixed-size subslices (no bounds check inside).
func normalizeInto(dst []float32, pix []uint8, n normalizer) {
	if resampleAVX2 && n.simd != nil {
		n.simd.Apply(dst, pix)
		return
	}
	lut := n.lut
	dst = dst[:len(pix)]
	switch len(lut) {
	case 1:
		l0 := &lut[0]
		for j, v := range pix {
			dst[j] = l0[v]
		}
	case 3:
		l0, l1, l2 := &lut[0], &lut[1], &lut[2]
		j := 0
		for ; j+12 <= len(pix); j += 12 {
			s, d := pix[j:j+12:j+12], dst[j:j+12:j+12]
			d[0], d[1], d[2] = l0[s[0]], l1[s[1]], l2[s[2]]
			d[3], d[4], d[5] = l0[s[3]], l1[s[4]], l2[s[5]]
			d[6], d[7], d[8] = l0[s[6]], l1[s[7]], l2[s[8]]
			d[9], d[10], d[11] = l0[s[9]], l1[s[10]], l2[s[11]]
		}
		for ; j+3 <= len(pix); j += 3 {
			s, d := pix[j:j+3:j+3], dst[j:j+3:j+3]
			d[0], d[1], d[2] = l0[s[0]], l1[s[1]], l2[s[2]]
		}
	default:
		c := len(lut)
		for j, v := range pix {
			dst[j] = lut[j%c][v]
		}
	}
}
