package data

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/trainer/trainer/internal/echo"
)

// AutoAugment is torchvision's AutoAugment (torchvision 0.14, transforms/autoaugment.py) on PIL
// images: per example one of the policy's sub-policies, drawn uniformly, whose two steps each run
// with their probability at their magnitude bin of torchvision's 10-bin op space (a random sign for
// the signed ops). Geometric ops fill with black (torchvision's fill=None) and sample with the nearest
// neighbour, AutoAugment's default, or bilinearly when Bilinear is set (torchvision's
// references/classification/train.py passes its --interpolation, bilinear by default).
type AutoAugment struct {
	Policy   string
	Bilinear bool
}

// AutoAugmentPolicies is what ParseAutoAugment accepts, for error messages.
const AutoAugmentPolicies = `"imagenet" (torchvision's AutoAugmentPolicy.IMAGENET)`

// ParseAutoAugment reads a policy name. timm's "original" lists the same 25 sub-policies but maps
// the magnitudes its own way (rotate 9 → 27° not 30°, color 0 → factor 0.1 not 1, posterize 8 → 7
// bits not 4, unsigned enhancements, mean-colour fill), so it is not an alias.
func ParseAutoAugment(s string) (AutoAugment, error) {
	if _, ok := aaPolicies[s]; !ok {
		return AutoAugment{}, fmt.Errorf("auto augment %s: want %s", echo.Quote(s), AutoAugmentPolicies)
	}
	return AutoAugment{Policy: s}, nil
}

// Validate checks the policy name (apply panics on an unknown one).
func (a AutoAugment) Validate() error {
	_, err := ParseAutoAugment(a.Policy)
	return err
}

// aaOp is an op of torchvision's AutoAugment op space (_augmentation_space).
type aaOp int8

const (
	aaShearX aaOp = iota
	aaShearY
	aaTranslateX
	aaTranslateY
	aaRotate
	aaBrightness
	aaColor
	aaContrast
	aaSharpness
	aaPosterize
	aaSolarize
	aaAutoContrast
	aaEqualize
	aaInvert
	numAAOps
)

var aaOpNames = [numAAOps]string{"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
	"Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert"}

func (o aaOp) String() string { return aaOpNames[o] }

// signed reports whether the op's magnitude takes a random sign.
func (o aaOp) signed() bool { return o <= aaSharpness }

// aaStep is one step of a sub-policy: op, probability and magnitude bin (-1: the op has none).
type aaStep struct {
	op   aaOp
	prob float64
	bin  int8
}

// aaImageNet is AutoAugmentPolicy.IMAGENET, in torchvision's order.
var aaImageNet = [][2]aaStep{
	{{aaPosterize, 0.4, 8}, {aaRotate, 0.6, 9}},
	{{aaSolarize, 0.6, 5}, {aaAutoContrast, 0.6, -1}},
	{{aaEqualize, 0.8, -1}, {aaEqualize, 0.6, -1}},
	{{aaPosterize, 0.6, 7}, {aaPosterize, 0.6, 6}},
	{{aaEqualize, 0.4, -1}, {aaSolarize, 0.2, 4}},
	{{aaEqualize, 0.4, -1}, {aaRotate, 0.8, 8}},
	{{aaSolarize, 0.6, 3}, {aaEqualize, 0.6, -1}},
	{{aaPosterize, 0.8, 5}, {aaEqualize, 1.0, -1}},
	{{aaRotate, 0.2, 3}, {aaSolarize, 0.6, 8}},
	{{aaEqualize, 0.6, -1}, {aaPosterize, 0.4, 6}},
	{{aaRotate, 0.8, 8}, {aaColor, 0.4, 0}},
	{{aaRotate, 0.4, 9}, {aaEqualize, 0.6, -1}},
	{{aaEqualize, 0.0, -1}, {aaEqualize, 0.8, -1}},
	{{aaInvert, 0.6, -1}, {aaEqualize, 1.0, -1}},
	{{aaColor, 0.6, 4}, {aaContrast, 1.0, 8}},
	{{aaRotate, 0.8, 8}, {aaColor, 1.0, 2}},
	{{aaColor, 0.8, 8}, {aaSolarize, 0.8, 7}},
	{{aaSharpness, 0.4, 7}, {aaInvert, 0.6, -1}},
	{{aaShearX, 0.6, 5}, {aaEqualize, 1.0, -1}},
	{{aaColor, 0.4, 0}, {aaEqualize, 0.6, -1}},
	{{aaEqualize, 0.4, -1}, {aaSolarize, 0.2, 4}},
	{{aaSolarize, 0.6, 5}, {aaAutoContrast, 0.6, -1}},
	{{aaInvert, 0.6, -1}, {aaEqualize, 1.0, -1}},
	{{aaColor, 0.6, 4}, {aaContrast, 1.0, 8}},
	{{aaEqualize, 0.8, -1}, {aaEqualize, 0.6, -1}},
}

var aaPolicies = map[string][][2]aaStep{"imagenet": aaImageNet}

