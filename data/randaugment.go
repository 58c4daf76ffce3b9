package data

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/trainer/trainer/internal/echo"
)

// RandAugment is timm's rand_augment_transform: NumOps ops drawn with replacement from its op list
// (the "increasing" list when Increasing), each applied with probability 0.5 at magnitude Magnitude
// of 10 (MagnitudeStd > 0: drawn from N(Magnitude, MagnitudeStd); +Inf: uniform in [0, Magnitude];
// clipped to [0, 10]). Signed ops (rotate, shear, translate, the increasing enhancements) take a
// random sign. Geometric ops resample with Interpolation and fill with timm's img_mean (ImageNet's mean).
type RandAugment struct {
	Magnitude    float64
	NumOps       int
	MagnitudeStd float64
	Increasing   bool
	// Interpolation is the resampling of the geometric ops (rotate, shear, translate), as the one timm's
	// RandAugment is given: RABilinear (the zero value), RABicubic, or RARandom, a fresh choice of the two
	// for each op applied (timm's default when the train interpolation is "random").
	Interpolation RAInterpolation
}

// RAInterpolation is a RandAugment resampling.
type RAInterpolation int

// The RandAugment resamplings, in the order of RAInterpolations.
const (
	RABilinear RAInterpolation = iota
	RABicubic
	RARandom
)

// RAInterpolations are the names ParseRAInterpolation reads, indexed by RAInterpolation.
var RAInterpolations = []string{"bilinear", "bicubic", "random"}

// ParseRAInterpolation reads a RandAugment resampling by name; empty is bilinear.
func ParseRAInterpolation(s string) (RAInterpolation, error) {
	if s == "" {
		return RABilinear, nil
	}
	for i, name := range RAInterpolations {
		if s == name {
			return RAInterpolation(i), nil
		}
	}
	return 0, fmt.Errorf("rand augment interpolation %s: want %s", echo.Quote(s), strings.Join(RAInterpolations, ", "))
}

// bicubic says whether the next geometric op resamples bicubically (drawing the choice under RARandom).
func (r RandAugment) bicubic(rng *rand.PCG) bool {
	switch r.Interpolation {
	case RABicubic:
		return true
	case RARandom:
		return uniform(rng) < 0.5
	}
	return false
}

// RandAugmentGrammar is what ParseRandAugment accepts, for error messages.
const RandAugmentGrammar = "rand-m{M}[-n{N}][-mstd{S}][-inc{0|1}] (timm's; defaults n2, mstd0, inc0)"

// randFill is timm's fill colour: round(255·ImageNet mean).
var randFill = [3]uint8{124, 116, 104}

// ParseRandAugment reads a timm config string such as "rand-m9-mstd0.5-inc1". Sections after
// "rand" may come in any order; m defaults to 10 as in timm. mstd above 100 means uniform sampling.
func ParseRandAugment(s string) (RandAugment, error) {
	r := RandAugment{Magnitude: 10, NumOps: 2}
	parts := strings.Split(s, "-")
	if parts[0] != "rand" {
		return r, fmt.Errorf("rand augment %s: want %s", echo.Quote(s), RandAugmentGrammar)
	}
	for _, p := range parts[1:] {
		i := strings.IndexAny(p, "0123456789")
		if i <= 0 {
			return r, fmt.Errorf("rand augment %s: section %s, want %s", echo.Quote(s), echo.Quote(p), RandAugmentGrammar)
		}
		key, val := p[:i], p[i:]
		var err error
		switch key {
		case "m":
			var m int
			m, err = strconv.Atoi(val)
			if err == nil && (m < 0 || m > 10) {
				err = fmt.Errorf("magnitude %d outside [0, 10]", m)
			}
			r.Magnitude = float64(m)
		case "n":
			r.NumOps, err = strconv.Atoi(val)
			if err == nil && (r.NumOps < 1 || r.NumOps > 15) {
				err = fmt.Errorf("%d ops, want 1..15", r.NumOps)
			}
		case "mstd":
			r.MagnitudeStd, err = strconv.ParseFloat(val, 64)
			if err == nil && (r.MagnitudeStd < 0 || math.IsNaN(r.MagnitudeStd)) {
				err = fmt.Errorf("mstd %g < 0", r.MagnitudeStd)
			}
			if r.MagnitudeStd > 100 {
				r.MagnitudeStd = math.Inf(1)
			}
		case "inc":
			switch val {
			case "0":
				r.Increasing = false
			case "1":
				r.Increasing = true
			default:
				err = fmt.Errorf("inc%s, want inc0 or inc1", echo.Cut(val))
			}
		default:
			err = fmt.Errorf("unknown section %s", echo.Quote(key))
		}
		if err != nil {
			return r, fmt.Errorf("rand augment %s: %v; want %s", echo.Quote(s), err, RandAugmentGrammar)
		}
	}
	return r, nil
}

