//go:build cgo && libjpeg

package data

/*
#cgo LDFLAGS: -ljpeg
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>
#include <jerror.h>

#if !defined(LIBJPEG_TURBO_VERSION_NUMBER) || LIBJPEG_TURBO_VERSION_NUMBER < 1005000
#error "the libjpeg build tag needs libjpeg-turbo >= 1.5 (jpeg_crop_scanline, jpeg_skip_scanlines)"
#endif

// tdec is one reusable decompressor. libjpeg's error_exit must not return, and the default one
// calls exit(): ours formats the message and longjmps back to the entry point that armed jmp.
typedef struct {
	struct jpeg_decompress_struct d; // first, so a j_common_ptr is a tdec*
	struct jpeg_error_mgr err;
	jmp_buf jmp;
	char msg[JMSG_LENGTH_MAX];
	JSAMPROW *rows;
	int nrows;
	int width, height, cs; // from the last header
} tdec;

static void tdec_error_exit(j_common_ptr c) {
	tdec *t = (tdec *)c;
	(*c->err->format_message)(c, t->msg);
	longjmp(t->jmp, 1);
}

// Warnings (level -1) mean corrupt data that libjpeg would paper over (a truncated file is filled
// with grey): they are errors here, except the few that leave every pixel intact.
static void tdec_emit_message(j_common_ptr c, int level) {
	if (level >= 0) return;
	switch (c->err->msg_code) {
	case JWRN_EXTRANEOUS_DATA: // junk between markers, data intact
	case JWRN_JFIF_MAJOR:
	case JWRN_ADOBE_XFORM:
	case JWRN_BOGUS_ICC:
		return;
	}
	tdec_error_exit(c);
}

static tdec *tdec_new(void) {
	tdec *t = calloc(1, sizeof(tdec));
	if (!t) return NULL;
	t->d.err = jpeg_std_error(&t->err);
	t->err.error_exit = tdec_error_exit;
	t->err.emit_message = tdec_emit_message;
	if (setjmp(t->jmp)) {
		free(t);
		return NULL;
	}
	jpeg_create_decompress(&t->d);
	return t;
}

static void tdec_free(tdec *t) {
	jpeg_destroy_decompress(&t->d);
	free(t->rows);
	free(t);
}

// tdec_abort makes the decompressor idle (freeing the image's memory) and forgets the input, whose
// Go memory is unpinned once the call that decoded it returns.
static void tdec_abort(tdec *t) {
	jpeg_abort_decompress(&t->d);
	if (t->d.src) {
		t->d.src->next_input_byte = NULL;
		t->d.src->bytes_in_buffer = 0;
	}
}

// tdec_header reads the markers of buf up to the first scan, setting t->width, height and cs. buf
// must stay where it is until tdec_decode or tdec_abort. Returns 0, or -1 with t->msg.
static int tdec_header(tdec *t, const unsigned char *buf, size_t len) {
	if (setjmp(t->jmp)) {
		tdec_abort(t);
		return -1;
	}
	jpeg_mem_src(&t->d, buf, len);
	jpeg_read_header(&t->d, TRUE);
	t->width = t->d.image_width;
	t->height = t->d.image_height;
	t->cs = t->d.jpeg_color_space;
	return 0;
}

#define TDEC_STR2(v) #v
#define TDEC_STR(v) TDEC_STR2(v)
static const char *tdec_version(void) { return TDEC_STR(LIBJPEG_TURBO_VERSION); }

// tdec_decode decodes, after tdec_header, the box (x, y, w, h) of the image scaled by 1/denom into
// out (w*h*ch bytes, row-major). out must hold sw*h*ch bytes, sw being the scaled image's width: rows
// are decoded at the iMCU-aligned width libjpeg picks, then packed. margin columns either side of the
// box are decoded too, so that the box's edge pixels get the same fancy-upsampled chroma as in a full
// decode (libjpeg treats a cropped region's edges as the image's edges). ch 1 from a colour image is
// decoded as RGB and converted with ITU-R 601 luma (as image/jpeg + toPixelsInto, and PIL's convert).
// Returns 0, or -1 with t->msg; the decompressor is idle again either way.
static int tdec_decode(tdec *t, int ch, int denom, int x, int y, int w, int h, int margin, unsigned char *out) {
	struct jpeg_decompress_struct *d = &t->d;
	if (setjmp(t->jmp)) {
		tdec_abort(t);
		return -1;
	}
	int grey = d->jpeg_color_space == JCS_GRAYSCALE;
	int oc = (ch == 1 && grey) ? 1 : 3;
	d->out_color_space = oc == 1 ? JCS_GRAYSCALE : JCS_RGB;
	d->scale_num = 1;
	d->scale_denom = denom;
	d->dct_method = JDCT_ISLOW;
	d->do_fancy_upsampling = TRUE;
	jpeg_start_decompress(d);
	if ((int)d->output_components != oc || x < 0 || y < 0 || w < 1 || h < 1 ||
	    x + w > (int)d->output_width || y + h > (int)d->output_height) {
		snprintf(t->msg, sizeof t->msg, "box %dx%d at (%d, %d) outside the %dx%d image scaled by 1/%d",
			w, h, x, y, d->output_width, d->output_height, denom);
		tdec_abort(t);
		return -1;
	}
	JDIMENSION cx = x > margin ? x - margin : 0;
	JDIMENSION cw = (x + w + margin < (int)d->output_width ? x + w + margin : d->output_width) - cx;
	if (cx > 0 || cw < d->output_width) jpeg_crop_scanline(d, &cx, &cw);
	int stride = d->output_width * oc; // the cropped width
	if (t->nrows < h) {
		JSAMPROW *r = realloc(t->rows, h * sizeof(JSAMPROW));
		if (!r) {
			snprintf(t->msg, sizeof t->msg, "out of memory for %d row pointers", h);
			tdec_abort(t);
			return -1;
		}
		t->rows = r;
		t->nrows = h;
	}
	for (int r = 0; r < h; r++) t->rows[r] = out + (size_t)r * stride;
	if (y > 0) jpeg_skip_scanlines(d, y);
	for (int done = 0; done < h;) {
		JDIMENSION n = jpeg_read_scanlines(d, t->rows + done, h - done);
		if (n == 0) {
			snprintf(t->msg, sizeof t->msg, "no scanlines after row %d", y + done);
			tdec_abort(t);
			return -1;
		}
		done += n;
	}
	// Rows below the box are never decoded: abort rather than finish.
	tdec_abort(t);
	int dx = x - (int)cx;
	if (oc == ch) {
		if (dx == 0 && stride == w * ch) return 0;
		for (int r = 0; r < h; r++) memmove(out + (size_t)r * w * ch, out + (size_t)r * stride + dx * ch, (size_t)w * ch);
		return 0;
	}
	// RGB -> grey, in place: the write index never passes the read index.
	for (int r = 0; r < h; r++) {
		const unsigned char *s = out + (size_t)r * stride + dx * 3;
		unsigned char *o = out + (size_t)r * w;
		for (int i = 0; i < w; i++, s += 3)
			o[i] = (unsigned char)((19595u * s[0] + 38470u * s[1] + 7471u * s[2] + (1u << 15)) >> 16);
	}
	return 0;
}
*/
import "C"

