package data

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf16"
)

// A reader of MATLAB's level-5 MAT-file format, as much of it as ImageNet's devkit meta.mat needs:
// numeric, character, cell and struct arrays, compressed (miCOMPRESSED) or not, either byte order.
// Sparse arrays and objects are refused. Every length is checked against the bytes that remain
// before anything is allocated.

// matArray is one decoded array.
type matArray struct {
	name  string
	class byte  // mxCELL_CLASS 1, mxSTRUCT_CLASS 2, mxCHAR_CLASS 4, numeric classes 6..15
	dims  []int // MATLAB's dimensions, column-major
	num   []float64
	text  string
	// fields and elems of a struct array: elems[i][f] is field f of element i; cells of a cell array.
	fields []string
	elems  [][]*matArray
	cells  []*matArray
}

// field returns field name of struct element i, or nil.
func (m *matArray) field(i int, name string) *matArray {
	for f, n := range m.fields {
		if n == name && i < len(m.elems) {
			return m.elems[i][f]
		}
	}
	return nil
}

// MAT-file data types and array classes.
const (
	miINT8       = 1
	miUINT8      = 2
	miINT16      = 3
	miUINT16     = 4
	miINT32      = 5
	miUINT32     = 6
	miSINGLE     = 7
	miDOUBLE     = 9
	miINT64      = 12
	miUINT64     = 13
	miMATRIX     = 14
	miCOMPRESSED = 15
	miUTF8       = 16
	miUTF16      = 17

	mxCELL   = 1
	mxSTRUCT = 2
	mxCHAR   = 4
)

// maxMATInflated bounds a compressed element's decompressed size (the devkit's meta.mat is ~2 MB).
const maxMATInflated = 256 << 20

// readMAT decodes the variables of a level-5 MAT-file.
func readMAT(b []byte) (map[string]*matArray, error) {
	if len(b) < 128 {
		return nil, errors.New("mat-file: shorter than its 128-byte header")
	}
	var order binary.ByteOrder
	switch string(b[126:128]) {
	case "IM":
		order = binary.LittleEndian
	case "MI":
		order = binary.BigEndian
	default:
		return nil, fmt.Errorf("mat-file: endian indicator %q, want IM or MI (not a level-5 MAT-file)", b[126:128])
	}
	r := matReader{order: order}
	vars := map[string]*matArray{}
	rest := b[128:]
	for len(rest) > 0 {
		if len(rest) < 8 {
			break // trailing padding
		}
		typ, data, next, err := r.element(rest)
		if err != nil {
			return nil, err
		}
		if typ == miCOMPRESSED {
			inflated, err := inflate(data)
			if err != nil {
				return nil, err
			}
			if typ, data, _, err = r.element(inflated); err != nil {
				return nil, err
			}
		}
		if typ == miMATRIX {
			m, err := r.matrix(data, 0)
			if err != nil {
				return nil, err
			}
			vars[m.name] = m
		}
		rest = next
	}
	return vars, nil
}

func inflate(data []byte) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("mat-file: compressed element: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxMATInflated+1))
	if err != nil {
		return nil, fmt.Errorf("mat-file: compressed element: %w", err)
	}
	if len(out) > maxMATInflated {
		return nil, fmt.Errorf("mat-file: a compressed element inflates past %d bytes", maxMATInflated)
	}
	return out, nil
}

type matReader struct{ order binary.ByteOrder }

// element splits the data element at the start of b into its type, its data and the bytes after it
// (elements are padded to 8 bytes, except compressed ones; a "small" element packs up to 4 bytes of
// data into its 8-byte tag).
func (r matReader) element(b []byte) (typ uint32, data, rest []byte, err error) {
	if len(b) < 8 {
		return 0, nil, nil, fmt.Errorf("mat-file: truncated element tag (%d bytes)", len(b))
	}
	first := r.order.Uint32(b)
	if small := first >> 16; small != 0 {
		if small > 4 {
			return 0, nil, nil, fmt.Errorf("mat-file: small element of %d bytes, at most 4", small)
		}
		return first & 0xffff, b[4 : 4+small], b[8:], nil
	}
	n := uint64(r.order.Uint32(b[4:]))
	if n > uint64(len(b)-8) {
		return 0, nil, nil, fmt.Errorf("mat-file: element of %d bytes, %d remain", n, len(b)-8)
	}
	end := 8 + n
	if first != miCOMPRESSED {
		end = min((end+7)&^7, uint64(len(b)))
	}
	return first, b[8 : 8+n], b[end:], nil
}

