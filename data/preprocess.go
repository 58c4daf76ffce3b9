package data

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // registers the JPEG decoder for image.Decode
	_ "image/png"  // registers the PNG decoder for image.Decode
	"math"
	"os"

	"github.com/trainer/trainer/internal/bounded"
	"github.com/trainer/trainer/internal/echo"
)

// Eval preprocessing of single images, as the references evaluate: torchvision's
// Resize(⌊size/crop_pct⌋) + CenterCrop(size) + ToTensor + Normalize(mean, std) on a PIL image. The
// values (each net's mean, std, crop fraction and filter) live with the net in the graphs registry.

// EvalTransform turns a decoded image into one normalised HWC float32 example.
type EvalTransform struct {
	// Size is the side of the square output (224).
	Size int
	// CropPct is the fraction of the resized shorter side that the center crop keeps (0.875: resize to
	// 256, crop 224); 1 resizes the shorter side straight to Size.
	CropPct float64
	// Mean and Std normalise each channel of the [0,1] pixels; their length is the number of channels
	// (3: RGB, 1: grey by ITU-R 601 luma, as PIL's convert("L")).
	Mean, Std []float64
	// Interp is the resize filter (Bilinear, the zero value, or Bicubic).
	Interp Interp
	// MaxPixels refuses (LoadFile) an image whose header declares more pixels; 0 means
	// DefaultMaxImagePixels.
	MaxPixels int64
}

// ResizeSize is the shorter side after resizing: ⌊Size/CropPct⌋ (timm's rule; 256 for 224), at most
// math.MaxInt32 (a crop_pct of 1e-300 asks for more; resizedSize refuses it).
func (t EvalTransform) ResizeSize() int {
	return int(min(t.resizeSide(), math.MaxInt32))
}

// resizeSide is ResizeSize in floating point, before any conversion.
func (t EvalTransform) resizeSide() float64 {
	pct := t.CropPct
	if pct <= 0 {
		pct = 1
	}
	return math.Floor(float64(t.Size)/pct + 1e-9)
}

// resizedSize is the size torchvision's Resize(side) makes of a w×h image: the shorter side becomes
// side, the longer int(side·long/short). It is computed in floating point and bounded before anything
// is converted or allocated: the output and the two-pass resize's intermediate (the new width at the
// old height) must hold at most maxPixels pixels (0: DefaultMaxImagePixels), the limit a decoded image
// has, since a 138-byte 20000×1 PNG resized to 256 would be 5,120,000×256 (3.9 GB of RGB). The error
// wraps ErrTooManyPixels, a bad record as an image above the limit is.
func resizedSize(w, h int, side float64, maxPixels int64) (int, int, error) {
	if maxPixels <= 0 {
		maxPixels = DefaultMaxImagePixels
	}
	if !(side >= 1 && side <= float64(maxPixels)) {
		return 0, 0, fmt.Errorf("%w: resizing the shorter side to %g (from the crop fraction), expected 1 to %d", ErrTooManyPixels, side, maxPixels)
	}
	fw, fh := side, math.Floor(side*float64(h)/float64(w))
	if w > h {
		fw, fh = math.Floor(side*float64(w)/float64(h)), side
	}
	// The intermediate exceeds the output only when shrinking, where the source (decoded, so within
	// the limit) bounds it.
	limit := float64(maxPixels)
	if mid := fw * float64(h); fw*fh > limit || (mid > limit && mid > float64(w)*float64(h)) {
		return 0, 0, fmt.Errorf("%w: resizing the %dx%d image's shorter side to %g makes %gx%g = %.4g pixels, more than %d "+
			"(data.max_image_pixels or --max-image-pixels raise the limit)", ErrTooManyPixels, w, h, side, fw, fh, fw*fh, maxPixels)
	}
	return int(fw), int(fh), nil
}

func (t EvalTransform) validate() error {
	if t.Size < 1 || !(t.CropPct >= 0 && t.CropPct <= 1) {
		return fmt.Errorf("eval transform: size %d, crop_pct %g (expected size >= 1, crop_pct in (0, 1])", t.Size, t.CropPct)
	}
	if len(t.Mean) != len(t.Std) || (len(t.Mean) != 1 && len(t.Mean) != 3) {
		return fmt.Errorf("eval transform: %d means and %d stds, expected 1 or 3 of each", len(t.Mean), len(t.Std))
	}
	for _, s := range t.Std {
		if !(s > 0) {
			return fmt.Errorf("eval transform: std %v must be positive", t.Std)
		}
	}
	return nil
}

