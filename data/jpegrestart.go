package data

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
)

// Restart markers let a RandomResizedCrop decode only the rows and columns its box needs.
//
// A JPEG's entropy-coded data can only be read in order: to reach the box, libjpeg Huffman-decodes
// every block before it, which is most of a decode's time. A baseline JPEG with restart markers
// every R MCUs (R dividing the MCUs of a row) is a grid of independently coded pieces, and the
// pieces that cover a box, with their markers renumbered and the frame's size changed, are a valid
// JPEG of that part of the image, decoded to the same pixels away from its edges (spliceJPEG).
// `trainer data pack` adds the markers losslessly (AddRestartMarkers): the same coefficients,
// recoded, so every decoder gives the same pixels as from the original file.

// jpegLayout is what restart work needs from a baseline JPEG's headers.
type jpegLayout struct {
	width, height int
	sofSize       int // offset of the frame header's height field (the width follows it)
	comps         [4]jpegComp
	ncomps        int
	hmax, vmax    int
	restart       int // DRI interval in MCUs; 0 without restart markers
	sosAt         int // offset of the SOS marker
	dataAt        int // first byte of entropy-coded data
	dc, ac        [4]*huffTable
	// MCU geometry: an MCU is mcuW×mcuH pixels, mcusX by mcusY of them.
	mcuW, mcuH, mcusX, mcusY int
}

// jpegComp is a frame component that is in the (single) scan, in scan order.
type jpegComp struct {
	h, v, td, ta int
	blocks       int // blocks per MCU
}

var errNotBaseline = errors.New("not a single-scan baseline Huffman JPEG")

