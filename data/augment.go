package data

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
)

// Transform turns one decoded image into a Size×Size×Channels uint8 example: for training a
// RandomResizedCrop (when Scale is set) and a random horizontal flip; for eval (and training without
// Scale) torchvision's Resize(⌊Size/CropPct⌋) + CenterCrop(Size). The loader normalises afterwards.
type Transform struct {
	Size     int // side of the square output
	Channels int // 3 (RGB) or 1 (grey); 0 means 3
	Train    bool
	// Scale and Ratio are RandomResizedCrop's ranges of the crop's area (fraction of the image) and
	// aspect ratio (width/height); Scale {0, 0} disables the crop. torchvision: {0.08, 1}, {3/4, 4/3}.
	Scale, Ratio [2]float64
	Interp       Interp
	// HFlip is the probability of a horizontal flip in training.
	HFlip float64
	// CropPct is the eval center crop's fraction of the resized shorter side; 0 means 1.
	CropPct float64
	// Erasing is applied in training after normalisation (the loader calls it), drawing from the
	// same per-example generator after the crop and flip.
	Erasing RandomErasing
	// RandAugment, when set, runs in training after the crop and flip, before normalisation (as in
	// timm), drawing from the same per-example generator.
	RandAugment *RandAugment
	// AutoAugment, when set, runs where RandAugment does (after the crop and flip, before
	// normalisation, as torchvision), drawing from the same per-example generator. Exclusive with
	// RandAugment.
	AutoAugment *AutoAugment
}

// Validate checks the ranges.
func (t Transform) Validate() error {
	switch {
	case t.Size < 1:
		return fmt.Errorf("transform: size %d, want >= 1", t.Size)
	case t.Channels != 0 && t.Channels != 1 && t.Channels != 3:
		return fmt.Errorf("transform: %d channels, want 1 or 3", t.Channels)
	case t.Scale != [2]float64{} && !(t.Scale[0] > 0 && t.Scale[0] <= t.Scale[1] && t.Scale[1] <= 1):
		return fmt.Errorf("transform: scale %v, want 0 < min <= max <= 1", t.Scale)
	case t.Scale != [2]float64{} && !(t.Ratio[0] > 0 && t.Ratio[0] <= t.Ratio[1]):
		return fmt.Errorf("transform: ratio %v, want 0 < min <= max", t.Ratio)
	case t.HFlip < 0 || t.HFlip > 1:
		return fmt.Errorf("transform: hflip probability %g, want [0, 1]", t.HFlip)
	case t.CropPct < 0 || t.CropPct > 1:
		return fmt.Errorf("transform: crop_pct %g, want (0, 1]", t.CropPct)
	}
	if err := t.Erasing.Validate(); err != nil {
		return fmt.Errorf("transform: %w", err)
	}
	if r := t.RandAugment; r != nil && (r.NumOps < 1 || r.Magnitude < 0 || r.MagnitudeStd < 0) {
		return fmt.Errorf("transform: rand augment %+v, want >= 1 op and magnitude, std >= 0", *r)
	}
	if a := t.AutoAugment; a != nil {
		if err := a.Validate(); err != nil {
			return fmt.Errorf("transform: %w", err)
		}
		if t.RandAugment != nil {
			return fmt.Errorf("transform: rand augment and auto augment are exclusive")
		}
	}
	return nil
}

func (t Transform) channels() int {
	if t.Channels == 0 {
		return 3
	}
	return t.Channels
}

// augScratch holds one worker's reusable buffers.
type augScratch struct {
	read      []byte // encoded bytes from the source
	dec       []uint8
	crop, tmp []uint8
	out       []uint8
	rng       rand.PCG
	ra        raScratch
	rs        resampler // the RandomResizedCrop's
}

// apply transforms src (which may alias scratch buffers other than out) and returns Size×Size pixels
// in sc.out. rng drives the random choices.
func (t Transform) apply(src pixels, rng *rand.PCG, sc *augScratch) (pixels, error) {
	out, err := t.cropFlip(src, rng, sc)
	if err == nil && t.Train {
		t.policy(out, rng, sc)
	}
	return out, err
}

// policy runs RandAugment or AutoAugment, when set, on a training crop after the flip.
func (t Transform) policy(out pixels, rng *rand.PCG, sc *augScratch) {
	if t.RandAugment != nil {
		t.RandAugment.apply(out, rng, &sc.ra)
	}
	if t.AutoAugment != nil {
		t.AutoAugment.apply(out, rng, &sc.ra)
	}
}