// LoadImage decodes a JPEG or PNG file, refusing from its header an image of more than maxPixels
// pixels (0: DefaultMaxImagePixels) before decoding it.
func LoadImage(path string, maxPixels int64) (image.Image, error) {
	f, _, err := bounded.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, format, err := decodeImageFrom(f, maxPixels)
	if errors.Is(err, ErrTooManyPixels) {
		return nil, fmt.Errorf("image %s: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding image %s: %w (JPEG and PNG are supported)", path, err)
	}
	if b := img.Bounds(); b.Dx() < 1 || b.Dy() < 1 {
		return nil, fmt.Errorf("image %s (%s) is empty", path, format)
	}
	return img, nil
}

// LoadFile decodes and transforms one image file; an image whose resize would pass the pixel limit is
// refused from its header, before it is decoded.
func (t EvalTransform) LoadFile(path string) ([]float32, error) {
	if err := t.checkHeader(path); err != nil {
		return nil, err
	}
	img, err := LoadImage(path, t.MaxPixels)
	if err != nil {
		return nil, err
	}
	out, err := t.Apply(img)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// checkHeader refuses the image at path when the size its header declares would resize past the
// pixel limit (resizedSize); a header that does not read is left to LoadImage to report.
func (t EvalTransform) checkHeader(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil || cfg.Width < 1 || cfg.Height < 1 {
		return nil
	}
	if _, _, err := resizedSize(cfg.Width, cfg.Height, t.resizeSide(), t.MaxPixels); err != nil {
		return fmt.Errorf("image %s: %w", path, err)
	}
	return nil
}

// Apply returns the Size×Size×channels example (HWC, float32).
func (t EvalTransform) Apply(img image.Image) ([]float32, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	channels := len(t.Mean)
	src := toPixels(img, channels)
	// torchvision's Resize(int): the shorter side becomes s, the longer int(s·long/short).
	w, h, err := resizedSize(src.w, src.h, t.resizeSide(), t.MaxPixels)
	if err != nil {
		return nil, err
	}
	resized := src
	if w != src.w || h != src.h {
		var tmp, dst []uint8
		resized = resize(src, w, h, t.Interp, &tmp, &dst)
	}
	if t.Size > w || t.Size > h {
		return nil, fmt.Errorf("crop %d larger than the resized %dx%d image", t.Size, w, h)
	}
	// CenterCrop: offsets int(round((in−crop)/2)), Python's round (half to even).
	top := int(math.RoundToEven(float64(h-t.Size) / 2))
	left := int(math.RoundToEven(float64(w-t.Size) / 2))
	out := make([]float32, t.Size*t.Size*channels)
	for y := range t.Size {
		row := resized.pix[((top+y)*resized.w+left)*channels:]
		for i := range t.Size * channels {
			c := i % channels
			v := float32(row[i]) / 255
			out[y*t.Size*channels+i] = (v - float32(t.Mean[c])) / float32(t.Std[c])
		}
	}
	return out, nil
}

// pixels is an 8-bit image with interleaved channels.
type pixels struct {
	w, h, c int
	pix     []uint8
}

// toPixels converts to 8-bit RGB (alpha dropped without blending, as PIL's convert("RGB")) or grey.
func toPixels(img image.Image, channels int) pixels {
	b := img.Bounds()
	p := pixels{w: b.Dx(), h: b.Dy(), c: channels, pix: make([]uint8, b.Dx()*b.Dy()*channels)}
	i := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			if channels == 1 {
				// PIL's L = (19595 R + 38470 G + 7471 B + 2^15) >> 16.
				p.pix[i] = uint8((19595*uint32(c.R) + 38470*uint32(c.G) + 7471*uint32(c.B) + 1<<15) >> 16)
				i++
				continue
			}
			p.pix[i], p.pix[i+1], p.pix[i+2] = c.R, c.G, c.B
			i += 3
		}
	}
	return p
}

// Resampling as Pillow's Resample.c does it for 8-bit images: a separable filter (triangle for
// bilinear, Keys a=-0.5 for bicubic) widened by the downscale factor (so downscaling averages, i.e.
// antialiases), fixed-point weights with 22 fractional bits, horizontal pass first, each pass rounded
// to 8 bits.
const resamplePrecision = 32 - 8 - 2

// Interp is a resampling filter.
type Interp int

const (
	Bilinear Interp = iota
	Bicubic
)

// ParseInterp reads "bilinear" (or "") and "bicubic".
func ParseInterp(s string) (Interp, error) {
	switch s {
	case "", "bilinear":
		return Bilinear, nil
	case "bicubic":
		return Bicubic, nil
	}
	return 0, fmt.Errorf("interpolation %s, want bilinear or bicubic", echo.Quote(s))
}

