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

// turboLib holds the entry points of a loaded TurboJPEG library.
type turboLib struct {
	name                                               string // as loaded
	initDecompress, decompressHeader3, decompress2     uintptr
	destroy, getErrorStr2, getErrorCode, scalingFactor uintptr
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
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
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
		return l, nil
	}
	return nil, errors.New(strings.Join(errs, "; "))
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
		return "libjpeg-turbo (" + l.name + ")"
	}
	return "Go image/jpeg"
}

// JPEGDecoderNote is a line for the start of a run: which decoder it uses and, for Go's, why and how
// to get the faster one.
func JPEGDecoderNote() string {
	if loadTurbo() != nil {
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
	h, _, _ := purego.SyscallN(l.initDecompress)
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
// TurboJPEG 2.1 decodes whole images only: a box is cut from the whole decode at its scale, which
// gives the same bytes as libjpeg's cropped decoding with a margin (the box's edges get the chroma
// interpolation of the full image).
func (d *turboDecoder) decodeRegion(b []byte, channels int, buf []uint8, maxPixels int64, flags int, region func(w, h int) (x, y, bw, bh, denom int)) (p pixels, ok bool, err error) {
	if d == nil || len(b) < 3 || b[0] != 0xff || b[1] != 0xd8 || (channels != 1 && channels != 3) {
		return pixels{}, false, nil
	}
	// TurboJPEG keeps its message in thread-local storage: stay on this thread until it is read.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	src, n := uintptr(unsafe.Pointer(&b[0])), uintptr(len(b))
	h := d.handle.h
	d.width = -1 // left so when the header fails (tjGetErrorCode says "warning" after any warning)
	r := d.call(d.lib.decompressHeader3, h, src, n, uintptr(unsafe.Pointer(&d.width)),
		uintptr(unsafe.Pointer(&d.height)), uintptr(unsafe.Pointer(&d.subsamp)), uintptr(unsafe.Pointer(&d.colorspace)))
	runtime.KeepAlive(b)
	if d.width < 0 {
		// No header. TurboJPEG keeps the last message, libjpeg stopped at the first: data that ran out
		// before the end marker was first a premature end (then a missing SOS, or a stream of tables
		// only, which TurboJPEG returns without an image and without an error).
		_, msg := d.lastError()
		switch {
		case !bytes.HasSuffix(b, []byte{0xff, 0xd9}):
			msg = "Premature end of JPEG file"
		case r == 0:
			msg = "JPEG datastream contains no image"
		}
		return pixels{}, true, d.fail(errors.New("libjpeg: " + msg))
	}
	if r != 0 {
		// A warning in the header left it read: the decode below meets the warning again, on a
		// fresh handle (TurboJPEG 2.1 would leave its warning flag set).
		d.fail(nil)
		h = d.handle.h
	}
	iw, ih, cs := int(d.width), int(d.height), d.colorspace
	if (cs != tjcsGray && cs != tjcsYCbCr && cs != tjcsRGB) || iw < 1 || ih < 1 {
		return pixels{}, false, nil
	}
	if err := checkPixels(iw, ih, maxPixels); err != nil {
		return pixels{}, true, err
	}
	x, y, bw, bh, denom := 0, 0, iw, ih, 1
	if region != nil {
		x, y, bw, bh, denom = region(iw, ih)
	}
	if denom != 1 && denom != 2 && denom != 4 && denom != 8 {
		return pixels{}, true, errors.New("libjpeg: DCT scaling must be 1/1, 1/2, 1/4 or 1/8")
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
	whole := p.w == sw && p.h == sh && oc == channels
	var dst []uint8
	if whole {
		buf = growBytes(buf, sw*sh*oc)
		dst = buf
	} else {
		d.full = growBytes(d.full, sw*sh*oc)
		dst = d.full
	}
	r = d.call(d.lib.decompress2, h, src, n, uintptr(unsafe.Pointer(&dst[0])),
		uintptr(sw), uintptr(sw*oc), uintptr(sh), uintptr(pf), uintptr(tjflagAccurateDCT|tjflagStopOnWarn|flags))
	runtime.KeepAlive(b)
	runtime.KeepAlive(dst)
	if r != 0 {
		if err := d.warningOK(b, dst, sw, pf, flags); err != nil {
			return pixels{}, true, d.fail(err)
		}
	}
	if whole {
		p.pix = buf[:sw*sh*oc]
		return p, true, nil
	}
	buf = growBytes(buf, p.w*p.h*channels)
	p.pix = buf[:p.w*p.h*channels]
	for r := range p.h {
		row := dst[((y0+r)*sw+x0)*oc : ((y0+r)*sw+x1)*oc]
		out := p.pix[r*p.w*channels : (r+1)*p.w*channels]
		if oc == channels {
			copy(out, row)
			continue
		}
		// RGB -> grey with ITU-R 601 luma (as image/jpeg + toPixelsInto, and PIL's convert("L")).
		for i := range out {
			s := row[3*i : 3*i+3]
			out[i] = uint8((19595*uint32(s[0]) + 38470*uint32(s[1]) + 7471*uint32(s[2]) + 1<<15) >> 16)
		}
	}
	if cap(d.full) > maxKeptDecode {
		d.full = nil // a rare huge image: not kept by every worker for the rest of the run
	}
	return p, true, nil
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

// warningOK is the verdict on a decode that stopped at its first warning (TJFLAG_STOPONWARNING): an
// error, or nil when the warning is harmless and the decode, run again to its end into dst, has no
// other problem. TurboJPEG reports a run's first warning only, so image/jpeg, which refuses truncated
// and corrupt scans, checks such a file too.
func (d *turboDecoder) warningOK(b, dst []uint8, sw, pf, flags int) error {
	code, msg := d.lastError()
	if code != tjerrWarning || !slices.ContainsFunc(harmlessWarnings, func(w string) bool { return strings.Contains(msg, w) }) {
		return errors.New("libjpeg: " + msg)
	}
	d.fail(nil) // a fresh handle, whose warning flags are clear
	h := d.handle.h
	d.width = -1 // left so when the header fails (tjGetErrorCode says "warning" after any warning)
	r, _, _ := purego.SyscallN(d.lib.decompress2, h, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		uintptr(unsafe.Pointer(&dst[0])), uintptr(sw), 0, uintptr(len(dst)/(sw*tjPixelSize(pf))), uintptr(pf), uintptr(tjflagAccurateDCT|flags))
	runtime.KeepAlive(b)
	runtime.KeepAlive(dst)
	if int32(r) != 0 {
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
