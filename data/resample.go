package data

import (
	"math"

	"github.com/trainer/trainer/data/resamplesimd"
)

// resampler is resize with reusable buffers and loops shaped for Go's compiler: flat coefficient
// tables, int32 accumulators (as Pillow's own; 255·Σ|k| stays below 2³¹), three channels a pixel
// in the horizontal pass and two to four rows at once in the vertical one. Its bytes equal resize's.
type resampler struct {
	tmp, dst []uint8
	into     []uint8 // when set and large enough, where the output goes instead of dst
	// The last coeffs call's tables: views of tables (a cached table) or of the scratch below.
	starts, counts []int32
	weights        []int32
	tables         coeffCache
	ownStarts      []int32
	ownCounts      []int32
	ownWeights     []int32
	acc            []int32
	k              []float64
	// The AVX2 kernels' tables (resample_simd.go): the horizontal pass's input offsets and
	// split weights, the vertical pass's tap pairs, and a padded copy of a last source row.
	hoffs, hw []int32
	vp        []resamplesimd.Pair
	pad       []uint8
}

// coeffs sets the tables for in -> out samples: for output o, counts[o] weights from input starts[o]
// at weights[o*ks:], with the same float arithmetic as resampleCoeffs. They come from the
// resampler's cache when it has them (a RandomResizedCrop's box sizes recur image after image).
func (r *resampler) coeffs(in, out int, filter Interp) (ks int) {
	if t, ok := r.tables.get(in, out, filter); ok {
		r.starts, r.counts, r.weights = t.starts, t.counts, t.weights
		return t.ks
	}
	scale := float64(in) / float64(out)
	filterScale := max(scale, 1)
	support := filter.support() * filterScale
	ks = int(math.Ceil(support))*2 + 1
	r.ownStarts, r.ownCounts = growInt32(r.ownStarts, out), growInt32(r.ownCounts, out)
	r.ownWeights = growInt32(r.ownWeights, out*ks)
	if cap(r.k) < ks {
		r.k = make([]float64, ks)
	}
	for o := range out {
		lo, taps := pillowTaps(filter, o, scale, support, filterScale, in, r.k)
		fixedWeights(taps, r.ownWeights[o*ks:o*ks+len(taps)])
		r.ownStarts[o], r.ownCounts[o] = int32(lo), int32(len(taps))
	}
	r.starts, r.counts, r.weights = r.ownStarts, r.ownCounts, r.ownWeights
	if t, ok := r.tables.put(in, out, filter, ks, r.ownStarts, r.ownCounts, r.ownWeights); ok {
		r.starts, r.counts, r.weights = t.starts, t.counts, t.weights
	}
	return ks
}

// coeffCache keeps a resampler's coefficient tables by input size, for whichever output size and
// filter first asked for each: recomputing them (a float division per tap, as Pillow's) was 1.4% of
// a training image's CPU. Its memory is allocated once, at the first put, so that a worker does not
// allocate per image; when it is full, further sizes are computed each time.
type coeffCache struct {
	slab []int32      // the cached tables, back to back: starts, counts, weights
	used int          // of slab
	byIn []coeffEntry // by input size
}

// coeffEntry is where the tables for one input size start in the slab; ks 0: none.
type coeffEntry struct {
	off, out, ks int32
	filter       Interp
}

// coeffTable is a cached table's views.
type coeffTable struct {
	ks                      int
	starts, counts, weights []int32
}

const (
	coeffCacheInts  = 1 << 20 // 4 MiB: about 600 tables of 224 outputs from up to 450 inputs
	coeffCacheMaxIn = 4096    // inputs wider or taller are not cached
)

func (c *coeffCache) get(in, out int, filter Interp) (coeffTable, bool) {
	if in >= len(c.byIn) {
		return coeffTable{}, false
	}
	e := c.byIn[in]
	if e.ks == 0 || int(e.out) != out || e.filter != filter {
		return coeffTable{}, false
	}
	return c.table(e), true
}

func (c *coeffCache) table(e coeffEntry) coeffTable {
	off, out, ks := int(e.off), int(e.out), int(e.ks)
	t := c.slab[off : off+out*(2+ks) : off+out*(2+ks)]
	return coeffTable{ks: ks, starts: t[:out:out], counts: t[out : 2*out : 2*out], weights: t[2*out:]}
}