// aaDraws is one example's random choices, made in the order of torchvision's get_params: the
// sub-policy, each step's probability draw (the step runs when draw <= its probability), each step's
// sign (neg: torchvision's signs[i] == 0). torchvision draws float32 and compares in float32; the
// float64 draws here move each step's probability by under 3e-8.
type aaDraws struct {
	sub   int
	probs [2]float64
	neg   [2]bool
}

func drawAA(rng *rand.PCG, n int) aaDraws {
	d := aaDraws{sub: int(boundedUint64(rng, uint64(n)))}
	d.probs[0], d.probs[1] = uniform(rng), uniform(rng)
	d.neg[0], d.neg[1] = uniform(rng) < 0.5, uniform(rng) < 0.5
	return d
}

// apply runs one sub-policy on p in place. It makes the same draws whatever the image and whichever
// steps run, so the generator's state afterwards does not depend on the image. It panics on a policy
// Validate rejects.
func (a AutoAugment) apply(p pixels, rng *rand.PCG, sc *raScratch) {
	pol, ok := aaPolicies[a.Policy]
	if !ok {
		panic(fmt.Sprintf("auto augment %q: want %s", a.Policy, AutoAugmentPolicies))
	}
	d := drawAA(rng, len(pol))
	for i, st := range pol[d.sub] {
		if d.probs[i] > st.prob {
			continue
		}
		mag := 0.0
		if st.bin >= 0 {
			mag = aaMagnitude(st.op, int(st.bin), p.w, p.h)
		}
		if d.neg[i] && st.op.signed() {
			mag = -mag
		}
		a.applyOp(st.op, mag, p, sc)
	}
}

// aaMagnitude is bin's magnitude of op for a w×h image, as torchvision's _augmentation_space(10,
// (h, w)) makes it: float32 linspaces read back as float64.
func aaMagnitude(op aaOp, bin, w, h int) float64 {
	switch op {
	case aaShearX, aaShearY:
		return float64(linspace32(0, 0.3, bin))
	case aaTranslateX:
		return float64(linspace32(0, float32(150.0/331.0*float64(w)), bin))
	case aaTranslateY:
		return float64(linspace32(0, float32(150.0/331.0*float64(h)), bin))
	case aaRotate:
		return float64(linspace32(0, 30, bin))
	case aaBrightness, aaColor, aaContrast, aaSharpness:
		return float64(linspace32(0, 0.9, bin))
	case aaPosterize:
		// 8 - (arange(10) / 2.25).round(): no ties, so no half-to-even question.
		return float64([10]int{8, 8, 7, 7, 6, 6, 5, 5, 4, 4}[bin])
	case aaSolarize:
		return float64(linspace32(255, 0, bin))
	}
	return 0
}

// linspace32 is element i of torch.linspace(start, end, 10) in float32 as PyTorch 1.13's CPU kernel
// gives it on an AVX2 machine: start + step·i for the first half, end - step·(9-i) for the second,
// each a fused multiply-add (the AVX2 build of the kernel contracts them), so rounded once. The
// float64 arithmetic below is exact, which makes the float32 conversion that single rounding.
func linspace32(start, end float32, i int) float32 {
	const n = 10
	step := float64((end - start) / (n - 1))
	if i < n/2 {
		return float32(float64(start) + step*float64(i))
	}
	return float32(float64(end) - step*float64(n-1-i))
}

// applyOp is torchvision's _apply_op on a PIL image (magnitude already signed).
func (a AutoAugment) applyOp(op aaOp, mag float64, p pixels, sc *raScratch) {
	switch op {
	case aaShearX, aaShearY, aaTranslateX, aaTranslateY, aaRotate:
		if m, copied := aaGeometry(op, mag, p, sc); !copied {
			a.affine(p, m, sc)
		}
	case aaBrightness:
		Brightness(p, 1+mag)
	case aaColor:
		Color(p, 1+mag)
	case aaContrast:
		Contrast(p, 1+mag)
	case aaSharpness:
		Sharpness(p, 1+mag, sc)
	case aaPosterize:
		Posterize(p, int(mag))
	case aaSolarize:
		// PIL inverts the values >= the float threshold.
		Solarize(p, int(math.Ceil(mag)))
	case aaAutoContrast:
		AutoContrast(p)
	case aaEqualize:
		Equalize(p)
	case aaInvert:
		Invert(p)
	}
}

// radToDeg is CPython's math.degrees factor (180 over π rounded to float64).
const radToDeg = 180 / float64(math.Pi)

// aaGeometry is the inverse affine matrix a geometric op hands to PIL's Image.transform for p, or
// copied where Pillow's rotate copies instead (p is then already turned).
func aaGeometry(op aaOp, mag float64, p pixels, sc *raScratch) (m [6]float64, copied bool) {
	cx, cy := float64(p.w)*0.5, float64(p.h)*0.5
	switch op {
	case aaShearX: // F.affine(shear=[degrees(atan(mag)), 0], center=[0, 0])
		return tvAffineMatrix(0, 0, 0, 0, math.Atan(mag)*radToDeg, 0), false
	case aaShearY:
		return tvAffineMatrix(0, 0, 0, 0, 0, math.Atan(mag)*radToDeg), false
	case aaTranslateX: // F.affine(translate=[int(mag), 0]) about the centre
		return tvAffineMatrix(cx, cy, float64(int(mag)), 0, 0, 0), false
	case aaTranslateY:
		return tvAffineMatrix(cx, cy, 0, float64(int(mag)), 0, 0), false
	case aaRotate:
		return rotation(p, mag, sc)
	}
	panic(fmt.Sprintf("auto augment: %v is not geometric", op))
}

