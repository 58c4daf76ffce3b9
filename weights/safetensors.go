package weights

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/internal/bounded"
)

// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON
//
//	{"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}
//
// then the payload, every tensor's raw little-endian row-major bytes at [begin, end) relative to the
// payload's start. The tensors tile the payload exactly (no gaps, no overlaps), as the reference
// implementation requires.

// DType is a safetensors element type.
type DType string

// The element types this package reads and writes.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	Bool DType = "BOOL"
)

var dtypeSizes = map[DType]int{F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, Bool: 1}

// Size is the element size in bytes, 0 for an unknown dtype.
func (d DType) Size() int { return dtypeSizes[d] }

// maxHeader bounds the JSON header, as the reference implementation does (100 MB).
const maxHeader = 100 << 20

// metadataKey is the header entry that holds free-form string metadata.
const metadataKey = "__metadata__"

// Tensor is one named array of a safetensors file.
type Tensor struct {
	DType DType
	Shape []int
	// Data is the raw little-endian, row-major payload: NumElements()·DType.Size() bytes.
	Data []byte
}

// NumElements is the product of the dimensions (1 for a scalar).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is the content of a safetensors file.
type File struct {
	Path     string
	Metadata map[string]string
	Tensors  map[string]*Tensor
}

// Names lists the tensors in sorted order.
func (f *File) Names() []string { return sortedKeys(f.Tensors) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type headerEntry struct {
	DType       DType   `json:"dtype"`
	Shape       []int   `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Encode serialises tensors (in name order) and metadata.
func Encode(tensors map[string]*Tensor, metadata map[string]string) ([]byte, error) {
	header := map[string]any{}
	if len(metadata) > 0 {
		header[metadataKey] = metadata
	}
	var offset int64
	names := sortedKeys(tensors)
	for _, name := range names {
		t := tensors[name]
		if name == metadataKey || name == "" {
			return nil, fmt.Errorf("safetensors: %q is not a valid tensor name", name)
		}
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{} // a scalar is "shape": [], never null
		}
		header[name] = headerEntry{DType: t.DType, Shape: shape, DataOffsets: []int64{offset, offset + int64(len(t.Data))}}
		offset += int64(len(t.Data))
	}
	js, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	// Pad the header with spaces so the payload starts 8-byte aligned, as the reference writer does.
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	out := make([]byte, 8, 8+len(js)+int(offset))
	binary.LittleEndian.PutUint64(out, uint64(len(js)))
	out = append(out, js...)
	for _, name := range names {
		out = append(out, tensors[name].Data...)
	}
	return out, nil
}

// check verifies that the payload size matches dtype and shape.
func (t *Tensor) check() error {
	size := t.DType.Size()
	if size == 0 {
		return fmt.Errorf("unknown dtype %q", t.DType)
	}
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("negative dimension in shape %v", t.Shape)
		}
	}
	if want := t.NumElements() * size; want != len(t.Data) {
		return fmt.Errorf("%s %v needs %d bytes, has %d", t.DType, t.Shape, want, len(t.Data))
	}
	return nil
}

// Write saves tensors and metadata to path atomically: a temporary file in the same directory is
// written, synced and renamed over path, then the directory is synced, so path holds either the old
// content or the complete new one.
func Write(path string, tensors map[string]*Tensor, metadata map[string]string) error {
	data, err := Encode(tensors, metadata)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := atomicfile.Write(path, data); err != nil {
		return fmt.Errorf("safetensors %s: %w", path, err)
	}
	return nil
}

// Read loads and validates a safetensors file.
func Read(path string) (*File, error) {
	data, err := bounded.ReadFile(path, 0)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return Decode(path, data)
}

// Decode validates and parses a safetensors image; path only names it in errors. The tensors' Data
// alias data.
func Decode(path string, data []byte) (*File, error) {
	fail := func(format string, args ...any) (*File, error) {
		return nil, fmt.Errorf("safetensors %s: %s", path, fmt.Sprintf(format, args...))
	}
	if len(data) < 8 {
		return fail("%d bytes: too short for the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxHeader || n > uint64(len(data)-8) {
		return fail("header length %d does not fit the %d-byte file (limit %d)", n, len(data), maxHeader)
	}
	headerJSON, payload := data[8:8+n], data[8+n:]
	entries, metadata, err := parseHeader(headerJSON)
	if err != nil {
		return fail("header: %v", err)
	}
	f := &File{Path: path, Metadata: metadata, Tensors: make(map[string]*Tensor, len(entries))}
	type span struct {
		name       string
		begin, end int64
	}
	spans := make([]span, 0, len(entries))
	for _, name := range sortedKeys(entries) {
		e := entries[name]
		size := e.DType.Size()
		if size == 0 {
			return fail("tensor %q: unknown dtype %q", name, e.DType)
		}
		if e.Shape == nil {
			return fail("tensor %q: no shape", name)
		}
		if len(e.DataOffsets) != 2 {
			return fail("tensor %q: data_offsets %v, expected [begin, end]", name, e.DataOffsets)
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin || end > int64(len(payload)) {
			return fail("tensor %q: data_offsets [%d, %d] outside the %d-byte payload", name, begin, end, len(payload))
		}
		need, err := byteSize(e.Shape, size)
		if err != nil {
			return fail("tensor %q: %v", name, err)
		}
		if need != end-begin {
			return fail("tensor %q: %s %v needs %d bytes, data_offsets [%d, %d] give %d",
				name, e.DType, e.Shape, need, begin, end, end-begin)
		}
		spans = append(spans, span{name, begin, end})
		f.Tensors[name] = &Tensor{DType: e.DType, Shape: e.Shape, Data: payload[begin:end:end]}
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].begin != spans[j].begin {
			return spans[i].begin < spans[j].begin
		}
		return spans[i].end < spans[j].end
	})
	var at int64
	prev := "the start of the payload"
	for _, s := range spans {
		switch {
		case s.begin < at:
			return fail("tensor %q: data_offsets [%d, %d] overlap %s, which ends at %d", s.name, s.begin, s.end, prev, at)
		case s.begin > at:
			return fail("tensor %q: data_offsets [%d, %d] leave a gap after %s, which ends at %d", s.name, s.begin, s.end, prev, at)
		}
		at, prev = s.end, fmt.Sprintf("tensor %q", s.name)
	}
	if at != int64(len(payload)) {
		return fail("%d trailing bytes after the last tensor (payload %d bytes, tensors end at %d)", int64(len(payload))-at, len(payload), at)
	}
	return f, nil
}

// parseHeader reads the header object, refusing duplicate names, which encoding/json would merge silently.
func parseHeader(js []byte) (map[string]headerEntry, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, nil, fmt.Errorf("expected a JSON object, got %v", tok)
	}
	entries := map[string]headerEntry{}
	var metadata map[string]string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		name := tok.(string) // object keys are always strings
		if seen[name] {
			return nil, nil, fmt.Errorf("tensor %q listed twice", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("entry %q: %w", name, err)
		}
		if name == metadataKey {
			if err := json.Unmarshal(raw, &metadata); err != nil {
				return nil, nil, fmt.Errorf("%s: expected an object of strings: %w", metadataKey, err)
			}
			continue
		}
		var e headerEntry
		strict := json.NewDecoder(bytes.NewReader(raw))
		strict.DisallowUnknownFields()
		if err := strict.Decode(&e); err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		entries[name] = e
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, err
	}
	// Only padding may follow the object.
	if rest := js[dec.InputOffset():]; strings.TrimSpace(string(rest)) != "" {
		return nil, nil, errors.New("unexpected bytes after the JSON object")
	}
	return entries, metadata, nil
}

// byteSize is the payload size of a shape, refusing negative dimensions and sizes past 2^62.
func byteSize(shape []int, elemSize int) (int64, error) {
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d == 0 {
			return 0, nil
		}
	}
	n := int64(elemSize)
	for _, d := range shape {
		if n > (1<<62)/int64(d) {
			return 0, fmt.Errorf("shape %v is too large", shape)
		}
		n *= int64(d)
	}
	return n, nil
}
