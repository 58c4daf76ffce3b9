//go:build (linux || darwin) && (amd64 || arm64) && !nolibturbojpeg

package data

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// libjpeg-turbo's TurboJPEG library is loaded when the first JPEG is decoded, through purego (a
// foreign-function call without cgo): the same binary, built with or without cgo, decodes with
// libjpeg-turbo where the library is installed and with image/jpeg where it is not. TurboJPEG's C
// API takes plain buffers and returns error codes (no callbacks, no setjmp), so nothing of libjpeg
// can end the process: its errors come back as a -1 and a message.

// TurboJPEGEnv names the environment variable that picks the TurboJPEG library: empty for the usual
// names (libturbojpeg.so.0, ...), a file name or path to load that one, "off" for Go's decoder.
const TurboJPEGEnv = "TRAINER_TURBOJPEG"

// TurboJPEG constants (turbojpeg.h, stable since libjpeg-turbo 1.4).
const (
	tjpfRGB  = 0
	tjpfGray = 6

	tjcsRGB   = 0
	tjcsYCbCr = 1
	tjcsGray  = 2

	tjflagFastUpsample = 256
	tjflagFastDCT      = 2048
	tjflagAccurateDCT  = 4096
	tjflagStopOnWarn   = 8192

	tjerrWarning = 0
)

// TurboJPEG 3 constants (turbojpeg.h of libjpeg-turbo 3.0+): tj3Init's type and tj3Set/tj3Get's
// parameters (enum TJPARAM).
const (
	tj3InitDecompress = 1

	tj3ParamStopOnWarning = 0
	tj3ParamSubsamp       = 4
	tj3ParamJPEGWidth     = 5
	tj3ParamJPEGHeight    = 6
	tj3ParamColorspace    = 8
	tj3ParamFastUpsample  = 9
	tj3ParamFastDCT       = 10
	tj3ParamSaveMarkers   = 25
)

// tjMCUWidth is the iMCU width in pixels of each chroma subsampling (TJSAMP_444, 422, 420, GRAY,
// 440, 411, 441): a TurboJPEG 3 cropping region starts on a multiple of it (scaled).
var tjMCUWidth = [...]int{8, 16, 16, 8, 8, 32, 8}

// turboLib holds the entry points of a loaded TurboJPEG library.
type turboLib struct {
	name                                               string // as loaded
	initDecompress, decompressHeader3, decompress2     uintptr
	destroy, getErrorStr2, getErrorCode, scalingFactor uintptr
	v3                                                 *turbo3 // nil: TurboJPEG 2 (whole images only)
}

// turbo3 holds the TurboJPEG 3 entry points (libjpeg-turbo 3.0+), which decode part of an image:
// the rows and iMCU columns of a cropping region, at a DCT scale.
type turbo3 struct {
	init, set, get, decompressHeader, setScalingFactor, setCroppingRegion, decompress8 uintptr
}

var (
	turboOnce sync.Once
	turboLibs *turboLib // nil: Go's decoder
	turboErr  error     // why turboLibs is nil
)

// turboNames are the file names tried, in order, when TurboJPEGEnv is empty.
func turboNames() []string {
	if runtime.GOOS == "darwin" {
		return []string{"libturbojpeg.0.dylib", "/opt/homebrew/opt/jpeg-turbo/lib/libturbojpeg.0.dylib",
			"/usr/local/opt/jpeg-turbo/lib/libturbojpeg.0.dylib"}
	}
	return []string{"libturbojpeg.so.0", "libturbojpeg.so"}
}

// loadTurbo loads the TurboJPEG library once; nil means Go's decoder (turboErr says why).
func loadTurbo() *turboLib {
	turboOnce.Do(func() {
		names := turboNames()
		switch v := os.Getenv(TurboJPEGEnv); v {
		case "":
		case "off":
			turboErr = fmt.Errorf("%s=off", TurboJPEGEnv)
			return
		default:
			names = []string{v}
		}
		turboLibs, turboErr = openTurbo(names)
	})
	return turboLibs
}