// raOp names timm's ops.
type raOp int

const (
	opAutoContrast raOp = iota
	opEqualize
	opInvert
	opRotate
	opPosterize
	opSolarize
	opSolarizeAdd
	opColor
	opContrast
	opBrightness
	opSharpness
	opShearX
	opShearY
	opTranslateXRel
	opTranslateYRel
	numRAOps
)

// raScratch is the buffer of the geometric ops.
type raScratch struct{ buf []uint8 }

// apply runs the ops on p in place.
func (r RandAugment) apply(p pixels, rng *rand.PCG, sc *raScratch) {
	r.draw(rng, func(op raOp, level float64) { r.applyOp(op, level, p, rng, sc) })
}

// draw makes timm's draws: the op of every layer first (np.random.choice, with replacement), then
// per op the probability 0.5 and the magnitude, calling do with the op and its level in [0, 1] (do
// draws the sign, as timm's level functions do).
func (r RandAugment) draw(rng *rand.PCG, do func(op raOp, level float64)) {
	var ops [15]raOp
	n := min(r.NumOps, len(ops))
	for i := range n {
		ops[i] = raOp(boundedUint64(rng, uint64(numRAOps)))
	}
	for _, op := range ops[:n] {
		if uniform(rng) > 0.5 {
			continue
		}
		m := r.Magnitude
		switch {
		case math.IsInf(r.MagnitudeStd, 1):
			m = uniform(rng) * r.Magnitude
		case r.MagnitudeStd > 0:
			m = r.Magnitude + r.MagnitudeStd*normal(rng)
		}
		do(op, max(0, min(m, 10))/10)
	}
}

// signed negates v with probability 0.5 (timm's _randomly_negate).
func signed(v float64, rng *rand.PCG) float64 {
	if uniform(rng) > 0.5 {
		return -v
	}
	return v
}

// applyOp maps the level in [0, 1] to the op's argument as timm's LEVEL_TO_ARG does.
func (r RandAugment) applyOp(op raOp, level float64, p pixels, rng *rand.PCG, sc *raScratch) {
	enhance := func() float64 {
		if r.Increasing {
			return max(0.1, 1+signed(level*0.9, rng))
		}
		return level*1.8 + 0.1
	}
	switch op {
	case opAutoContrast:
		AutoContrast(p)
	case opEqualize:
		Equalize(p)
	case opInvert:
		Invert(p)
	case opRotate:
		deg := signed(level*30, rng)
		rotate(p, deg, r.bicubic(rng), sc)
	case opPosterize:
		bits := int(level * 4)
		if r.Increasing {
			bits = 4 - bits
		}
		Posterize(p, bits)
	case opSolarize:
		t := int(level * 256)
		if r.Increasing {
			t = 256 - t
		}
		Solarize(p, t)
	case opSolarizeAdd:
		SolarizeAdd(p, int(level*110), 128)
	case opColor:
		Color(p, enhance())
	case opContrast:
		Contrast(p, enhance())
	case opBrightness:
		Brightness(p, enhance())
	case opSharpness:
		Sharpness(p, enhance(), sc)
	case opShearX:
		m := [6]float64{1, signed(level*0.3, rng), 0, 0, 1, 0}
		affineWith(p, m, r.bicubic(rng), sc)
	case opShearY:
		m := [6]float64{1, 0, 0, signed(level*0.3, rng), 1, 0}
		affineWith(p, m, r.bicubic(rng), sc)
	case opTranslateXRel:
		m := [6]float64{1, 0, signed(level*0.45, rng) * float64(p.w), 0, 1, 0}
		affineWith(p, m, r.bicubic(rng), sc)
	case opTranslateYRel:
		m := [6]float64{1, 0, 0, 0, 1, signed(level*0.45, rng) * float64(p.h)}
		affineWith(p, m, r.bicubic(rng), sc)
	}
}

// applyLUT maps every value of channel ch through lut[ch].
func applyLUT(p pixels, lut [][256]uint8) {
	for i, v := range p.pix {
		p.pix[i] = lut[i%p.c][v]
	}
}

// histograms counts each channel's values.
func histograms(p pixels) [][256]int {
	h := make([][256]int, p.c)
	for i, v := range p.pix {
		h[i%p.c][v]++
	}
	return h
}