// parseJPEGLayout reads b's headers up to its scan into l, with the Huffman tables if tables is
// set. It refuses what restart markers cannot be added to or used on here: progressive, lossless,
// arithmetic or 12-bit JPEGs, several scans, a height left to a DNL marker.
func parseJPEGLayout(l *jpegLayout, b []byte, tables bool) error {
	*l = jpegLayout{}
	if len(b) < 4 || b[0] != 0xff || b[1] != 0xd8 {
		return errors.New("no JPEG start marker")
	}
	type frameComp struct{ id, h, v int }
	var frameComps [4]frameComp
	frame := frameComps[:0]
	for i := 2; ; {
		for i < len(b) && b[i] == 0xff && i+1 < len(b) && b[i+1] == 0xff {
			i++ // fill bytes
		}
		if i+4 > len(b) || b[i] != 0xff {
			return errors.New("header ends early or has bytes between markers")
		}
		m := b[i+1]
		if m == 0x01 || (m >= 0xd0 && m <= 0xd7) {
			i += 2
			continue
		}
		n := int(b[i+2])<<8 | int(b[i+3])
		if n < 2 || i+2+n > len(b) {
			return fmt.Errorf("marker 0x%02x: segment of %d bytes past the end", m, n)
		}
		seg := b[i+4 : i+2+n]
		switch {
		case m == 0xc0 || m == 0xc1:
			if l.sofSize != 0 || len(seg) < 6 || seg[0] != 8 {
				return errNotBaseline
			}
			l.sofSize = i + 5
			l.height, l.width = int(seg[1])<<8|int(seg[2]), int(seg[3])<<8|int(seg[4])
			nc := int(seg[5])
			if nc < 1 || nc > 4 || len(seg) != 6+3*nc || l.height < 1 || l.width < 1 {
				return errNotBaseline
			}
			for k := range nc {
				c := frameComp{id: int(seg[6+3*k]), h: int(seg[7+3*k] >> 4), v: int(seg[7+3*k] & 15)}
				if c.h < 1 || c.h > 4 || c.v < 1 || c.v > 4 {
					return errNotBaseline
				}
				l.hmax, l.vmax = max(l.hmax, c.h), max(l.vmax, c.v)
				frame = append(frame, c)
			}
		case m >= 0xc2 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc, m == 0xd9:
			return errNotBaseline
		case m == 0xc4:
			for len(seg) > 0 {
				if len(seg) < 17 || seg[0]>>4 > 1 || seg[0]&15 > 3 {
					return errors.New("bad Huffman table")
				}
				count := 0
				for _, c := range seg[1:17] {
					count += int(c)
				}
				if count > 256 || len(seg) < 17+count {
					return errors.New("bad Huffman table")
				}
				t := tablePresent // its codes are built only when asked for
				if tables {
					var err error
					if t, err = newHuffTable(seg[1:17], seg[17:17+count]); err != nil {
						return err
					}
				}
				if seg[0]>>4 == 0 {
					l.dc[seg[0]&15] = t
				} else {
					l.ac[seg[0]&15] = t
				}
				seg = seg[17+count:]
			}
		case m == 0xdd:
			if len(seg) != 2 {
				return errors.New("bad restart interval marker")
			}
			l.restart = int(seg[0])<<8 | int(seg[1])
		case m == 0xda:
			if l.sofSize == 0 || len(seg) < 1 {
				return errNotBaseline
			}
			ns := int(seg[0])
			if ns != len(frame) || len(seg) != 4+2*ns || seg[1+2*ns] != 0 || seg[2+2*ns] != 63 || seg[3+2*ns] != 0 {
				return errNotBaseline // not one scan of every component
			}
			for k := range ns {
				id, tbl := int(seg[1+2*k]), seg[2+2*k]
				at := -1
				for j, c := range frame {
					if c.id == id {
						at = j
					}
				}
				if at < 0 || tbl>>4 > 3 || tbl&15 > 3 || l.dc[tbl>>4] == nil || l.ac[tbl&15] == nil {
					return errNotBaseline
				}
				c := frame[at]
				l.comps[k] = jpegComp{h: c.h, v: c.v, td: int(tbl >> 4), ta: int(tbl & 15), blocks: c.h * c.v}
			}
			l.ncomps = ns
			l.sosAt, l.dataAt = i, i+2+n
			if ns == 1 {
				// A single component's MCU is one block of that component's own sampling grid.
				c := &l.comps[0]
				l.mcuW, l.mcuH = 8*l.hmax/c.h, 8*l.vmax/c.v
				if l.mcuW*c.h != 8*l.hmax || l.mcuH*c.v != 8*l.vmax {
					return errNotBaseline
				}
				w, h := (l.width*c.h+l.hmax-1)/l.hmax, (l.height*c.v+l.vmax-1)/l.vmax
				l.mcusX, l.mcusY = (w+7)/8, (h+7)/8
				c.blocks = 1
			} else {
				l.mcuW, l.mcuH = 8*l.hmax, 8*l.vmax
				l.mcusX, l.mcusY = (l.width+l.mcuW-1)/l.mcuW, (l.height+l.mcuH-1)/l.mcuH
			}
			return nil
		}
		i += 2 + n
	}
}

// huffTable is one DHT table, for decoding and for encoding the same symbols.
type huffTable struct {
	fast    [1 << huffFastBits]uint16 // (length<<8 | symbol) for codes of up to huffFastBits; 0 if longer
	maxCode [17]int32                 // the largest code of each length, -1 if none
	valPtr  [17]int32                 // index in symbols of the first code of each length, minus that code
	symbols []byte
	code    [256]uint16 // each symbol's code
	size    [256]uint8  // and its length; 0 for a symbol the table lacks
}

const huffFastBits = 9

// tablePresent marks a table parseJPEGLayout saw without building it.
var tablePresent = &huffTable{}