// put copies the tables for (in, out, filter) into the cache, if there is room and no table for in.
func (c *coeffCache) put(in, out int, filter Interp, ks int, starts, counts, weights []int32) (coeffTable, bool) {
	n := out * (2 + ks)
	if in >= coeffCacheMaxIn || n > coeffCacheInts-c.used {
		return coeffTable{}, false
	}
	if c.slab == nil {
		c.slab = make([]int32, coeffCacheInts)
		c.byIn = make([]coeffEntry, coeffCacheMaxIn)
	}
	if c.byIn[in].ks > 0 {
		return coeffTable{}, false
	}
	e := coeffEntry{off: int32(c.used), out: int32(out), ks: int32(ks), filter: filter}
	t := c.table(e)
	copy(t.starts, starts[:out])
	copy(t.counts, counts[:out])
	copy(t.weights, weights[:out*ks])
	c.used += n
	c.byIn[in] = e
	return t, true
}

func growInt32(buf []int32, n int) []int32 {
	if cap(buf) < n {
		return make([]int32, n)
	}
	return buf[:n]
}

// clip32 is clip8 on an int32 accumulator.
func clip32(v int32) uint8 {
	v >>= resamplePrecision
	if uint32(v) > 255 {
		if v < 0 {
			return 0
		}
		return 255
	}
	return uint8(v)
}

const resampleBias = int32(1) << (resamplePrecision - 1)

// resize is resize(src, w, h, filter), then HFlip when flip, into the resampler's buffers (valid
// until the next call). The horizontal pass writes its columns mirrored, so the flip costs nothing.
// With AVX2 (resampleAVX2) the passes run resamplesimd's kernels, same bytes.
func (r *resampler) resize(src pixels, w, h int, filter Interp, flip bool) pixels {
	return r.resizeView(src, src.w*src.c, w, h, filter, flip)
}

// resizeView is resize of an image whose rows are inRow >= src.w·src.c bytes apart in src.pix (a
// box in a larger image: decodeRegionView), read where it lies instead of copied out first.
func (r *resampler) resizeView(src pixels, inRow, w, h int, filter Interp, flip bool) pixels {
	c := src.c
	dst := &r.dst
	if len(r.into) >= w*h*c {
		dst = &r.into
	}
	if w == src.w {
		var out pixels
		if h == src.h {
			*dst = growBytes(*dst, w*h*c)
			out = cropPixels(pixels{w: inRow / c, h: h, c: c, pix: src.pix}, 0, 0, w, h, *dst)
		} else {
			*dst = growBytes(*dst, w*h*c)
			out = pixels{w: w, h: h, c: c, pix: *dst}
			r.vertical(src, inRow, out, filter)
		}
		if flip {
			HFlip(out)
		}
		return out
	}
	if mid, stride, ok := r.horizontalSIMD(src, inRow, w, filter, flip); ok {
		*dst = growBytes(*dst, w*h*c)
		out := pixels{w: w, h: h, c: c, pix: *dst}
		if h == src.h { // no vertical pass: the padded rows packed
			for y := range h {
				copy(out.pix[y*w*c:(y+1)*w*c], mid.pix[y*stride:])
			}
			return out
		}
		r.vertical(mid, stride, out, filter)
		return out
	}
	buf := &r.tmp
	if h == src.h {
		buf = dst
	}
	*buf = growBytes(*buf, w*src.h*c)
	mid := pixels{w: w, h: src.h, c: c, pix: *buf}
	r.horizontal(src, inRow, mid, filter, flip)
	if h == src.h {
		return mid
	}
	*dst = growBytes(*dst, w*h*c)
	out := pixels{w: w, h: h, c: c, pix: *dst}
	r.vertical(mid, w*c, out, filter)
	return out
}