// matrix decodes the contents of a miMATRIX element; depth bounds the nesting of cells and structs.
func (r matReader) matrix(b []byte, depth int) (*matArray, error) {
	if depth > 8 {
		return nil, errors.New("mat-file: arrays nested more than 8 deep")
	}
	m := &matArray{}
	if len(b) == 0 {
		return m, nil // an empty array inside a cell or struct
	}
	next := func(want ...uint32) ([]byte, error) {
		typ, data, rest, err := r.element(b)
		if err != nil {
			return nil, err
		}
		b = rest
		for _, w := range want {
			if typ == w {
				return data, nil
			}
		}
		return nil, fmt.Errorf("mat-file: array %q: element of type %d where one of %v belongs", m.name, typ, want)
	}
	flags, err := next(miUINT32)
	if err != nil {
		return nil, err
	}
	if len(flags) < 8 {
		return nil, fmt.Errorf("mat-file: array flags of %d bytes, want 8", len(flags))
	}
	m.class = byte(r.order.Uint32(flags))
	if r.order.Uint32(flags)&0x800 != 0 {
		return nil, fmt.Errorf("mat-file: complex arrays are not read")
	}
	dims, err := next(miINT32)
	if err != nil {
		return nil, err
	}
	count := 1
	for i := 0; i+4 <= len(dims); i += 4 {
		d := int(int32(r.order.Uint32(dims[i:])))
		if d < 0 || d > 1<<31 {
			return nil, fmt.Errorf("mat-file: dimension %d", d)
		}
		m.dims = append(m.dims, d)
		if count *= d; count > 1<<31 {
			return nil, fmt.Errorf("mat-file: an array of %v elements", m.dims)
		}
	}
	name, err := next(miINT8, miUINT8)
	if err != nil {
		return nil, err
	}
	m.name = string(name)
	switch m.class {
	case mxCELL:
		if count*8 > len(b) {
			return nil, fmt.Errorf("mat-file: cell %q of %d elements cannot fit %d bytes", m.name, count, len(b))
		}
		for range count {
			typ, data, rest, err := r.element(b)
			if err != nil {
				return nil, err
			}
			b = rest
			if typ != miMATRIX {
				return nil, fmt.Errorf("mat-file: cell %q holds an element of type %d", m.name, typ)
			}
			c, err := r.matrix(data, depth+1)
			if err != nil {
				return nil, err
			}
			m.cells = append(m.cells, c)
		}
	case mxSTRUCT:
		lenData, err := next(miINT32)
		if err != nil {
			return nil, err
		}
		if len(lenData) < 4 {
			return nil, errors.New("mat-file: struct field name length missing")
		}
		fieldLen := int(r.order.Uint32(lenData))
		names, err := next(miINT8, miUINT8)
		if err != nil {
			return nil, err
		}
		if fieldLen < 1 || len(names)%fieldLen != 0 {
			return nil, fmt.Errorf("mat-file: struct %q: %d bytes of field names in slots of %d", m.name, len(names), fieldLen)
		}
		for i := 0; i < len(names); i += fieldLen {
			m.fields = append(m.fields, string(bytes.TrimRight(names[i:i+fieldLen], "\x00")))
		}
		if count*len(m.fields)*8 > len(b) {
			return nil, fmt.Errorf("mat-file: struct %q of %d elements and %d fields cannot fit %d bytes", m.name, count, len(m.fields), len(b))
		}
		for range count {
			elem := make([]*matArray, len(m.fields))
			for f := range m.fields {
				typ, data, rest, err := r.element(b)
				if err != nil {
					return nil, err
				}
				b = rest
				if typ != miMATRIX {
					return nil, fmt.Errorf("mat-file: struct %q field %q holds an element of type %d", m.name, m.fields[f], typ)
				}
				if elem[f], err = r.matrix(data, depth+1); err != nil {
					return nil, err
				}
			}
			m.elems = append(m.elems, elem)
		}
	case mxCHAR:
		if count == 0 {
			return m, nil
		}
		typ, data, _, err := r.element(b)
		if err != nil {
			return nil, err
		}
		switch typ {
		case miUINT8, miUTF8, miINT8:
			m.text = string(data)
		case miUINT16, miUTF16:
			units := make([]uint16, len(data)/2)
			for i := range units {
				units[i] = r.order.Uint16(data[2*i:])
			}
			m.text = string(utf16.Decode(units))
		default:
			return nil, fmt.Errorf("mat-file: char array %q stored as type %d", m.name, typ)
		}
	case 6, 7, 8, 9, 10, 11, 12, 13, 14, 15: // double, single, int8 ... uint64
		if count == 0 {
			return m, nil
		}
		typ, data, _, err := r.element(b)
		if err != nil {
			return nil, err
		}
		if m.num, err = r.numbers(typ, data); err != nil {
			return nil, fmt.Errorf("mat-file: array %q: %w", m.name, err)
		}
	default:
		return nil, fmt.Errorf("mat-file: array %q of class %d (sparse, object, ...) is not read", m.name, m.class)
	}
	return m, nil
}

// numbers converts numeric data of type typ to float64s.
func (r matReader) numbers(typ uint32, b []byte) ([]float64, error) {
	size := map[uint32]int{miINT8: 1, miUINT8: 1, miINT16: 2, miUINT16: 2, miINT32: 4, miUINT32: 4, miSINGLE: 4,
		miDOUBLE: 8, miINT64: 8, miUINT64: 8}[typ]
	if size == 0 {
		return nil, fmt.Errorf("numeric data of type %d", typ)
	}
	out := make([]float64, len(b)/size)
	for i := range out {
		p := b[i*size:]
		switch typ {
		case miINT8:
			out[i] = float64(int8(p[0]))
		case miUINT8:
			out[i] = float64(p[0])
		case miINT16:
			out[i] = float64(int16(r.order.Uint16(p)))
		case miUINT16:
			out[i] = float64(r.order.Uint16(p))
		case miINT32:
			out[i] = float64(int32(r.order.Uint32(p)))
		case miUINT32:
			out[i] = float64(r.order.Uint32(p))
		case miSINGLE:
			out[i] = float64(math.Float32frombits(r.order.Uint32(p)))
		case miDOUBLE:
			out[i] = math.Float64frombits(r.order.Uint64(p))
		case miINT64:
			out[i] = float64(int64(r.order.Uint64(p)))
		case miUINT64:
			out[i] = float64(r.order.Uint64(p))
		}
	}
	return out, nil
}