// newHuffTable builds the canonical Huffman code of counts (codes of each length 1..16) and symbols.
func newHuffTable(counts, symbols []byte) (*huffTable, error) {
	t := &huffTable{symbols: bytes.Clone(symbols)}
	code, k := 0, 0
	for n := 1; n <= 16; n++ {
		t.maxCode[n] = -1
		t.valPtr[n] = int32(k - code)
		for range int(counts[n-1]) {
			s := symbols[k]
			if code >= 1<<n-1 { // no code may be all ones, as libjpeg requires
				return nil, errors.New("bad Huffman table: too many codes")
			}
			if t.size[s] != 0 {
				return nil, errors.New("bad Huffman table: a symbol twice")
			}
			t.code[s], t.size[s] = uint16(code), uint8(n)
			if n <= huffFastBits {
				for j := code << (huffFastBits - n); j < (code+1)<<(huffFastBits-n); j++ {
					t.fast[j] = uint16(n)<<8 | uint16(s)
				}
			}
			t.maxCode[n] = int32(code)
			code++
			k++
		}
		code <<= 1
	}
	return t, nil
}

// entropyReader reads the bits of entropy-coded data, unstuffing 0xFF 0x00. At a marker it stops
// and feeds zeros, counting them: a decode that used any is past the data's end.
type entropyReader struct {
	b       []byte
	i       int
	acc     uint64
	n       uint
	padding uint // zero bits fed past the data
}

func (r *entropyReader) fill() {
	for r.n <= 56 {
		c := byte(0)
		if r.i < len(r.b) && (r.b[r.i] != 0xff || r.i+1 < len(r.b) && r.b[r.i+1] == 0) {
			c = r.b[r.i]
			r.i++
			if c == 0xff {
				r.i++
			}
		} else {
			r.padding += 8
		}
		r.acc |= uint64(c) << (56 - r.n)
		r.n += 8
	}
}

func (r *entropyReader) bits(n uint) uint32 {
	if n == 0 {
		return 0
	}
	if r.n < n {
		r.fill()
	}
	v := uint32(r.acc >> (64 - n))
	r.acc <<= n
	r.n -= n
	return v
}

func (r *entropyReader) symbol(t *huffTable) (byte, error) {
	if r.n < 16 {
		r.fill()
	}
	if e := t.fast[r.acc>>(64-huffFastBits)]; e != 0 {
		n := uint(e >> 8)
		r.acc <<= n
		r.n -= n
		return byte(e), nil
	}
	for n := huffFastBits + 1; n <= 16; n++ {
		c := int32(r.acc >> (64 - uint(n)))
		if c <= t.maxCode[n] {
			r.acc <<= uint(n)
			r.n -= uint(n)
			return t.symbols[t.valPtr[n]+c], nil
		}
	}
	return 0, errors.New("bad Huffman code")
}

// overrun reports whether the bits used so far went past the data's end.
func (r *entropyReader) overrun() bool { return r.padding > uint(r.n) }

// entropyWriter writes bits with 0xFF stuffing.
type entropyWriter struct {
	out []byte
	acc uint64
	n   uint
}

func (w *entropyWriter) put(v uint32, n uint) {
	w.acc = w.acc<<n | uint64(v)&(1<<n-1)
	w.n += n
	for w.n >= 8 {
		c := byte(w.acc >> (w.n - 8))
		w.out = append(w.out, c)
		if c == 0xff {
			w.out = append(w.out, 0)
		}
		w.n -= 8
	}
}

// align pads the last byte with ones, as libjpeg does before a marker.
func (w *entropyWriter) align() {
	if w.n > 0 {
		w.put(1<<(8-w.n)-1, 8-w.n)
	}
}

// restartInterval is the interval AddRestartMarkers uses for an image of mcusX MCUs a row: the
// smallest divisor of the row of at least minMCUs MCUs, so that pieces tile every row.
func restartInterval(mcusX, minMCUs int) int {
	for r := max(minMCUs, 1); r < mcusX; r++ {
		if mcusX%r == 0 {
			return r
		}
	}
	return mcusX
}