// horizontal resamples each row of src (inRow bytes apart) to mid's width, mirrored when flip. RGB
// goes column by column over blocks of rows, so that a column's tap count and weights stay fixed
// (and in registers) in the inner loop.
func (r *resampler) horizontal(src pixels, inRow int, mid pixels, filter Interp, flip bool) {
	ks := r.coeffs(src.w, mid.w, filter)
	c, w := src.c, mid.w
	starts, counts, weights := r.starts[:w], r.counts[:w], r.weights
	if c == 3 {
		const block = 16
		outRow := w * 3
		for y0 := 0; y0 < src.h; y0 += block {
			y1 := min(y0+block, src.h)
			for x, s := range starts {
				n := int(counts[x])
				ws := weights[x*ks : x*ks+n]
				in := src.pix[y0*inRow+int(s)*3:]
				ox := x
				if flip {
					ox = w - 1 - x
				}
				out := mid.pix[y0*outRow+3*ox:]
				switch n {
				case 2:
					k0, k1 := ws[0], ws[1]
					for y := y0; y < y1; y++ {
						p, o := in[:6:6], out[:3:3]
						o[0] = clip32(resampleBias + int32(p[0])*k0 + int32(p[3])*k1)
						o[1] = clip32(resampleBias + int32(p[1])*k0 + int32(p[4])*k1)
						o[2] = clip32(resampleBias + int32(p[2])*k0 + int32(p[5])*k1)
						if y+1 < y1 {
							in, out = in[inRow:], out[outRow:]
						}
					}
				case 3:
					k0, k1, k2 := ws[0], ws[1], ws[2]
					for y := y0; y < y1; y++ {
						p, o := in[:9:9], out[:3:3]
						o[0] = clip32(resampleBias + int32(p[0])*k0 + int32(p[3])*k1 + int32(p[6])*k2)
						o[1] = clip32(resampleBias + int32(p[1])*k0 + int32(p[4])*k1 + int32(p[7])*k2)
						o[2] = clip32(resampleBias + int32(p[2])*k0 + int32(p[5])*k1 + int32(p[8])*k2)
						if y+1 < y1 {
							in, out = in[inRow:], out[outRow:]
						}
					}
				case 4:
					k0, k1, k2, k3 := ws[0], ws[1], ws[2], ws[3]
					for y := y0; y < y1; y++ {
						p, o := in[:12:12], out[:3:3]
						o[0] = clip32(resampleBias + int32(p[0])*k0 + int32(p[3])*k1 + int32(p[6])*k2 + int32(p[9])*k3)
						o[1] = clip32(resampleBias + int32(p[1])*k0 + int32(p[4])*k1 + int32(p[7])*k2 + int32(p[10])*k3)
						o[2] = clip32(resampleBias + int32(p[2])*k0 + int32(p[5])*k1 + int32(p[8])*k2 + int32(p[11])*k3)
						if y+1 < y1 {
							in, out = in[inRow:], out[outRow:]
						}
					}
				case 5:
					k0, k1, k2, k3, k4 := ws[0], ws[1], ws[2], ws[3], ws[4]
					for y := y0; y < y1; y++ {
						p, o := in[:15:15], out[:3:3]
						o[0] = clip32(resampleBias + int32(p[0])*k0 + int32(p[3])*k1 + int32(p[6])*k2 + int32(p[9])*k3 + int32(p[12])*k4)
						o[1] = clip32(resampleBias + int32(p[1])*k0 + int32(p[4])*k1 + int32(p[7])*k2 + int32(p[10])*k3 + int32(p[13])*k4)
						o[2] = clip32(resampleBias + int32(p[2])*k0 + int32(p[5])*k1 + int32(p[8])*k2 + int32(p[11])*k3 + int32(p[14])*k4)
						if y+1 < y1 {
							in, out = in[inRow:], out[outRow:]
						}
					}
				default:
					// Four taps a step: the trip counts are the same for every row of the block.
					for y := y0; y < y1; y++ {
						p, o := in[:3*n], out[:3:3]
						r0, g0, b0 := resampleBias, resampleBias, resampleBias
						i := 0
						for ; i+4 <= n; i += 4 {
							q, k := p[3*i:3*i+12:3*i+12], ws[i:i+4:i+4]
							r0 += int32(q[0])*k[0] + int32(q[3])*k[1] + int32(q[6])*k[2] + int32(q[9])*k[3]
							g0 += int32(q[1])*k[0] + int32(q[4])*k[1] + int32(q[7])*k[2] + int32(q[10])*k[3]
							b0 += int32(q[2])*k[0] + int32(q[5])*k[1] + int32(q[8])*k[2] + int32(q[11])*k[3]
						}
						for ; i < n; i++ {
							q, k := p[3*i:3*i+3:3*i+3], ws[i]
							r0 += int32(q[0]) * k
							g0 += int32(q[1]) * k
							b0 += int32(q[2]) * k
						}
						o[0], o[1], o[2] = clip32(r0), clip32(g0), clip32(b0)
						if y+1 < y1 {
							in, out = in[inRow:], out[outRow:]
						}
					}
				}
			}
		}
		return
	}
	for y := range src.h {
		in := src.pix[y*inRow : y*inRow+src.w*c]
		out := mid.pix[y*w*c : (y+1)*w*c]
		for x, s := range starts {
			n := int(counts[x])
			ws := weights[x*ks : x*ks+n]
			ox := x
			if flip {
				ox = w - 1 - x
			}
			for ch := range c {
				acc := resampleBias
				for i, k := range ws {
					acc += int32(in[(int(s)+i)*c+ch]) * k
				}
				out[ox*c+ch] = clip32(acc)
			}
		}
	}
}