// AutoContrast stretches each channel to [0, 255] (PIL's ImageOps.autocontrast, cutoff 0).
func AutoContrast(p pixels) {
	hist := histograms(p)
	lut := make([][256]uint8, p.c)
	for c, h := range hist {
		lo, hi := 0, 255
		for lo < 255 && h[lo] == 0 {
			lo++
		}
		for hi > 0 && h[hi] == 0 {
			hi--
		}
		for i := range 256 {
			lut[c][i] = uint8(i)
			if hi > lo {
				scale := 255 / float64(hi-lo)
				lut[c][i] = uint8(max(0, min(255, int(float64(i)*scale-float64(lo)*scale))))
			}
		}
	}
	applyLUT(p, lut)
}

// Equalize flattens each channel's histogram (PIL's ImageOps.equalize).
func Equalize(p pixels) {
	hist := histograms(p)
	lut := make([][256]uint8, p.c)
	for c, h := range hist {
		var total, last, used int
		for _, n := range h {
			if n > 0 {
				total += n
				last = n
				used++
			}
		}
		step := 0
		if used > 1 {
			step = (total - last) / 255
		}
		n := step / 2
		for i := range 256 {
			lut[c][i] = uint8(i)
			if step > 0 {
				lut[c][i] = uint8(min(255, n/step))
				n += h[i]
			}
		}
	}
	applyLUT(p, lut)
}

// Invert maps v to 255-v.
func Invert(p pixels) {
	for i, v := range p.pix {
		p.pix[i] = 255 - v
	}
}

// Posterize keeps the bits most significant bits (8 or more: unchanged, 0: black).
func Posterize(p pixels, bits int) {
	if bits >= 8 {
		return
	}
	mask := ^uint8(1<<(8-max(bits, 0)) - 1)
	for i, v := range p.pix {
		p.pix[i] = v & mask
	}
}

// Solarize inverts the values >= thresh (256: none).
func Solarize(p pixels, thresh int) {
	for i, v := range p.pix {
		if int(v) >= thresh {
			p.pix[i] = 255 - v
		}
	}
}

// SolarizeAdd adds add (saturating) to the values below thresh.
func SolarizeAdd(p pixels, add, thresh int) {
	for i, v := range p.pix {
		if int(v) < thresh {
			p.pix[i] = uint8(min(255, int(v)+add))
		}
	}
}

// blendInto is PIL's Image.blend(degenerate, img, factor) written into img: float32 arithmetic,
// truncated and clipped.
func blendInto(img []uint8, degenerate func(i int) uint8, factor float64) {
	f := float32(factor)
	for i, v := range img {
		d := float32(degenerate(i))
		t := d + f*(float32(v)-d)
		switch {
		case t <= 0:
			img[i] = 0
		case t >= 255:
			img[i] = 255
		default:
			img[i] = uint8(t)
		}
	}
}

// luma is PIL's RGB to L conversion.
func luma(r, g, b uint8) uint8 {
	return uint8((19595*uint32(r) + 38470*uint32(g) + 7471*uint32(b) + 1<<15) >> 16)
}

// Color blends with the grey version (factor 0: grey, 1: unchanged); grey images are unchanged.
func Color(p pixels, factor float64) {
	if p.c != 3 {
		return
	}
	grey := make([]uint8, p.w*p.h)
	for i := range grey {
		grey[i] = luma(p.pix[3*i], p.pix[3*i+1], p.pix[3*i+2])
	}
	blendInto(p.pix, func(i int) uint8 { return grey[i/3] }, factor)
}

// Contrast blends with the mean grey level, rounded (PIL's ImageEnhance.Contrast).
func Contrast(p pixels, factor float64) {
	var sum, n float64
	for i := 0; i < len(p.pix); i += p.c {
		v := p.pix[i]
		if p.c == 3 {
			v = luma(p.pix[i], p.pix[i+1], p.pix[i+2])
		}
		sum += float64(v)
		n++
	}
	mean := uint8(int(sum/n + 0.5))
	blendInto(p.pix, func(int) uint8 { return mean }, factor)
}

// Brightness blends with black.
func Brightness(p pixels, factor float64) {
	blendInto(p.pix, func(int) uint8 { return 0 }, factor)
}