// AddRestartMarkers returns the baseline JPEG b with a restart marker every few MCUs, each row cut
// into pieces of at least minMCUs MCUs (2 if 0), and the same coefficients: every decoder gives the
// same pixels as from b. ok is false, with b returned as it is, for a JPEG that already has restart
// markers or that this does not recode (progressive, arithmetic-coded, 12-bit, several scans, or a
// DC table without a code the recoding needs); err is set, with b returned, for a JPEG whose scan is
// damaged.
func AddRestartMarkers(b []byte, minMCUs int) (out []byte, ok bool, err error) {
	var l jpegLayout
	if err := parseJPEGLayout(&l, b, true); err != nil || l.restart != 0 {
		return b, false, nil
	}
	if minMCUs <= 0 {
		minMCUs = 2
	}
	interval := restartInterval(l.mcusX, minMCUs)
	total := l.mcusX * l.mcusY
	if total <= interval || interval > 0xffff {
		return b, false, nil
	}
	r := entropyReader{b: b[l.dataAt:]}
	w := entropyWriter{out: make([]byte, 0, len(b)+len(b)/8+64)}
	w.out = append(w.out, b[:l.sosAt]...)
	w.out = append(w.out, 0xff, 0xdd, 0, 4, byte(interval>>8), byte(interval))
	w.out = append(w.out, b[l.sosAt:l.dataAt]...)
	var pred, newPred [4]int32
	for m := range total {
		if m > 0 && m%interval == 0 {
			w.align()
			w.out = append(w.out, 0xff, 0xd0+byte((m/interval-1)%8))
			newPred = [4]int32{}
		}
		for ci := range l.ncomps {
			c := &l.comps[ci]
			dc, ac := l.dc[c.td], l.ac[c.ta]
			for range c.blocks {
				s, err := r.symbol(dc)
				if err != nil || s > 11 {
					return b, false, scanError(m, "a DC code")
				}
				pred[ci] += extend(r.bits(uint(s)), s)
				diff := pred[ci] - newPred[ci]
				newPred[ci] = pred[ci]
				ns := byte(bits.Len32(uint32(max(diff, -diff)))) // |diff|'s bits: JPEG's SSSS category
				if ns > 11 || dc.size[ns] == 0 {
					return b, false, nil
				}
				w.put(uint32(dc.code[ns]), uint(dc.size[ns]))
				w.put(uint32(diff+diff>>31), uint(ns)) // a negative value is written as value-1
				k := 1
				for k < 64 {
					rs, err := r.symbol(ac)
					if err != nil {
						return b, false, scanError(m, "an AC code")
					}
					w.put(uint32(ac.code[rs]), uint(ac.size[rs]))
					run, size := int(rs>>4), uint(rs&15)
					if size == 0 {
						if run != 15 {
							break // end of block
						}
						k += 16
						continue
					}
					k += run
					if k > 63 {
						return b, false, scanError(m, "a coefficient past the block's end")
					}
					w.put(r.bits(size), size)
					k++
				}
				if k > 64 {
					return b, false, scanError(m, "a zero run past the block's end")
				}
			}
		}
		if r.overrun() {
			return b, false, scanError(m, "the data's end")
		}
	}
	w.align()
	// After the scan: padding bits, then the end of image (anything else, such as a second scan,
	// is not recoded).
	rest := r.b[min(r.i, len(r.b)):]
	if e := bytes.IndexByte(rest, 0xff); e < 0 || e+1 >= len(rest) || rest[e+1] != 0xd9 {
		return b, false, nil
	}
	w.out = append(w.out, 0xff, 0xd9)
	return w.out, true, nil
}

func scanError(mcu int, what string) error {
	return fmt.Errorf("JPEG scan damaged at MCU %d: %s", mcu, what)
}

// extend turns s bits v into the signed value they code (JPEG's EXTEND).
func extend(v uint32, s byte) int32 {
	if s == 0 {
		return 0
	}
	if v < 1<<(s-1) {
		return int32(v) - (1<<s - 1)
	}
	return int32(v)
}