// vertical resamples the columns of mid (rows stride bytes apart) to out's height, a whole output
// row at a time.
func (r *resampler) vertical(mid pixels, stride int, out pixels, filter Interp) {
	ks := r.coeffs(mid.h, out.h, filter)
	row := out.w * out.c
	if r.verticalSIMD(mid, stride, out, ks) {
		return
	}
	for y := range out.h {
		s, n := int(r.starts[y]), int(r.counts[y])
		ws := r.weights[y*ks : y*ks+n]
		o := out.pix[y*row : (y+1)*row]
		in := func(j int) []uint8 { return mid.pix[(s+j)*stride : (s+j)*stride+row][:len(o)] }
		switch n {
		case 1:
			r0, k0 := in(0), ws[0]
			for i := range o {
				o[i] = clip32(resampleBias + int32(r0[i])*k0)
			}
		case 2:
			r0, r1, k0, k1 := in(0), in(1), ws[0], ws[1]
			for i := range o {
				o[i] = clip32(resampleBias + int32(r0[i])*k0 + int32(r1[i])*k1)
			}
		case 3:
			r0, r1, r2, k0, k1, k2 := in(0), in(1), in(2), ws[0], ws[1], ws[2]
			for i := range o {
				o[i] = clip32(resampleBias + int32(r0[i])*k0 + int32(r1[i])*k1 + int32(r2[i])*k2)
			}
		case 4:
			r0, r1, r2, r3, k0, k1, k2, k3 := in(0), in(1), in(2), in(3), ws[0], ws[1], ws[2], ws[3]
			for i := range o {
				o[i] = clip32(resampleBias + int32(r0[i])*k0 + int32(r1[i])*k1 + int32(r2[i])*k2 + int32(r3[i])*k3)
			}
		case 5:
			r0, r1, r2, r3, r4 := in(0), in(1), in(2), in(3), in(4)
			k0, k1, k2, k3, k4 := ws[0], ws[1], ws[2], ws[3], ws[4]
			for i := range o {
				o[i] = clip32(resampleBias + int32(r0[i])*k0 + int32(r1[i])*k1 + int32(r2[i])*k2 + int32(r3[i])*k3 + int32(r4[i])*k4)
			}
		default:
			// Four rows a pass through an int32 row: the first pass sets it, the last (one to four
			// rows) clips into o.
			acc := growInt32(r.acc, row)[:len(o)]
			r.acc = acc
			r0, r1, r2, r3, k0, k1, k2, k3 := in(0), in(1), in(2), in(3), ws[0], ws[1], ws[2], ws[3]
			for i := range acc {
				acc[i] = resampleBias + int32(r0[i])*k0 + int32(r1[i])*k1 + int32(r2[i])*k2 + int32(r3[i])*k3
			}
			j := 4
			for ; n-j > 4; j += 4 {
				r0, r1, r2, r3, k0, k1, k2, k3 := in(j), in(j+1), in(j+2), in(j+3), ws[j], ws[j+1], ws[j+2], ws[j+3]
				for i := range acc {
					acc[i] += int32(r0[i])*k0 + int32(r1[i])*k1 + int32(r2[i])*k2 + int32(r3[i])*k3
				}
			}
			switch n - j {
			case 1:
				r0, k0 := in(j), ws[j]
				for i := range o {
					o[i] = clip32(acc[i] + int32(r0[i])*k0)
				}
			case 2:
				r0, r1, k0, k1 := in(j), in(j+1), ws[j], ws[j+1]
				for i := range o {
					o[i] = clip32(acc[i] + int32(r0[i])*k0 + int32(r1[i])*k1)
				}
			case 3:
				r0, r1, r2, k0, k1, k2 := in(j), in(j+1), in(j+2), ws[j], ws[j+1], ws[j+2]
				for i := range o {
					o[i] = clip32(acc[i] + int32(r0[i])*k0 + int32(r1[i])*k1 + int32(r2[i])*k2)
				}
			case 4:
				r0, r1, r2, r3, k0, k1, k2, k3 := in(j), in(j+1), in(j+2), in(j+3), ws[j], ws[j+1], ws[j+2], ws[j+3]
				for i := range o {
					o[i] = clip32(acc[i] + int32(r0[i])*k0 + int32(r1[i])*k1 + int32(r2[i])*k2 + int32(r3[i])*k3)
				}
			}
		}
	}
}
