//go:build (linux || darwin) && (amd64 || arm64) && !nolibturbojpeg

package data

import (
	"runtime"
	"unsafe"
)

// spliceRegion decodes into d.full only the restart pieces of b that cover the box [x0, x1) ×
// [y0, y1) of the image scaled to sw×sh (1/denom), with a margin of a pixel on each side (libjpeg
// replicates chroma at an image's edges where the whole image interpolates it), and returns where
// that part lies in the scaled image. ok is false, with nothing decoded, for a JPEG without usable
// restart markers, a box whose pieces are the whole image, or a part that decodes with a warning:
// the caller then decodes as usual, which reports the problem as it would have.
func (d *turboDecoder) spliceRegion(b []byte, denom, sw, sh, x0, y0, x1, y1, pf, oc, flags int) (rg tjRegion, ok bool) {
	l := &d.layout
	if parseJPEGLayout(l, b, false) != nil || l.mcuW%denom != 0 || l.mcuH%denom != 0 {
		return rg, false
	}
	perPiece, rowsPerPiece, ok := l.spliceGrid()
	if !ok {
		return rg, false
	}
	mw, mh := l.mcuW/denom, l.mcuH/denom
	mx0 := max(x0-1, 0) / mw / perPiece * perPiece
	mx1 := min(ceilDiv(ceilDiv(min(x1+1, sw), mw), perPiece)*perPiece, l.mcusX)
	my0 := max(y0-1, 0) / mh / rowsPerPiece * rowsPerPiece
	my1 := min(ceilDiv(ceilDiv(min(y1+1, sh), mh), rowsPerPiece)*rowsPerPiece, l.mcusY)
	// At least two MCUs each way: libjpeg-turbo 3 decodes a part one MCU wide at 1/4 scale with
	// other chroma than the same MCU inside a wider image.
	if mx1-mx0 < 2 {
		if mx1 < l.mcusX {
			mx1 = min(mx1+perPiece, l.mcusX)
		} else {
			mx0 = max(mx0-perPiece, 0)
		}
	}
	if my1-my0 < 2 {
		if my1 < l.mcusY {
			my1 = min(my1+rowsPerPiece, l.mcusY)
		} else {
			my0 = max(my0-rowsPerPiece, 0)
		}
	}
	if mx1-mx0 == l.mcusX && my1-my0 == l.mcusY {
		return rg, false
	}
	var piecesOK bool
	if d.starts, d.ends, piecesOK = l.restartPieces(b, d.starts, d.ends); !piecesOK {
		return rg, false
	}
	var w, h int
	d.spliced, w, h = l.spliceJPEG(b, d.starts, d.ends, mx0, mx1, my0, my1, d.spliced)
	if w < 8 || h < 8 {
		return rg, false // TurboJPEG scales only parts of at least 8×8 as the whole image
	}
	rg = tjRegion{x: mx0 * mw, y: my0 * mh, w: ceilDiv(w, denom), h: ceilDiv(h, denom)}
	d.full = growBytes(d.full, rg.w*rg.h*oc)
	src, n := uintptr(unsafe.Pointer(&d.spliced[0])), uintptr(len(d.spliced))
	r := int32(0)
	if d.lib.v3 != nil {
		r = d.readHeader(src, n)
	}
	if r == 0 {
		r = d.decompress(src, n, d.full, rg.w, rg.h, denom, tjRegion{w: rg.w, h: rg.h}, pf, flags, true)
	}
	runtime.KeepAlive(d.spliced)
	runtime.KeepAlive(d.full)
	if r != 0 {
		d.fail(nil)
		return rg, false
	}
	d.splices++
	return rg, true
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