// cropFlip is apply's geometry: the (random) crop and flip.
func (t Transform) cropFlip(src pixels, rng *rand.PCG, sc *augScratch) (pixels, error) {
	if t.rrc() {
		x, y, w, h := RandomResizedCropParams(src.w, src.h, t.Scale, t.Ratio, rng)
		crop := cropPixels(src, x, y, w, h, sc.crop)
		sc.crop = crop.pix
		return t.resizeFlip(crop, rng, sc), nil
	}
	out, err := resizeCenterCrop(src, t.Size, t.CropPct, t.Interp, sc)
	if err != nil {
		return pixels{}, err
	}
	if t.Train && t.HFlip > 0 && uniform(rng) < t.HFlip {
		HFlip(out)
	}
	return out, nil
}

// rrc reports whether t is a training RandomResizedCrop.
func (t Transform) rrc() bool { return t.Train && t.Scale != [2]float64{} }

// resizeFlip ends the RandomResizedCrop: crop resized to Size×Size, then the random flip (drawn
// first, done by the resampler: no random draw happens in between, so the sequence is unchanged).
func (t Transform) resizeFlip(crop pixels, rng *rand.PCG, sc *augScratch) pixels {
	flip := t.HFlip > 0 && uniform(rng) < t.HFlip
	return sc.rs.resize(crop, t.Size, t.Size, t.Interp, flip)
}

// decodeApply is decodePixels then apply, with the same random draws. A training RandomResizedCrop
// of a JPEG, when the build decodes with libjpeg-turbo (decodeJPEGRegion), draws its box from the
// header's size and decodes only that box, at the largest DCT-domain reduction that keeps it at
// least Size on both sides (dctDenom). sc.dec holds the decoded pixels. Decoding errors start with
// "decoding: ".
func (t Transform) decodeApply(b []byte, channels int, rng *rand.PCG, sc *augScratch) (pixels, error) {
	if t.rrc() {
		crop, ok, err := decodeJPEGRegion(b, channels, sc.dec, func(w, h int) (x, y, bw, bh, denom int) {
			x, y, bw, bh = RandomResizedCropParams(w, h, t.Scale, t.Ratio, rng)
			return x, y, bw, bh, dctDenom(bw, bh, t.Size)
		})
		if ok {
			if err != nil {
				return pixels{}, fmt.Errorf("decoding: %w", err)
			}
			sc.dec = crop.pix
			out := t.resizeFlip(crop, rng, sc)
			t.policy(out, rng, sc)
			return out, nil
		}
	}
	p, err := decodePixels(b, channels, sc.dec)
	if err != nil {
		return pixels{}, fmt.Errorf("decoding: %w", err)
	}
	sc.dec = p.pix
	return t.apply(p, rng, sc)
}

// dctDenom is the largest JPEG DCT-domain reduction 1/d (d = 1, 2, 4, 8) that keeps a w×h box at
// least size pixels on both sides, so the resampler still only shrinks it (or keeps it).
func dctDenom(w, h, size int) int {
	d := 8
	for d > 1 && (w < size*d || h < size*d) {
		d /= 2
	}
	return d
}

// resizeCenterCrop is torchvision's Resize(⌊size/cropPct⌋) (shorter side; the longer one truncated
// as int(s·long/short)) then CenterCrop(size) with offsets rounded half to even.
func resizeCenterCrop(src pixels, size int, cropPct float64, interp Interp, sc *augScratch) (pixels, error) {
	s := EvalTransform{Size: size, CropPct: cropPct}.ResizeSize()
	w, h := src.w, src.h
	if w <= h {
		w, h = s, int(float64(s)*float64(h)/float64(w))
	} else {
		w, h = int(float64(s)*float64(w)/float64(h)), s
	}
	if size > w || size > h {
		return pixels{}, fmt.Errorf("crop %d larger than the resized %dx%d image", size, w, h)
	}
	resized := resize(src, w, h, interp, &sc.tmp, &sc.crop)
	top := int(math.RoundToEven(float64(h-size) / 2))
	left := int(math.RoundToEven(float64(w-size) / 2))
	out := cropPixels(resized, left, top, size, size, sc.out)
	sc.out = out.pix
	return out, nil
}

// RandomResizedCropParams draws torchvision's RandomResizedCrop box (x, y, w, h) in a width×height
// image: up to 10 tries of an area fraction uniform in scale and a log-uniform aspect ratio in ratio,
// sides rounded to the nearest integer, accepted when the box fits; else the whole image clamped to
// the ratio range, centered.
func RandomResizedCropParams(width, height int, scale, ratio [2]float64, rng *rand.PCG) (x, y, w, h int) {
	area := float64(width * height)
	logLo, logHi := math.Log(ratio[0]), math.Log(ratio[1])
	for range 10 {
		target := area * (scale[0] + (scale[1]-scale[0])*uniform(rng))
		aspect := math.Exp(logLo + (logHi-logLo)*uniform(rng))
		w = int(math.RoundToEven(math.Sqrt(target * aspect)))
		h = int(math.RoundToEven(math.Sqrt(target / aspect)))
		if w > 0 && h > 0 && w <= width && h <= height {
			y = int(boundedUint64(rng, uint64(height-h+1)))
			x = int(boundedUint64(rng, uint64(width-w+1)))
			return x, y, w, h
		}
	}
	in := float64(width) / float64(height)
	switch {
	case in < ratio[0]:
		w = width
		h = int(math.RoundToEven(float64(w) / ratio[0]))
	case in > ratio[1]:
		h = height
		w = int(math.RoundToEven(float64(h) * ratio[1]))
	default:
		w, h = width, height
	}
	return (width - w) / 2, (height - h) / 2, w, h
}