// openTurbo loads the first of names that opens and has every entry point used here.
func openTurbo(names []string) (*turboLib, error) {
	var errs []string
	for _, name := range names {
		// dlerror's message is the calling thread's: Dlopen reads it in a second call, on the same thread.
		runtime.LockOSThread()
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		runtime.UnlockOSThread()
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		l := &turboLib{name: name}
		for _, s := range []struct {
			p   *uintptr
			sym string
		}{
			{&l.initDecompress, "tjInitDecompress"}, {&l.decompressHeader3, "tjDecompressHeader3"},
			{&l.decompress2, "tjDecompress2"}, {&l.destroy, "tjDestroy"}, {&l.getErrorStr2, "tjGetErrorStr2"},
			{&l.getErrorCode, "tjGetErrorCode"}, {&l.scalingFactor, "tjGetScalingFactors"},
		} {
			if *s.p, err = purego.Dlsym(h, s.sym); err != nil {
				break
			}
		}
		if err != nil {
			purego.Dlclose(h)
			errs = append(errs, fmt.Sprintf("%s: %v (TurboJPEG older than libjpeg-turbo 2.0?)", name, err))
			continue
		}
		l.v3 = openTurbo3(h)
		return l, nil
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

// openTurbo3 returns the TurboJPEG 3 entry points of the library h, or nil when it has not all of
// them (TurboJPEG 2).
func openTurbo3(h uintptr) *turbo3 {
	v3 := &turbo3{}
	for _, s := range []struct {
		p   *uintptr
		sym string
	}{
		{&v3.init, "tj3Init"}, {&v3.set, "tj3Set"}, {&v3.get, "tj3Get"}, {&v3.decompressHeader, "tj3DecompressHeader"},
		{&v3.setScalingFactor, "tj3SetScalingFactor"}, {&v3.setCroppingRegion, "tj3SetCroppingRegion"},
		{&v3.decompress8, "tj3Decompress8"},
	} {
		var err error
		if *s.p, err = purego.Dlsym(h, s.sym); err != nil {
			return nil
		}
	}
	return v3
}

// turboLoaded reports whether JPEGs decode with libjpeg-turbo in this process.
func turboLoaded() bool { return loadTurbo() != nil }

// fastDecodeFlags are Transform.FastDecode's TurboJPEG flags: the fast integer IDCT and chroma
// upsampling by repetition (the accurate IDCT flag stays set and loses to the fast one).
const fastDecodeFlags = tjflagFastDCT | tjflagFastUpsample

// JPEGDecoder names the JPEG decoder this process uses: libjpeg-turbo when its TurboJPEG library
// loads, else Go's image/jpeg.
func JPEGDecoder() string {
	if l := loadTurbo(); l != nil {
		api := "TurboJPEG 2 API, whole images, or a crop's restart pieces"
		if l.v3 != nil {
			api = "TurboJPEG 3 API, cropped decoding"
		}
		return "libjpeg-turbo (" + l.name + ", " + api + ")"
	}
	return "Go image/jpeg"
}

// JPEGDecoderNote is a line for the start of a run: which decoder it uses and, for Go's or
// libjpeg-turbo 2's, how to get the faster one.
func JPEGDecoderNote() string {
	if l := loadTurbo(); l != nil {
		if l.v3 == nil {
			return "JPEG decoder: " + JPEGDecoder() + "; libjpeg-turbo 3 also decodes only each crop's box of JPEGs without restart markers " +
				"(shards from `trainer data pack` have them), for less CPU per image: " +
				TurboJPEGEnv + "=$(scripts/build-turbojpeg3.sh) from the source tree builds it and points the trainer at it"
		}
		return "JPEG decoder: " + JPEGDecoder()
	}
	return fmt.Sprintf("JPEG decoder: Go image/jpeg, 4-5x slower than libjpeg-turbo (%v): install it with `apt-get install libturbojpeg0` (Debian, Ubuntu) or `brew install jpeg-turbo`", turboErr)
}

// turboDecoder is one TurboJPEG decompressor with its buffers. A handle is not safe for concurrent
// use: each loader worker owns one (augScratch), other callers take one from turboPool.
type turboDecoder struct {
	lib    *turboLib
	handle *tjHandle
	// Filled by tjDecompressHeader3; on the heap, so their addresses stay valid in the call.
	width, height, subsamp, colorspace int32
	full                               []uint8 // the whole (scaled) image when a box is cut from it
	args                               [9]uintptr
	// Cutting a box's restart pieces out of a JPEG that has them (spliceRegion).
	layout       jpegLayout
	starts, ends []int32
	spliced      []byte
	splices      int // boxes decoded from their pieces alone
}

// call is purego.SyscallN without its per-call allocation (a variadic argument list that escapes):
// the arguments go through d.args. Every pointer among them must be to memory the caller keeps alive
// (runtime.KeepAlive) and that does not move: heap objects, or C memory.
func (d *turboDecoder) call(fn uintptr, args ...uintptr) int32 {
	n := copy(d.args[:], args)
	r, _, _ := purego.SyscallN(fn, d.args[:n]...)
	return int32(r)
}

// tjHandle owns a tjhandle: a cleanup destroys it once the tjHandle is unreachable.
type tjHandle struct{ h uintptr }

func newTJHandle(l *turboLib) *tjHandle {
	var h uintptr
	if l.v3 != nil {
		h, _, _ = purego.SyscallN(l.v3.init, tj3InitDecompress)
		if h != 0 {
			// No ICC profile extraction while reading headers (TurboJPEG 3's default): the pixels do not
			// use it, and TurboJPEG 2 did not read it either.
			purego.SyscallN(l.v3.set, h, tj3ParamSaveMarkers, 0)
		}
	} else {
		h, _, _ = purego.SyscallN(l.initDecompress)
	}
	if h == 0 {
		return nil
	}
	t := &tjHandle{h: h}
	runtime.AddCleanup(t, func(h uintptr) { purego.SyscallN(l.destroy, h) }, h)
	return t
}

var turboPool = sync.Pool{New: func() any { return newTurboDecoder() }}

// newTurboDecoder returns a decompressor, or nil when the library is absent or refuses one.
func newTurboDecoder() *turboDecoder {
	l := loadTurbo()
	if l == nil {
		return nil
	}
	h := newTJHandle(l)
	if h == nil {
		return nil
	}
	return &turboDecoder{lib: l, handle: h}
}

// fail returns err and gives d a fresh handle: TurboJPEG 2.1 leaves a decompressor whose header
// failed in the middle of its marker reading, which would garble the next image.
func (d *turboDecoder) fail(err error) error {
	if h := newTJHandle(d.lib); h != nil {
		d.handle = h
	}
	return err
}

// workersUseGo makes the loader's workers decode with image/jpeg: the benchmarks compare the two
// decoders in one process.
var workersUseGo bool

// jpegDecoder is sc's decompressor, made on first use (nil without the library).
func (sc *augScratch) jpegDecoder() *turboDecoder {
	if workersUseGo {
		return nil
	}
	if sc.turbo == nil && !sc.noTurbo {
		sc.turbo = newTurboDecoder()
		sc.noTurbo = sc.turbo == nil
	}
	return sc.turbo
}

// decodeJPEGRegion is (*turboDecoder).decodeRegion with a pooled decompressor.
func decodeJPEGRegion(b []byte, channels int, buf []uint8, maxPixels int64, region func(w, h int) (x, y, bw, bh, denom int)) (p pixels, ok bool, err error) {
	d, _ := turboPool.Get().(*turboDecoder)
	if d == nil {
		return pixels{}, false, nil
	}
	defer turboPool.Put(d)
	return d.decodeRegion(b, channels, buf, maxPixels, 0, region)
}

// decodeRegion decodes the JPEG b with libjpeg-turbo into buf. region, given the image's size,
// returns the box to decode (in full-size pixels) and the DCT-domain reduction (1, 2, 4 or 8) to
// decode it at; the box is scaled by 1/denom and rounded to whole pixels. region nil decodes
// everything at full size. flags are extra TurboJPEG flags (the fast IDCT and upsampling). ok is
// false, and region was not called, when b is not a JPEG this decoder handles (PNG, CMYK) or d is
// nil: the caller then decodes it some other way. An image whose header declares more than
// maxPixels pixels (0: DefaultMaxImagePixels) is refused before anything is decoded.
//
// The box has the bytes it has in the whole image decoded at its scale. TurboJPEG 2 decodes whole
// images only, and the box is cut from that. TurboJPEG 3 decodes a cropping region: the box's rows
// and iMCU columns with a margin of one pixel, so that the box's edge pixels get the chroma
// interpolation of the whole image (libjpeg replicates chroma at a region's edges), and the box is
// cut from the region.
func (d *turboDecoder) decodeRegion(b []byte, channels int, buf []uint8, maxPixels int64, flags int, region func(w, h int) (x, y, bw, bh, denom int)) (p pixels, ok bool, err error) {
	p, stride, view, ok, err := d.decodeRegionView(b, channels, buf, maxPixels, flags, region)
	if err != nil || !ok || !view {
		return p, ok, err
	}
	return cropPixels(pixels{w: stride / p.c, h: p.h, c: p.c, pix: p.pix}, 0, 0, p.w, p.h, buf), true, nil
}

// decodeRegionView is decodeRegion without the copy of a box cut from a larger decode: view is then
// true and p's rows are stride bytes apart in the decoder's own buffer (valid until d decodes
// again, and not to be handed back as buf); else p.pix is in buf, rows stride = p.w·p.c apart. The
// resampler reads a view where it lies (resizeView).
func (d *turboDecoder) decodeRegionView(b []byte, channels int, buf []uint8, maxPixels int64, flags int, region func(w, h int) (x, y, bw, bh, denom int)) (p pixels, stride int, view, ok bool, err error) {
	if d == nil || len(b) < 3 || b[0] != 0xff || b[1] != 0xd8 || (channels != 1 && channels != 3) {
		return pixels{}, 0, false, false, nil
	}
	// TurboJPEG keeps its message in thread-local storage: stay on this thread until it is read.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	src, n := uintptr(unsafe.Pointer(&b[0])), uintptr(len(b))
	if r := d.readHeader(src, n); r != 0 || d.width < 0 {
		// The header failed, or it was read with a warning. Read again on a fresh handle: on a used one
		// TurboJPEG 3 reports the previous image's size after a failed header, and TurboJPEG 2.1 leaves
		// a handle whose header failed in the middle of its marker reading. (A stream of tables only
		// returns no error and, from TurboJPEG 3, the previous image's size: its decompression below
		// then fails with libjpeg's message.)
		d.fail(nil)
		r = d.readHeader(src, n)
		runtime.KeepAlive(b)
		if d.width < 0 {
			// No header. TurboJPEG keeps the last message, libjpeg stopped at the first: data that ran
			// out before the end marker was first a premature end (then a missing SOS, or a stream of
			// tables only, which TurboJPEG returns without an image and without an error).
			_, msg := d.lastError()
			switch {
			case !bytes.HasSuffix(b, []byte{0xff, 0xd9}):
				msg = "Premature end of JPEG file"
			case r == 0:
				msg = "JPEG datastream contains no image"
			}
			return pixels{}, 0, false, true, d.fail(errors.New("libjpeg: " + msg))
		}
		if d.lib.v3 == nil {
			// A warning in the header left it read: the decode below meets the warning again, on a
			// fresh handle (TurboJPEG 2.1 would leave its warning flag set; 3 clears it per call).
			d.fail(nil)
		}
	}
	runtime.KeepAlive(b)
	iw, ih, cs := int(d.width), int(d.height), d.colorspace
	if (cs != tjcsGray && cs != tjcsYCbCr && cs != tjcsRGB) || iw < 1 || ih < 1 {
		return pixels{}, 0, false, false, nil
	}
	if err := checkPixels(iw, ih, maxPixels); err != nil {
		return pixels{}, 0, false, true, err
	}
	x, y, bw, bh, denom := 0, 0, iw, ih, 1
	if region != nil {
		x, y, bw, bh, denom = region(iw, ih)
	}
	if denom != 1 && denom != 2 && denom != 4 && denom != 8 {
		return pixels{}, 0, false, true, errors.New("libjpeg: DCT scaling must be 1/1, 1/2, 1/4 or 1/8")
	}
	// tjDecompress2 picks the largest scaling factor (k/8) whose result fits the size asked for: with
	// both sides at least 8, that is 1/denom for ⌈size/denom⌉. Smaller images decode at full size.
	if iw < 8 || ih < 8 {
		denom = 1
	}
	// The scaled image is ⌈size/denom⌉ (libjpeg's jdiv_round_up); the box's sides round to the
	// nearest scaled pixel, and a side on the image's edge stays on it.
	sw, sh := (iw+denom-1)/denom, (ih+denom-1)/denom
	scaled := func(v, size, scaledSize int) int {
		if v >= size {
			return scaledSize
		}
		return min((2*v+denom)/(2*denom), scaledSize)
	}
	x0, y0 := min(scaled(x, iw, sw), sw-1), min(scaled(y, ih, sh), sh-1)
	x1, y1 := max(scaled(x+bw, iw, sw), x0+1), max(scaled(y+bh, ih, sh), y0+1)
	p = pixels{w: x1 - x0, h: y1 - y0, c: channels}
	oc, pf := 3, tjpfRGB
	if channels == 1 && cs == tjcsGray {
		oc, pf = 1, tjpfGray
	}
	whole := p.w == sw && p.h == sh
	// The part of the scaled image decoded: all of it, or (TurboJPEG 3) the box with a margin of a
	// pixel, widened left to the iMCU column it starts in.
	rg := tjRegion{w: sw, h: sh}
	if !whole {
		if rg, ok := d.spliceRegion(b, denom, sw, sh, x0, y0, x1, y1, pf, oc, flags); ok {
			return d.cutBox(p, rg, x0, y0, oc, channels, buf)
		}
	}
	if v3 := d.lib.v3; v3 != nil && !whole && d.subsamp >= 0 && int(d.subsamp) < len(tjMCUWidth) {
		mcu := (tjMCUWidth[d.subsamp] + denom - 1) / denom
		rg.x, rg.y = max(x0-1, 0)/mcu*mcu, max(y0-1, 0)
		rg.w, rg.h = min(x1+1, sw)-rg.x, min(y1+1, sh)-rg.y
	}
	var dst []uint8
	if whole && oc == channels {
		buf = growBytes(buf, sw*sh*oc)
		dst = buf
	} else {
		d.full = growBytes(d.full, rg.w*rg.h*oc)
		dst = d.full
	}
	r := d.decompress(src, n, dst, sw, sh, denom, rg, pf, flags, true)
	runtime.KeepAlive(b)
	runtime.KeepAlive(dst)
	if r != 0 {
		redo := func() int32 {
			if d.lib.v3 != nil && d.readHeader(src, n) != 0 && d.width < 0 {
				return -1
			}
			return d.decompress(src, n, dst, sw, sh, denom, rg, pf, flags, false)
		}
		err := d.warningOK(b, redo)
		runtime.KeepAlive(b)
		runtime.KeepAlive(dst)
		if err != nil {
			return pixels{}, 0, false, true, d.fail(err)
		}
	}
	if whole && oc == channels {
		p.pix = buf[:sw*sh*oc]
		return p, p.w * channels, false, true, nil
	}
	return d.cutBox(p, rg, x0, y0, oc, channels, buf)
}

// cutBox returns the box p at (x0, y0) of the region rg decoded into d.full with oc channels: in
// place (view) when no channels change, else converted to grey in buf.
func (d *turboDecoder) cutBox(p pixels, rg tjRegion, x0, y0, oc, channels int, buf []uint8) (_ pixels, stride int, view, ok bool, err error) {
	dst := d.full
	if cap(d.full) > maxKeptDecode {
		d.full = nil // a rare huge image: not kept by every worker for the rest of the run
	}
	if oc == channels {
		start := ((y0-rg.y)*rg.w + x0 - rg.x) * oc
		p.pix = dst[start : start+(p.h-1)*rg.w*oc+p.w*oc]
		return p, rg.w * oc, true, true, nil
	}
	buf = growBytes(buf, p.w*p.h*channels)
	p.pix = buf[:p.w*p.h*channels]
	for r := range p.h {
		start := ((y0-rg.y+r)*rg.w + x0 - rg.x) * oc
		row := dst[start : start+p.w*oc]
		out := p.pix[r*p.w*channels : (r+1)*p.w*channels]
		// RGB -> grey with ITU-R 601 luma (as image/jpeg + toPixelsInto, and PIL's convert("L")).
		for i := range out {
			s := row[3*i : 3*i+3]
			out[i] = uint8((19595*uint32(s[0]) + 38470*uint32(s[1]) + 7471*uint32(s[2]) + 1<<15) >> 16)
		}
	}
	return p, p.w * channels, false, true, nil
}

// tjRegion is a part of the scaled image: TurboJPEG 3's tjregion.
type tjRegion struct{ x, y, w, h int }

// readHeader reads the JPEG header at src into d.width, d.height, d.subsamp and d.colorspace;
// d.width stays -1 when the header fails on a fresh handle. Warnings do not stop it.
func (d *turboDecoder) readHeader(src, n uintptr) int32 {
	h := d.handle.h
	v3 := d.lib.v3
	if v3 == nil {
		d.width = -1
		return d.call(d.lib.decompressHeader3, h, src, n, uintptr(unsafe.Pointer(&d.width)),
			uintptr(unsafe.Pointer(&d.height)), uintptr(unsafe.Pointer(&d.subsamp)), uintptr(unsafe.Pointer(&d.colorspace)))
	}
	d.call(v3.set, h, tj3ParamStopOnWarning, 0)
	r := d.call(v3.decompressHeader, h, src, n)
	d.width = d.call(v3.get, h, tj3ParamJPEGWidth)
	d.height = d.call(v3.get, h, tj3ParamJPEGHeight)
	d.subsamp = d.call(v3.get, h, tj3ParamSubsamp)
	d.colorspace = d.call(v3.get, h, tj3ParamColorspace)
	return r
}

// decompress decodes the JPEG at src into dst, the region rg of the image scaled to sw×sh (1/denom),
// rows packed (pf's pixels). With TurboJPEG 2, rg is the whole image; with 3 the header must have
// been read on d's handle (readHeader). stop stops at the first warning.
func (d *turboDecoder) decompress(src, n uintptr, dst []uint8, sw, sh, denom int, rg tjRegion, pf, flags int, stop bool) int32 {
	h, ps := d.handle.h, tjPixelSize(pf)
	dp := uintptr(unsafe.Pointer(&dst[0]))
	v3 := d.lib.v3
	if v3 == nil {
		if stop {
			flags |= tjflagStopOnWarn
		}
		return d.call(d.lib.decompress2, h, src, n, dp, uintptr(sw), uintptr(sw*ps), uintptr(sh), uintptr(pf), uintptr(tjflagAccurateDCT|flags))
	}
	boolArg := func(b bool) uintptr {
		if b {
			return 1
		}
		return 0
	}
	d.call(v3.set, h, tj3ParamStopOnWarning, boolArg(stop))
	d.call(v3.set, h, tj3ParamFastDCT, boolArg(flags&tjflagFastDCT != 0))
	d.call(v3.set, h, tj3ParamFastUpsample, boolArg(flags&tjflagFastUpsample != 0))
	// tjscalingfactor {num, denom} and tjregion {x, y, w, h} are passed by value: structs of ints,
	// which the C calling conventions of amd64 and arm64 pass packed two to a register.
	pair := func(a, b int) uintptr { return uintptr(uint32(int32(a))) | uintptr(uint32(int32(b)))<<32 }
	if r := d.call(v3.setScalingFactor, h, pair(1, denom)); r != 0 {
		return r
	}
	crop := rg
	if rg == (tjRegion{w: sw, h: sh}) {
		crop = tjRegion{} // TJUNCROPPED
	}
	if r := d.call(v3.setCroppingRegion, h, pair(crop.x, crop.y), pair(crop.w, crop.h)); r != 0 {
		return r
	}
	return d.call(v3.decompress8, h, src, n, dp, uintptr(rg.w*ps), uintptr(pf))
}

// maxKeptDecode bounds the whole-image buffer a decoder keeps between images: 32 MiB holds a 10
// megapixel RGB image, far above ImageNet's typical 0.2.
const maxKeptDecode = 32 << 20

// lastError returns the code and message of the handle's last failure.
func (d *turboDecoder) lastError() (code int, msg string) {
	c, _, _ := purego.SyscallN(d.lib.getErrorCode, d.handle.h)
	s, _, _ := purego.SyscallN(d.lib.getErrorStr2, d.handle.h)
	return int(int32(c)), goString(s)
}

// harmlessWarnings are the libjpeg warnings that leave every pixel intact (junk between markers, an
// unknown JFIF revision or Adobe transform code, a bad ICC marker); every other warning means
// corrupt data that libjpeg papered over (a truncated file filled with grey).
var harmlessWarnings = []string{
	"extraneous bytes before marker", "unknown JFIF revision number", "Unknown Adobe color transform code",
	"Corrupt JPEG data: bad ICC marker",
}

// warningOK is the verdict on a decode that stopped at its first warning: an error, or nil when
// the warning is harmless and redo, which decodes again on a fresh handle without stopping at
// warnings, has no other problem. TurboJPEG reports a run's first warning only, so image/jpeg, which
// refuses truncated and corrupt scans, checks such a file too.
func (d *turboDecoder) warningOK(b []uint8, redo func() int32) error {
	code, msg := d.lastError()
	if code != tjerrWarning || !slices.ContainsFunc(harmlessWarnings, func(w string) bool { return strings.Contains(msg, w) }) {
		return errors.New("libjpeg: " + msg)
	}
	d.fail(nil) // a fresh handle, whose warning flags are clear
	if redo() != 0 {
		if code, msg2 := d.lastError(); code != tjerrWarning || msg2 != msg {
			return errors.New("libjpeg: " + msg2)
		}
	}
	if _, _, err := DecodeImage(b, 0); err != nil {
		return fmt.Errorf("libjpeg: %s, then %w", msg, err)
	}
	return nil
}

func tjPixelSize(pf int) int {
	if pf == tjpfGray {
		return 1
	}
	return 3
}

// goString copies the NUL-terminated C string at p (at most 1 KiB: libjpeg's messages are shorter).
func goString(p uintptr) string {
	if p == 0 {
		return ""
	}
	c := *(**byte)(unsafe.Pointer(&p)) // C memory, which the Go collector does not manage
	n := 0
	for n < 1024 && *(*byte)(unsafe.Add(unsafe.Pointer(c), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(c, n))
}

// SpareProcForDecode raises GOMAXPROCS to busy+1 when it is lower and JPEGs decode with
// libjpeg-turbo, busy being the goroutines that spend their time in foreign calls (the loader's
// workers, and a step that runs on a device); the GOMAXPROCS environment variable, where set, stays
// in force. It returns GOMAXPROCS as it now is.
//
// A foreign call is a system call to Go's scheduler. When no P is idle, sysmon takes the P of a
// goroutine that has been in one since its last look (20 µs to 10 ms) and hands it to a thread that
// wakes, finds nothing to run and sleeps again, and the goroutine must find a P back when its call
// returns; sysmon meanwhile polls every 20 µs (runtime/proc.go, retake). With a P for every worker
// that is each decode; with one P spare, none (2 workers on 2 cores: 0.92–0.94x the CPU per image).
// The spare P costs nothing while the workers are in their calls, and lets the goroutine assembling
// batches run without taking a worker's P.
func SpareProcForDecode(busy int) int {
	procs := runtime.GOMAXPROCS(0)
	if procs > busy || !turboLoaded() || os.Getenv("GOMAXPROCS") != "" {
		return procs
	}
	runtime.GOMAXPROCS(busy + 1)
	return busy + 1
}