// Sharpness blends with PIL's SMOOTH filter (3×3 kernel 1 1 1 / 1 5 1 / 1 1 1 over 13, rounded; the
// border rows and columns are the image's own).
func Sharpness(p pixels, factor float64, sc *raScratch) {
	sc.buf = growBytes(sc.buf, len(p.pix))
	smooth := sc.buf
	copy(smooth, p.pix)
	c := p.c
	for y := 1; y < p.h-1; y++ {
		for x := 1; x < p.w-1; x++ {
			for ch := range c {
				s := 4 * int(p.pix[(y*p.w+x)*c+ch])
				for dy := -1; dy <= 1; dy++ {
					for dx := -1; dx <= 1; dx++ {
						s += int(p.pix[((y+dy)*p.w+x+dx)*c+ch])
					}
				}
				smooth[(y*p.w+x)*c+ch] = uint8((s + 6) / 13)
			}
		}
	}
	blendInto(p.pix, func(i int) uint8 { return smooth[i] }, factor)
}

// Rotate turns p by degrees counter-clockwise about its centre (PIL's rotate, expand off, bilinear,
// timm's fill).
func Rotate(p pixels, degrees float64, sc *raScratch) { rotate(p, degrees, false, sc) }

// rotate is Rotate, resampling bicubically when bicubic is set.
func rotate(p pixels, degrees float64, bicubic bool, sc *raScratch) {
	if m, copied := rotation(p, degrees, sc); !copied {
		affineWith(p, m, bicubic, sc)
	}
}

// degToRad is CPython's math.radians factor: π rounded to float64, then divided (Go would otherwise
// divide the exact π).
const degToRad = float64(math.Pi) / 180

// rotation is PIL's Image.rotate (expand off, about the centre) up to the resampling. Pillow copies
// instead of resampling for 0° and 180° (and 90°/270° on square images): rotation does the copy and
// reports true. Otherwise it returns the inverse matrix Pillow hands to Image.transform, computed as
// Pillow does (angle mod 360, entries rounded to 15 decimals) so that nearest-neighbour sampling
// picks the same pixels.
func rotation(p pixels, degrees float64, sc *raScratch) (m [6]float64, copied bool) {
	a := math.Mod(degrees, 360) // Python's % 360.0 takes the divisor's sign
	if a < 0 {
		a += 360
	}
	switch {
	case (a == 90 || a == 270) && p.w == p.h:
		sc.buf = growBytes(sc.buf, len(p.pix))
		out, n, c := sc.buf, p.w, p.c
		for y := range n {
			for x := range n {
				sx, sy := n-1-y, x // 90° counter-clockwise
				if a == 270 {
					sx, sy = y, n-1-x
				}
				copy(out[(y*n+x)*c:(y*n+x+1)*c], p.pix[(sy*n+sx)*c:(sy*n+sx+1)*c])
			}
		}
		copy(p.pix, out)
		return m, true
	case a == 0:
		return m, true
	case a == 180:
		c := p.c
		n := p.w * p.h
		for i := range n / 2 {
			j := n - 1 - i
			for ch := range c {
				p.pix[i*c+ch], p.pix[j*c+ch] = p.pix[j*c+ch], p.pix[i*c+ch]
			}
		}
		return m, true
	}
	rad := -(a * degToRad)
	cos, sin, nsin := round15(math.Cos(rad)), round15(math.Sin(rad)), round15(-math.Sin(rad))
	cx, cy := float64(p.w)/2, float64(p.h)/2
	// Python's a·x + b·y + c, each product rounded (the conversions forbid fused multiply-adds).
	m = [6]float64{cos, sin, float64(cos*-cx) + float64(sin*-cy) + cx, nsin, cos, float64(nsin*-cx) + float64(cos*-cy) + cy}
	return m, false
}

// round15 is Python's round(x, 15): the decimal rounding of x's exact value, read back.
func round15(x float64) float64 {
	var buf [40]byte
	v, _ := strconv.ParseFloat(string(strconv.AppendFloat(buf[:0], x, 'f', 15, 64)), 64)
	return v
}

// affine is PIL's Image.transform(AFFINE, m, BILINEAR) with timm's fill colour.
func affine(p pixels, m [6]float64, sc *raScratch) { affineWith(p, m, false, sc) }

// affineWith is PIL's Image.transform(AFFINE, m, BICUBIC when bicubic else BILINEAR) with timm's fill colour.
func affineWith(p pixels, m [6]float64, bicubic bool, sc *raScratch) {
	fill := randFill[:]
	if p.c == 1 {
		fill = []uint8{luma(randFill[0], randFill[1], randFill[2])}
	}
	if bicubic {
		affineBicubic(p, m, fill, sc)
		return
	}
	affineBilinear(p, m, fill, sc)
}