// uniform returns a float64 in [0, 1) from the top 53 bits of one draw (written out so the sequence
// cannot change with the Go version).
func uniform(rng *rand.PCG) float64 { return float64(rng.Uint64()>>11) / (1 << 53) }

// exampleRNG seeds the generator of the example at position pos of epoch's order, so augmentation is a
// pure function of (seed, epoch, pos) whatever worker runs it.
func exampleRNG(rng *rand.PCG, seed uint64, epoch, pos int) {
	s1 := splitmix64(seed ^ 0x5ca1ab1e0ddba11)
	rng.Seed(s1, splitmix64(splitmix64(uint64(epoch)+0x9e3779b97f4a7c15)^uint64(pos)))
}

// cropPixels copies the w×h box at (x, y) of src into buf.
func cropPixels(src pixels, x, y, w, h int, buf []uint8) pixels {
	c := src.c
	out := pixels{w: w, h: h, c: c, pix: growBytes(buf, w*h*c)}
	for r := range h {
		copy(out.pix[r*w*c:(r+1)*w*c], src.pix[((y+r)*src.w+x)*c:])
	}
	return out
}

// HFlip mirrors p left to right in place.
func HFlip(p pixels) {
	c := p.c
	for y := range p.h {
		row := p.pix[y*p.w*c : (y+1)*p.w*c]
		for i, j := 0, p.w-1; i < j; i, j = i+1, j-1 {
			for ch := range c {
				row[i*c+ch], row[j*c+ch] = row[j*c+ch], row[i*c+ch]
			}
		}
	}
}

// decodePixels decodes JPEG or PNG bytes to 8-bit pixels with channels 3 (RGB) or 1 (grey), into buf:
// JPEGs with libjpeg-turbo in builds with the libjpeg tag (see decodeJPEGRegion), the rest with
// image/jpeg and image/png.
func decodePixels(b []byte, channels int, buf []uint8) (pixels, error) {
	if p, ok, err := decodeJPEGRegion(b, channels, buf, nil); ok {
		return p, err
	}
	return decodeStd(b, channels, buf)
}

// decodeStd is decodePixels with Go's decoders only.
func decodeStd(b []byte, channels int, buf []uint8) (pixels, error) {
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return pixels{}, err
	}
	if r := img.Bounds(); r.Dx() < 1 || r.Dy() < 1 {
		return pixels{}, fmt.Errorf("empty image")
	}
	return toPixelsInto(img, channels, buf), nil
}

// toPixelsInto is toPixels with fast paths for the decoders' usual outputs (JPEG's YCbCr and Gray,
// PNG's NRGBA, RGBA without transparency); every path gives the same bytes as the generic one.
func toPixelsInto(img image.Image, channels int, buf []uint8) pixels {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	p := pixels{w: w, h: h, c: channels, pix: growBytes(buf, w*h*channels)}
	put := func(i int, r, g, bl uint8) {
		if channels == 1 {
			p.pix[i] = uint8((19595*uint32(r) + 38470*uint32(g) + 7471*uint32(bl) + 1<<15) >> 16)
			return
		}
		p.pix[3*i], p.pix[3*i+1], p.pix[3*i+2] = r, g, bl
	}
	switch m := img.(type) {
	case *image.YCbCr:
		// Chroma subsampling as shifts, so the chroma offset costs no call per pixel (image.COffset).
		hs, vs := -1, -1
		switch m.SubsampleRatio {
		case image.YCbCrSubsampleRatio444:
			hs, vs = 0, 0
		case image.YCbCrSubsampleRatio422:
			hs, vs = 1, 0
		case image.YCbCrSubsampleRatio420:
			hs, vs = 1, 1
		case image.YCbCrSubsampleRatio440:
			hs, vs = 0, 1
		}
		if hs < 0 {
			break
		}
		for y := range h {
			py, px0 := b.Min.Y+y, b.Min.X
			yrow := m.Y[(py-m.Rect.Min.Y)*m.YStride-m.Rect.Min.X+px0:]
			crow := (py>>vs-m.Rect.Min.Y>>vs)*m.CStride - m.Rect.Min.X>>hs
			for x := range w {
				ci := crow + (px0+x)>>hs
				r, g, bl := color.YCbCrToRGB(yrow[x], m.Cb[ci], m.Cr[ci])
				put(y*w+x, r, g, bl)
			}
		}
		return p
	case *image.Gray:
		for y := range h {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := range w {
				v := row[x]
				if channels == 1 {
					p.pix[y*w+x] = v
				} else {
					put(y*w+x, v, v, v)
				}
			}
		}
		return p
	case *image.NRGBA:
		for y := range h {
			row := m.Pix[m.PixOffset(b.Min.X, b.Min.Y+y):]
			for x := range w {
				put(y*w+x, row[4*x], row[4*x+1], row[4*x+2])
			}
		}
		return p
	}
	generic := toPixels(img, channels)
	copy(p.pix, generic.pix)
	return p
}

