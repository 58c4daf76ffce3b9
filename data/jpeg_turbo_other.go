//go:build !((linux || darwin) && (amd64 || arm64) && !nolibturbojpeg)

package data

import (
	"fmt"
	"runtime"
	"strings"
)

// TurboJPEGEnv names the environment variable that picks the TurboJPEG library where it can be
// loaded (jpeg_turbo.go); on this platform, or built with -tags nolibturbojpeg (a binary without
// an ELF interpreter: purego links libc's loader), JPEGs always decode with image/jpeg.
const TurboJPEGEnv = "TRAINER_TURBOJPEG"

// JPEGDecoder names the JPEG decoder this process uses.
func JPEGDecoder() string { return "Go image/jpeg" }

// JPEGDecoderNote is a line for the start of a run: which decoder it uses.
func JPEGDecoderNote() string {
	return "JPEG decoder: Go image/jpeg (this build does not load libjpeg-turbo; on linux and darwin, amd64 and arm64, a build without -tags nolibturbojpeg does, after apt-get install libturbojpeg0)"
}

// turboDecoder stands for TurboJPEG's decompressor, which this platform does not load.
type turboDecoder struct{}

func turboLoaded() bool { return false }

const fastDecodeFlags = 0

var workersUseGo bool

func (sc *augScratch) jpegDecoder() *turboDecoder { return nil }

// decodeJPEGRegion declines every image (ok false, region not called): the callers use image/jpeg.
func decodeJPEGRegion(b []byte, channels int, buf []uint8, maxPixels int64, region func(w, h int) (x, y, bw, bh, denom int)) (p pixels, ok bool, err error) {
	return pixels{}, false, nil
}

func (d *turboDecoder) decodeRegion(b []byte, channels int, buf []uint8, maxPixels int64, flags int, region func(w, h int) (x, y, bw, bh, denom int)) (p pixels, ok bool, err error) {
	return pixels{}, false, nil
}

func (d *turboDecoder) decodeRegionView(b []byte, channels int, buf []uint8, maxPixels int64, flags int, region func(w, h int) (x, y, bw, bh, denom int)) (p pixels, stride int, view, ok bool, err error) {
	return pixels{}, 0, false, false, nil
}

func openTurbo(names []string) (*struct{}, error) {
	return nil, fmt.Errorf("%s: this build does not load libjpeg-turbo", strings.Join(names, ", "))
}

// SpareProcForDecode returns GOMAXPROCS: Go's decoder makes no foreign calls, so the loader's
// workers need no spare P (jpeg_turbo.go).
func SpareProcForDecode(busy int) int { return runtime.GOMAXPROCS(0) }
