package data

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"time"
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
	// MaxPixels bounds what the eval resize makes of an image (and its intermediate), as the loader's
	// MaxImagePixels bounds what is decoded; 0 means DefaultMaxImagePixels.
	MaxPixels int64
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
	// FastDecode decodes training JPEGs with libjpeg-turbo's fast integer IDCT and chroma upsampling
	// by repetition: faster, and no longer Pillow's pixels (data.fast_decode).
	FastDecode bool
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
	case !(t.CropPct >= 0 && t.CropPct <= 1):
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
	turbo     *turboDecoder
	noTurbo   bool      // no decompressor could be made: do not retry per image
	yieldEach bool      // yield between images decoded with turbo, yieldEvery apart (Loader.fill)
	lastYield time.Time // when this worker last yielded
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
		return t.resizeFlip(crop, crop.w*crop.c, rng, sc), nil
	}
	out, err := resizeCenterCrop(src, t.Size, t.CropPct, t.MaxPixels, t.Interp, sc)
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

// resizeFlip ends the RandomResizedCrop: crop (rows inRow bytes apart) resized to Size×Size, then
// the random flip (drawn first, done by the resampler: no random draw happens in between, so the
// sequence is unchanged).
func (t Transform) resizeFlip(crop pixels, inRow int, rng *rand.PCG, sc *augScratch) pixels {
	flip := t.HFlip > 0 && uniform(rng) < t.HFlip
	return sc.rs.resizeView(crop, inRow, t.Size, t.Size, t.Interp, flip)
}

// decodeApply is decodePixels then apply, with the same random draws. A training RandomResizedCrop
// of a JPEG, when libjpeg-turbo is loaded (decodeRegion), draws its box from the header's size and
// decodes the image at the largest DCT-domain reduction that keeps the box at least Size on both
// sides (dctDenom). sc.dec holds the decoded pixels. Decoding errors start with "decoding: " and are
// bad records (ErrBadRecord); maxPixels is decodePixels'.
func (t Transform) decodeApply(b []byte, channels int, maxPixels int64, rng *rand.PCG, sc *augScratch) (pixels, error) {
	d := sc.jpegDecoder()
	if t.rrc() {
		flags := 0
		if t.FastDecode {
			flags = fastDecodeFlags
		}
		crop, stride, view, ok, err := d.decodeRegionView(b, channels, sc.dec, maxPixels, flags, func(w, h int) (x, y, bw, bh, denom int) {
			x, y, bw, bh = RandomResizedCropParams(w, h, t.Scale, t.Ratio, rng)
			return x, y, bw, bh, dctDenom(bw, bh, t.Size)
		})
		if ok {
			if err != nil {
				return pixels{}, fmt.Errorf("decoding: %w", badRecord(err))
			}
			if !view {
				sc.dec = crop.pix // a view is in the decoder's own buffer, not to be handed back as sc.dec
			}
			out := t.resizeFlip(crop, stride, rng, sc)
			t.policy(out, rng, sc)
			return out, nil
		}
	}
	p, ok, err := d.decodeRegion(b, channels, sc.dec, maxPixels, 0, nil)
	if !ok {
		p, err = decodeStd(b, channels, sc.dec, maxPixels)
	}
	if err != nil {
		return pixels{}, fmt.Errorf("decoding: %w", badRecord(err))
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
// as int(s·long/short)) then CenterCrop(size) with offsets rounded half to even; the resize is
// bounded by maxPixels (resizedSize), a bad record past it.
func resizeCenterCrop(src pixels, size int, cropPct float64, maxPixels int64, interp Interp, sc *augScratch) (pixels, error) {
	w, h, err := resizedSize(src.w, src.h, EvalTransform{Size: size, CropPct: cropPct}.resizeSide(), maxPixels)
	if err != nil {
		return pixels{}, badRecord(err)
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
// JPEGs with libjpeg-turbo where it is installed (see decodeRegion), the rest with
// image/jpeg and image/png. An image whose header declares more than maxPixels pixels (0:
// DefaultMaxImagePixels) is refused before it is decoded. Every error is a bad record (ErrBadRecord).
func decodePixels(b []byte, channels int, buf []uint8, maxPixels int64) (pixels, error) {
	if p, ok, err := decodeJPEGRegion(b, channels, buf, maxPixels, nil); ok {
		return p, badRecord(err)
	}
	p, err := decodeStd(b, channels, buf, maxPixels)
	return p, badRecord(err)
}

// decodeStd is decodePixels with Go's decoders only.
func decodeStd(b []byte, channels int, buf []uint8, maxPixels int64) (pixels, error) {
	img, _, err := DecodeImage(b, maxPixels)
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