// tvAffineMatrix is torchvision's _get_inverse_affine_matrix for angle 0 and scale 1 (what F.affine
// hands to PIL): about (cx, cy), translated by (tx, ty), sheared by (shx, shy) degrees. Written with
// Python's operation order so the float64 results agree.
func tvAffineMatrix(cx, cy, tx, ty, shx, shy float64) [6]float64 {
	rot := 0.0
	sx, sy := shx*degToRad, shy*degToRad
	a := math.Cos(rot-sy) / math.Cos(sy)
	b := -math.Cos(rot-sy)*math.Tan(sx)/math.Cos(sy) - math.Sin(rot)
	c := math.Sin(rot-sy) / math.Cos(sy)
	d := -math.Sin(rot-sy)*math.Tan(sx)/math.Cos(sy) + math.Cos(rot)
	m := [6]float64{d, -b, 0, -c, a, 0}
	m[2] += float64(m[0]*(-cx-tx)) + float64(m[1]*(-cy-ty))
	m[5] += float64(m[3]*(-cx-tx)) + float64(m[4]*(-cy-ty))
	m[2] += cx
	m[5] += cy
	return m
}

// affine resamples with torchvision's black fill.
func (a AutoAugment) affine(p pixels, m [6]float64, sc *raScratch) {
	if a.Bilinear {
		var black [3]uint8
		affineBilinear(p, m, black[:p.c], sc)
		return
	}
	affineNearest(p, m, sc)
}

// affineNearest is PIL's Image.transform(AFFINE, m, NEAREST, fillcolor=0): output pixel (x, y) copies
// the input pixel under (m0·(x+½) + m1·(y+½) + m2, m3·(x+½) + m4·(y+½) + m5), truncated; outside
// the input it is black. Pillow has three code paths that round differently and are followed here:
// a float loop for pure scaling and translation (ImagingScaleAffine), 16.16 fixed point when every
// corner maps within ±32768 (affine_fixed), and an accumulating float loop otherwise.
func affineNearest(p pixels, m [6]float64, sc *raScratch) {
	sc.buf = growBytes(sc.buf, len(p.pix))
	out := sc.buf
	clear(out)
	w, h, c := p.w, p.h, p.c
	put := func(x, y, xi, yi int) {
		copy(out[(y*w+x)*c:(y*w+x+1)*c], p.pix[(yi*w+xi)*c:(yi*w+xi+1)*c])
	}
	// Pillow's COORD(v) is -1 below 0, else int(v): inside exactly when 0 <= v < size.
	inside := func(v float64, size int) bool { return v >= 0 && v < float64(size) }
	fits := func(x, y float64) bool {
		return math.Abs(float64(x*m[0])+float64(y*m[1])+m[2]) < 32768 &&
			math.Abs(float64(x*m[3])+float64(y*m[4])+m[5]) < 32768
	}
	fw, fh := float64(w), float64(h)
	switch {
	case m[1] == 0 && m[3] == 0:
		yo := m[5] + m[4]*0.5
		for y := range h {
			if inside(yo, h) {
				xo := m[2] + m[0]*0.5
				for x := range w {
					if inside(xo, w) {
						put(x, y, int(xo), int(yo))
					}
					xo += m[0]
				}
			}
			yo += m[4]
		}
	case fits(0, 0) && fits(fw, fh) && fits(0, fh) && fits(fw, 0):
		fix := func(v float64) int32 { return int32(math.Floor(v*65536 + 0.5)) }
		a0, a1, a3, a4 := fix(m[0]), fix(m[1]), fix(m[3]), fix(m[4])
		a2 := fix(m[2] + m[0]*0.5 + m[1]*0.5)
		a5 := fix(m[5] + m[3]*0.5 + m[4]*0.5)
		for y := range h {
			xx, yy := a2, a5
			for x := range w {
				if xi, yi := int(xx>>16), int(yy>>16); xi >= 0 && xi < w && yi >= 0 && yi < h {
					put(x, y, xi, yi)
				}
				xx += a0
				yy += a3
			}
			a2 += a1
			a5 += a4
		}
	default:
		xo := m[2] + m[1]*0.5 + m[0]*0.5
		yo := m[5] + m[4]*0.5 + m[3]*0.5
		for y := range h {
			xx, yy := xo, yo
			for x := range w {
				if inside(xx, w) && inside(yy, h) {
					put(x, y, int(xx), int(yy))
				}
				xx += m[0]
				yy += m[3]
			}
			xo += m[1]
			yo += m[4]
		}
	}
	copy(p.pix, out)
}