import (
	"errors"
	"runtime"
	"sync"
	"unsafe"
)

// jpegTurbo is whether this build decodes JPEGs with libjpeg-turbo.
const jpegTurbo = true

var turboVersion = C.GoString(C.tdec_version())

// JPEGDecoder names the JPEG decoder this build uses (the libjpeg build tag picks libjpeg-turbo).
func JPEGDecoder() string { return "libjpeg-turbo " + turboVersion }

// jpegMargin is the columns decoded beyond each side of a box (see tdec_decode), at any scale.
const jpegMargin = 2

// turbo wraps one C decompressor; a cleanup frees it when the wrapper is collected. pin keeps the
// input in place while libjpeg points at it (a Pinner of its own, reused: a fresh one allocates).
type turbo struct {
	t   *C.tdec
	pin runtime.Pinner
}

var turboPool = sync.Pool{New: func() any {
	t := C.tdec_new()
	if t == nil {
		return nil
	}
	w := &turbo{t: t}
	runtime.AddCleanup(w, func(t *C.tdec) { C.tdec_free(t) }, t)
	return w
}}

// decodeJPEGRegion decodes the JPEG b with libjpeg-turbo. region, given the image's size, returns
// the box to decode (in full-size pixels) and the DCT-domain reduction (1, 2, 4 or 8) to decode it
// at; the box is scaled by 1/denom and rounded to whole pixels. region nil decodes everything at
// full size. ok is false, and region was not called, when b is not a JPEG this decoder handles
// (PNG, CMYK): the caller then decodes it some other way. An image whose header declares more than
// maxPixels pixels (0: DefaultMaxImagePixels) is refused before anything is decoded.
func decodeJPEGRegion(b []byte, channels int, buf []uint8, maxPixels int64, region func(w, h int) (x, y, bw, bh, denom int)) (p pixels, ok bool, err error) {
	if len(b) < 3 || b[0] != 0xff || b[1] != 0xd8 || (channels != 1 && channels != 3) {
		return pixels{}, false, nil
	}
	w, _ := turboPool.Get().(*turbo)
	if w == nil {
		return pixels{}, false, nil
	}
	defer turboPool.Put(w)
	// libjpeg keeps a pointer to b between the two calls.
	w.pin.Pin(&b[0])
	defer w.pin.Unpin()
	src := (*C.uchar)(unsafe.Pointer(&b[0]))
	if C.tdec_header(w.t, src, C.size_t(len(b))) != 0 {
		return pixels{}, true, w.err()
	}
	iw, ih, cs := int(w.t.width), int(w.t.height), w.t.cs
	if (cs != C.JCS_GRAYSCALE && cs != C.JCS_YCbCr && cs != C.JCS_RGB) || iw < 1 || ih < 1 {
		C.tdec_abort(w.t)
		return pixels{}, false, nil
	}
	if err := checkPixels(iw, ih, maxPixels); err != nil {
		C.tdec_abort(w.t)
		return pixels{}, true, err
	}
	x, y, bw, bh, denom := 0, 0, iw, ih, 1
	if region != nil {
		x, y, bw, bh, denom = region(iw, ih)
	}
	if denom != 1 && denom != 2 && denom != 4 && denom != 8 {
		C.tdec_abort(w.t)
		return pixels{}, true, errors.New("libjpeg: DCT scaling must be 1/1, 1/2, 1/4 or 1/8")
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
	buf = growBytes(buf, sw*p.h*3) // decoded at the cropped width (<= sw), RGB at most, then packed
	if C.tdec_decode(w.t, C.int(channels), C.int(denom), C.int(x0), C.int(y0), C.int(p.w), C.int(p.h),
		C.int(jpegMargin), (*C.uchar)(unsafe.Pointer(&buf[0]))) != 0 {
		return pixels{}, true, w.err()
	}
	p.pix = buf[:p.w*p.h*channels]
	return p, true, nil
}

func (w *turbo) err() error { return errors.New("libjpeg: " + C.GoString(&w.t.msg[0])) }
