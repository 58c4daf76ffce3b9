//go:build !(cgo && libjpeg)

package data

// jpegTurbo is whether this build decodes JPEGs with libjpeg-turbo.
const jpegTurbo = false

// JPEGDecoder names the JPEG decoder this build uses (the libjpeg build tag picks libjpeg-turbo).
func JPEGDecoder() string { return "Go image/jpeg" }

// decodeJPEGRegion is libjpeg-turbo's region decoder in builds with the libjpeg tag (jpeg_turbo.go);
// here it declines every image (ok false, region not called), so the callers use image/jpeg.
func decodeJPEGRegion(b []byte, channels int, buf []uint8, maxPixels int64, region func(w, h int) (x, y, bw, bh, denom int)) (p pixels, ok bool, err error) {
	return pixels{}, false, nil
}
