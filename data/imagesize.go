package data

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"
)

// DefaultMaxImagePixels is the most pixels (width × height) an image may declare to be decoded, unless
// configured otherwise (data.max_image_pixels, --max-image-pixels): Pillow's MAX_IMAGE_PIXELS,
// 1024·1024·1024/4/3, a quarter GiB of RGBA. A 389 KB PNG can declare 20000×20000 pixels and take
// 1.6 GB to decode; the header says so before anything is allocated.
const DefaultMaxImagePixels = 89_478_485

// ErrTooManyPixels is wrapped by the error of an image above the pixel limit.
var ErrTooManyPixels = errors.New("image above the pixel limit")

// checkPixels refuses a width×height image above maxPixels (0: DefaultMaxImagePixels), and one
// with a side of 0: Go's JPEG decoder takes a declared height of 0 as an empty image, which then
// stopped a run long after `data pack` had accepted it.
func checkPixels(width, height int, maxPixels int64) error {
	if width < 1 || height < 1 {
		return fmt.Errorf("the header declares a %dx%d image: expected at least 1x1", width, height)
	}
	if maxPixels <= 0 {
		maxPixels = DefaultMaxImagePixels
	}
	if n := int64(width) * int64(height); n > maxPixels {
		return fmt.Errorf("%w: %dx%d is %d pixels, more than %d (data.max_image_pixels or --max-image-pixels raise the limit)",
			ErrTooManyPixels, width, height, n, maxPixels)
	}
	return nil
}

// DecodeImage decodes JPEG or PNG bytes with Go's decoders after reading the size from the header:
// an image of more than maxPixels pixels (0: DefaultMaxImagePixels) is refused before any pixel is
// decoded, with an error wrapping ErrTooManyPixels. It returns the format's name, as image.Decode.
func DecodeImage(b []byte, maxPixels int64) (image.Image, string, error) {
	return decodeImageFrom(bytes.NewReader(b), maxPixels)
}

// decodeImageFrom is DecodeImage from the start of r, which it reads twice (header, then image).
func decodeImageFrom(r io.ReadSeeker, maxPixels int64) (image.Image, string, error) {
	cfg, format, err := image.DecodeConfig(r)
	if err != nil {
		return nil, "", err
	}
	if err := checkPixels(cfg.Width, cfg.Height, maxPixels); err != nil {
		return nil, format, err
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, format, err
	}
	return image.Decode(r)
}