func (f Interp) String() string {
	if f == Bicubic {
		return "bicubic"
	}
	return "bilinear"
}

// support is the filter's half-width at scale 1.
func (f Interp) support() float64 {
	if f == Bicubic {
		return 2
	}
	return 1
}

// weight is the filter's kernel.
func (f Interp) weight(x float64) float64 {
	x = math.Abs(x)
	if f == Bicubic {
		const a = -0.5
		switch {
		case x < 1:
			return ((a+2)*x-(a+3))*x*x + 1
		case x < 2:
			return (((x-5)*x+8)*x - 4) * a
		}
		return 0
	}
	if x < 1 {
		return 1 - x
	}
	return 0
}

// resampleCoeffs returns, for each output index, the first input index and the fixed-point weights.
func resampleCoeffs(in, out int, filter Interp) (starts []int, weights [][]int32) {
	scale := float64(in) / float64(out)
	filterScale := max(scale, 1)
	support := filter.support() * filterScale
	starts = make([]int, out)
	weights = make([][]int32, out)
	k := make([]float64, 0, int(math.Ceil(support))*2+1)
	for o := range out {
		lo, taps := pillowTaps(filter, o, scale, support, filterScale, in, k)
		w := make([]int32, len(taps))
		fixedWeights(taps, w)
		starts[o], weights[o] = lo, w
	}
	return starts, weights
}

// pillowTaps returns output o's first input index and its normalised filter taps (into k's storage),
// with Pillow's float arithmetic (ImagingResampleHorizontal's precompute_coeffs).
func pillowTaps(filter Interp, o int, scale, support, filterScale float64, in int, k []float64) (lo int, taps []float64) {
	center := (float64(o) + 0.5) * scale
	lo = max(int(center-support+0.5), 0)
	hi := min(int(center+support+0.5), in)
	k = k[:0]
	var sum float64
	for i := lo; i < hi; i++ {
		v := filter.weight((float64(i) - center + 0.5) / filterScale)
		k = append(k, v)
		sum += v
	}
	if sum != 0 {
		for i := range k {
			k[i] /= sum
		}
	}
	return lo, k
}

// fixedWeights rounds taps to Pillow's fixed point (resamplePrecision bits, half away from zero).
func fixedWeights(taps []float64, w []int32) {
	for i, v := range taps {
		if v < 0 {
			w[i] = int32(-0.5 + v*(1<<resamplePrecision))
		} else {
			w[i] = int32(0.5 + v*(1<<resamplePrecision))
		}
	}
}

func clip8(v int64) uint8 {
	v >>= resamplePrecision
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// resize resizes to w×h with filter (Pillow's Image.resize). The result lives in *dst, the
// intermediate of a two-pass resize in *tmp; both are grown as needed and kept for the next call.
func resize(src pixels, w, h int, filter Interp, tmp, dst *[]uint8) pixels {
	c := src.c
	if w == src.w && h == src.h {
		*dst = append((*dst)[:0], src.pix...)
		return pixels{w: w, h: h, c: c, pix: *dst}
	}
	mid := src
	if w != src.w {
		buf := tmp
		if h == src.h {
			buf = dst
		}
		*buf = growBytes(*buf, w*src.h*c)
		mid = pixels{w: w, h: src.h, c: c, pix: *buf}
		starts, weights := resampleCoeffs(src.w, w, filter)
		for y := range src.h {
			in := src.pix[y*src.w*c:]
			out := mid.pix[y*w*c:]
			for x := range w {
				ws, s0 := weights[x], starts[x]*c
				for ch := range c {
					acc := int64(1) << (resamplePrecision - 1)
					for i, k := range ws {
						acc += int64(in[s0+i*c+ch]) * int64(k)
					}
					out[x*c+ch] = clip8(acc)
				}
			}
		}
		if h == src.h {
			return mid
		}
	}
	starts, weights := resampleCoeffs(mid.h, h, filter)
	*dst = growBytes(*dst, w*h*c)
	out := pixels{w: w, h: h, c: c, pix: *dst}
	row := w * c
	for y := range h {
		ws, s0 := weights[y], starts[y]
		o := out.pix[y*row : (y+1)*row]
		for i := range o {
			acc := int64(1) << (resamplePrecision - 1)
			for j, k := range ws {
				acc += int64(mid.pix[(s0+j)*row+i]) * int64(k)
			}
			o[i] = clip8(acc)
		}
	}
	return out
}

// growBytes returns buf resized to n bytes, reallocated only when its capacity is short.
func growBytes(buf []uint8, n int) []uint8 {
	if cap(buf) < n {
		return make([]uint8, n)
	}
	return buf[:n]
}