// restartPieces finds the offsets of every restart interval's data in b (l's layout): starts[i]
// is where piece i begins, ends[i] where it ends (at its marker). ok is false unless there are
// exactly as many pieces as the image's MCUs make, each marker in its order.
func (l *jpegLayout) restartPieces(b []byte, starts, ends []int32) ([]int32, []int32, bool) {
	starts, ends = starts[:0], ends[:0]
	if l.restart <= 0 {
		return starts, ends, false
	}
	want := (l.mcusX*l.mcusY + l.restart - 1) / l.restart
	if int64(len(b)) > 1<<31-1 {
		return starts, ends, false
	}
	i := l.dataAt
	starts = append(starts, int32(i))
	for {
		j := bytes.IndexByte(b[i:], 0xff)
		if j < 0 || i+j+1 >= len(b) {
			return starts, ends, false
		}
		i += j
		m := b[i+1]
		switch {
		case m == 0:
			i += 2
		case m == 0xff:
			i++
		case m >= 0xd0 && m <= 0xd7:
			if int(m-0xd0) != (len(starts)-1)%8 || len(starts) >= want {
				return starts, ends, false
			}
			ends = append(ends, int32(i))
			i += 2
			starts = append(starts, int32(i))
		default:
			ends = append(ends, int32(i))
			return starts, ends, len(starts) == want && m == 0xd9
		}
	}
}

// spliceGrid is how l's restart pieces tile the image: each piece is piecesX MCUs of a row
// (rowsPerPiece 1), or whole rows (piecesX 1, rowsPerPiece ≥ 1). ok is false for intervals that
// straddle rows otherwise.
func (l *jpegLayout) spliceGrid() (mcusPerPiece, rowsPerPiece int, ok bool) {
	switch {
	case l.restart <= 0:
		return 0, 0, false
	case l.restart <= l.mcusX && l.mcusX%l.restart == 0:
		return l.restart, 1, true
	case l.restart%l.mcusX == 0:
		return l.mcusX, l.restart / l.mcusX, true
	}
	return 0, 0, false
}

// spliceJPEG writes to out the JPEG of MCU columns [mx0, mx1) and rows [my0, my1) of b: b's
// headers with the frame's size changed, and the restart pieces that cover those MCUs with their
// markers renumbered. The bounds must lie on the piece grid (spliceGrid) and starts/ends be
// restartPieces'. It returns the part's size in pixels.
func (l *jpegLayout) spliceJPEG(b []byte, starts, ends []int32, mx0, mx1, my0, my1 int, out []byte) (_ []byte, w, h int) {
	w = min(mx1*l.mcuW, l.width) - mx0*l.mcuW
	h = min(my1*l.mcuH, l.height) - my0*l.mcuH
	out = append(out[:0], b[:l.sofSize]...)
	out = append(out, byte(h>>8), byte(h), byte(w>>8), byte(w))
	out = append(out, b[l.sofSize+4:l.dataAt]...)
	perPiece, rowsPerPiece, _ := l.spliceGrid()
	piecesX := l.mcusX / perPiece
	k := 0
	for py := my0 / rowsPerPiece; py < (my1+rowsPerPiece-1)/rowsPerPiece; py++ {
		for px := mx0 / perPiece; px < (mx1+perPiece-1)/perPiece; px++ {
			if k > 0 {
				out = append(out, 0xff, 0xd0+byte((k-1)%8))
			}
			p := py*piecesX + px
			out = append(out, b[starts[p]:ends[p]]...)
			k++
		}
	}
	return append(out, 0xff, 0xd9), w, h
}

// JPEGRestartInterval returns the restart interval, in MCUs, of the single-scan baseline JPEG b (0
// when it has no restart markers); ok is false for a JPEG whose crops are not decoded from their
// restart pieces (progressive, arithmetic-coded, several scans), or for bytes that are not a JPEG.
func JPEGRestartInterval(b []byte) (mcus int, ok bool) {
	var l jpegLayout
	if parseJPEGLayout(&l, b, false) != nil {
		return 0, false
	}
	if _, _, grid := l.spliceGrid(); l.restart != 0 && !grid {
		return l.restart, false
	}
	return l.restart, true
}