// affineBilinear is PIL's Image.transform(AFFINE, m, BILINEAR, fillcolor=fill): output pixel centre
// (x, y) reads the input at (m0·x + m1·y + m2, m3·x + m4·y + m5), bilinearly with edge clamping and
// truncated to 8 bits as Pillow does; points outside the input get fill (one value per channel).
func affineBilinear(p pixels, m [6]float64, fill []uint8, sc *raScratch) {
	sc.buf = growBytes(sc.buf, len(p.pix))
	out := sc.buf
	c := p.c
	at := func(x, y, ch int) float64 {
		x, y = max(0, min(x, p.w-1)), max(0, min(y, p.h-1))
		return float64(p.pix[(y*p.w+x)*c+ch])
	}
	for y := range p.h {
		for x := range p.w {
			o := out[(y*p.w+x)*c : (y*p.w+x+1)*c]
			xo, yo := float64(x)+0.5, float64(y)+0.5
			xi := m[0]*xo + m[1]*yo + m[2]
			yi := m[3]*xo + m[4]*yo + m[5]
			if xi < 0 || xi >= float64(p.w) || yi < 0 || yi >= float64(p.h) {
				copy(o, fill)
				continue
			}
			xi, yi = xi-0.5, yi-0.5
			x0, y0 := math.Floor(xi), math.Floor(yi)
			dx, dy := xi-x0, yi-y0
			ix, iy := int(x0), int(y0)
			for ch := range c {
				top := at(ix, iy, ch) + dx*(at(ix+1, iy, ch)-at(ix, iy, ch))
				bot := at(ix, iy+1, ch) + dx*(at(ix+1, iy+1, ch)-at(ix, iy+1, ch))
				v := top + dy*(bot-top)
				o[ch] = uint8(max(0, min(255, v)))
			}
		}
	}
	copy(p.pix, out)
}

// affineBicubic is PIL's Image.transform(AFFINE, m, BICUBIC, fillcolor=fill): output pixel centre (x, y)
// reads the input at the mapped point as affineBilinear does, through Pillow's 4×4 cubic convolution
// with a = −1 (its Geometry.c: v = p1 + d(p2 + d(p3 + d·p4)) with p1 = v2, p2 = v3 − v1,
// p3 = 2(v1 − v2) + v3 − v4, p4 = v2 − v1 + v4 − v3), columns clamped to the edge, the first row clamped
// and a missing later row repeating the one above, the result clamped to [0, 255] and truncated.
func affineBicubic(p pixels, m [6]float64, fill []uint8, sc *raScratch) {
	sc.buf = growBytes(sc.buf, len(p.pix))
	out := sc.buf
	c := p.c
	cubic := func(v1, v2, v3, v4, d float64) float64 {
		p2 := -v1 + v3
		p3 := 2*(v1-v2) + v3 - v4
		p4 := -v1 + v2 - v3 + v4
		return v2 + d*(p2+d*(p3+d*p4))
	}
	var cols [4]int
	for y := range p.h {
		for x := range p.w {
			o := out[(y*p.w+x)*c : (y*p.w+x+1)*c]
			xo, yo := float64(x)+0.5, float64(y)+0.5
			xi := m[0]*xo + m[1]*yo + m[2]
			yi := m[3]*xo + m[4]*yo + m[5]
			if xi < 0 || xi >= float64(p.w) || yi < 0 || yi >= float64(p.h) {
				copy(o, fill)
				continue
			}
			xi, yi = xi-0.5, yi-0.5
			x0, y0 := math.Floor(xi), math.Floor(yi)
			dx, dy := xi-x0, yi-y0
			ix, iy := int(x0)-1, int(y0)-1
			for k := range cols {
				cols[k] = max(0, min(ix+k, p.w-1))
			}
			for ch := range c {
				row := func(r int) float64 {
					base := r * p.w * c
					return cubic(float64(p.pix[base+cols[0]*c+ch]), float64(p.pix[base+cols[1]*c+ch]),
						float64(p.pix[base+cols[2]*c+ch]), float64(p.pix[base+cols[3]*c+ch]), dx)
				}
				var v [4]float64
				v[0] = row(max(0, min(iy, p.h-1)))
				for k := 1; k < 4; k++ {
					if r := iy + k; r >= 0 && r < p.h {
						v[k] = row(r)
					} else {
						v[k] = v[k-1]
					}
				}
				o[ch] = uint8(max(0, min(255, cubic(v[0], v[1], v[2], v[3], dy))))
			}
		}
	}
	copy(p.pix, out)
}