// resampler is resize with reusable buffers and loops shaped for Go's compiler: flat coefficient
// tables, int32 accumulators (as Pillow's own; 255·Σ|k| stays below 2³¹), three channels a pixel
// in the horizontal pass and two to four rows at once in the vertical one. Its bytes equal resize's.
type resampler struct {
	tmp, dst       []uint8
	starts, counts []int32
	weights        []int32
	acc            []int32
	k              []float64
}

// coeffs fills the tables for in -> out samples: for output o, counts[o] weights from input starts[o]
// at weights[o*ks:], with the same float arithmetic as resampleCoeffs.
func (r *resampler) coeffs(in, out int, filter Interp) (ks int) {
	scale := float64(in) / float64(out)
	filterScale := max(scale, 1)
	support := filter.support() * filterScale
	ks = int(math.Ceil(support))*2 + 1
	r.starts, r.counts = growInt32(r.starts, out), growInt32(r.counts, out)
	r.weights = growInt32(r.weights, out*ks)
	if cap(r.k) < ks {
		r.k = make([]float64, ks)
	}
	for o := range out {
		center := (float64(o) + 0.5) * scale
		lo := max(int(center-support+0.5), 0)
		hi := min(int(center+support+0.5), in)
		k := r.k[:0]
		var sum float64
		for i := lo; i < hi; i++ {
			v := filter.weight((float64(i) - center + 0.5) / filterScale)
			k = append(k, v)
			sum += v
		}
		w := r.weights[o*ks : o*ks+len(k)]
		for i := range k {
			if sum != 0 {
				k[i] /= sum
			}
			if k[i] < 0 {
				w[i] = int32(-0.5 + k[i]*(1<<resamplePrecision))
			} else {
				w[i] = int32(0.5 + k[i]*(1<<resamplePrecision))
			}
		}
		r.starts[o], r.counts[o] = int32(lo), int32(len(k))
	}
	return ks
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
func (r *resampler) resize(src pixels, w, h int, filter Interp, flip bool) pixels {
	c := src.c
	if w == src.w {
		var out pixels
		if h == src.h {
			r.dst = append(r.dst[:0], src.pix...)
			out = pixels{w: w, h: h, c: c, pix: r.dst}
		} else {
			r.dst = growBytes(r.dst, w*h*c)
			out = pixels{w: w, h: h, c: c, pix: r.dst}
			r.vertical(src, out, filter)
		}
		if flip {
			HFlip(out)
		}
		return out
	}
	buf := &r.tmp
	if h == src.h {
		buf = &r.dst
	}
	*buf = growBytes(*buf, w*src.h*c)
	mid := pixels{w: w, h: src.h, c: c, pix: *buf}
	r.horizontal(src, mid, filter, flip)
	if h == src.h {
		return mid
	}
	r.dst = growBytes(r.dst, w*h*c)
	out := pixels{w: w, h: h, c: c, pix: r.dst}
	r.vertical(mid, out, filter)
	return out
}

// horizontal resamples each row of src to mid's width, mirrored when flip. RGB goes column by column
// over blocks of rows, so that a column's tap count and weights stay fixed (and in registers) in the
// inner loop.
func (r *resampler) horizontal(src, mid pixels, filter Interp, flip bool) {
	ks := r.coeffs(src.w, mid.w, filter)
	c, w := src.c, mid.w
	starts, counts, weights := r.starts[:w], r.counts[:w], r.weights
	if c == 3 {
		const block = 16
		inRow, outRow := src.w*3, w*3
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
		in := src.pix[y*src.w*c : (y+1)*src.w*c]
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

// vertical resamples the columns of mid to out's height, a whole output row at a time.
func (r *resampler) vertical(mid, out pixels, filter Interp) {
	ks := r.coeffs(mid.h, out.h, filter)
	row := out.w * out.c
	for y := range out.h {
		s, n := int(r.starts[y]), int(r.counts[y])
		ws := r.weights[y*ks : y*ks+n]
		o := out.pix[y*row : (y+1)*row]
		in := func(j int) []uint8 { return mid.pix[(s+j)*row : (s+j+1)*row][:len(o)] }
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
