// Package checkpoint is the trainer's checkpoint file format: a headered, checksummed file of every
// variable of a GoMLX context, written atomically, listed, pruned and loaded back (docs/checkpoints.md).
package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/internal/bounded"
)

// Checkpoint file layout (little-endian), version 1:
//
//	magic "TRNCKPT\x00" | u32 version | u32 header length | header JSON | tensor payload | u32 CRC-32C
//
// The CRC covers every byte before it, so a truncated or altered file is refused as a whole.
const (
	magic         = "TRNCKPT\x00"
	formatVersion = 1
	ext           = ".tckpt"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Header describes a checkpoint: where the run was and what tensors follow.
type Header struct {
	TrainerVersion string `json:"trainer_version"`
	ConfigHash     string `json:"config_hash"`
	Net            string `json:"net"`
	// NetRevision is graphs.Spec.Revision of the net that wrote the checkpoint (0 when absent).
	NetRevision int `json:"net_revision,omitempty"`
	Step        int `json:"step"`
	Epoch       int `json:"epoch"`
	// Metric and Score mark the best checkpoint (best.tckpt): the eval metric it was chosen on and
	// its value.
	Metric string  `json:"metric,omitempty"`
	Score  float64 `json:"score,omitempty"`
	// Config is the resolved config (YAML) of the run that wrote the checkpoint: --resume compares it
	// key by key with the new one (trainer/resume.go). Empty in checkpoints made by `trainer import`.
	Config string `json:"config,omitempty"`
	// LRScale is the factor guard.nonfinite=reduce_lr has put on the schedule's lr (0 means 1).
	LRScale float64        `json:"lr_scale,omitempty"`
	Tensors []TensorRecord `json:"tensors"`
}

// TensorRecord places one variable in the payload.
type TensorRecord struct {
	Name   string `json:"name"` // scope/name, e.g. "/model/conv1/conv/weights"
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Offset int64  `json:"offset"`
	Bytes  int64  `json:"bytes"`
}

// Checkpoint is a loaded checkpoint: its header and its tensors by name.
type Checkpoint struct {
	Path    string
	Header  Header
	Tensors map[string]*tensors.Tensor
}

// FileName is the file name of the checkpoint at a step; names sort by step.
func FileName(step int) string { return fmt.Sprintf("ckpt-%09d%s", step, ext) }

// Save writes every variable of ctx to dir as the checkpoint of header.Step, atomically (temp file,
// fsync, rename, fsync of the directory), and then deletes all but the newest keep checkpoints.
func Save(dir string, ctx *context.Context, header Header, keep int) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName(header.Step))
	file, err := encode(ctx, header)
	if err != nil {
		return "", fmt.Errorf("checkpoint %s not written: %w", path, err)
	}
	if err := atomicfile.Write(path, file); err != nil {
		// Nothing was renamed into place and nothing pruned: the previous checkpoints are intact.
		return "", fmt.Errorf("checkpoint %s not written (previous checkpoints kept): %w", path, err)
	}
	return path, prune(dir, keep)
}

// SaveFile writes every variable of ctx as a checkpoint at exactly path, atomically, for
// checkpoints made outside a run (`trainer import`); it never prunes the files beside it.
func SaveFile(path string, ctx *context.Context, header Header) error {
	// Load refuses a ckpt-N file whose header is not step N: such a file is not written either.
	if err := checkFileName(path, header.Step); err != nil {
		return fmt.Errorf("checkpoint %s not written: %w (a checkpoint made outside a run, step %d, takes another name)",
			path, err, header.Step)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	file, err := encode(ctx, header)
	if err != nil {
		return fmt.Errorf("checkpoint %s not written: %w", path, err)
	}
	if err := atomicfile.Write(path, file); err != nil {
		return fmt.Errorf("checkpoint %s not written (a previous file there is kept): %w", path, err)
	}
	return nil
}

// encode lays out the checkpoint file: magic, version, header, payload, CRC-32C. It refuses a header
// that Header.Validate refuses.
func encode(ctx *context.Context, header Header) ([]byte, error) {
	var payload bytes.Buffer
	header.Tensors = nil
	var errs []error
	ctx.EnumerateVariables(func(v *context.Variable) {
		value, err := v.Value()
		if err != nil {
			errs = append(errs, fmt.Errorf("variable %s: %w", v.ScopeAndName(), err))
			return
		}
		rec := TensorRecord{Name: v.ScopeAndName(), DType: value.DType().String(),
			Shape: value.Shape().Dimensions, Offset: int64(payload.Len())}
		if err := value.ConstBytes(func(data []byte) { payload.Write(data) }); err != nil {
			errs = append(errs, fmt.Errorf("variable %s: %w", v.ScopeAndName(), err))
			return
		}
		rec.Bytes = int64(payload.Len()) - rec.Offset
		header.Tensors = append(header.Tensors, rec)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// What Load would refuse is never written.
	if err := header.Validate(); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	headerJSON, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	var file bytes.Buffer
	file.WriteString(magic)
	_ = binary.Write(&file, binary.LittleEndian, uint32(formatVersion))
	_ = binary.Write(&file, binary.LittleEndian, uint32(len(headerJSON)))
	file.Write(headerJSON)
	file.Write(payload.Bytes())
	_ = binary.Write(&file, binary.LittleEndian, crc32.Checksum(file.Bytes(), crcTable))
	return file.Bytes(), nil
}

// BestName is the file, beside the periodic checkpoints, that holds the best-scoring state;
// --resume never picks it (it is not a ckpt-* file) and pruning never deletes it.
const BestName = "best" + ext

// List returns the periodic checkpoint files in dir, oldest first: exactly the names FileName makes
// (ckpt-, nine digits, .tckpt), so a file such as ckpt-old.tckpt is neither resumed from nor pruned.
func List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range entries {
		if !e.IsDir() && fileNamePattern.MatchString(e.Name()) {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(paths)
	return paths, nil
}

func prune(dir string, keep int) error {
	paths, err := List(dir)
	if err != nil {
		return err
	}
	for len(paths) > keep {
		if err := os.Remove(paths[0]); err != nil {
			return fmt.Errorf("checkpoint: pruning: %w", err)
		}
		paths = paths[1:]
	}
	return nil
}

// Load reads and verifies a checkpoint file; any mismatch is an error naming the file and
// what was expected.
func Load(path string) (*Checkpoint, error) {
	data, err := bounded.ReadFile(path, 0)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return parse(path, data)
}

// maxTensorRank bounds the rank a checkpoint may declare (GoMLX tensors are far below it).
const maxTensorRank = 16

// parse verifies and decodes a checkpoint file's bytes; path only names it in errors. It
// checks, in order: size, magic, version (before the checksum, so a file of another version is named
// as such even if its layout differs), CRC-32C, header, and that every tensor fits the payload.
func parse(path string, data []byte) (*Checkpoint, error) {
	fail := func(format string, args ...any) (*Checkpoint, error) {
		return nil, fmt.Errorf("checkpoint %s: %s", path, fmt.Sprintf(format, args...))
	}
	const fixed = len(magic) + 8
	if len(data) < fixed+4 {
		return fail("truncated: %d bytes, expected at least %d", len(data), fixed+4)
	}
	if string(data[:len(magic)]) != magic {
		return fail("not a trainer checkpoint (magic %q, expected %q)", data[:len(magic)], magic)
	}
	switch version := binary.LittleEndian.Uint32(data[len(magic):]); {
	case version > formatVersion:
		return fail("format version %d, expected %d: written by a newer trainer; load it with that trainer "+
			"(or `trainer export` it to safetensors there)", version, formatVersion)
	case version < formatVersion:
		return fail("format version %d, expected %d: not a format any trainer release wrote", version, formatVersion)
	}
	body, stored := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if sum := crc32.Checksum(body, crcTable); sum != stored {
		return fail("checksum mismatch (stored %08x, computed %08x): the file is truncated or corrupt", stored, sum)
	}
	headerLen := uint64(binary.LittleEndian.Uint32(data[len(magic)+4:]))
	if uint64(fixed)+headerLen > uint64(len(body)) {
		return fail("header length %d exceeds the file (%d bytes)", headerLen, len(data))
	}
	ckpt := &Checkpoint{Path: path, Tensors: map[string]*tensors.Tensor{}}
	headerJSON := body[fixed : fixed+int(headerLen)]
	if err := decodeHeader(headerJSON, &ckpt.Header); err != nil {
		return fail("header: %v", err)
	}
	payload := body[fixed+int(headerLen):]
	// Tensors lie back to back in header order; requiring that (no overlap) bounds what a header can
	// make the reader allocate by the file's own size.
	var end int64
	for _, rec := range ckpt.Header.Tensors {
		if _, dup := ckpt.Tensors[rec.Name]; dup {
			return fail("tensor %s is listed twice", rec.Name)
		}
		dtype, err := dtypes.DTypeString(rec.DType)
		if err != nil || dtype == dtypes.InvalidDType || dtype.Size() <= 0 {
			return fail("tensor %s: unknown dtype %q", rec.Name, rec.DType)
		}
		// The element count is checked against the payload before any allocation, with no overflow.
		if len(rec.Shape) > maxTensorRank {
			return fail("tensor %s: rank %d, expected at most %d", rec.Name, len(rec.Shape), maxTensorRank)
		}
		size := int64(dtype.Size())
		for _, d := range rec.Shape {
			if d < 0 || (d > 0 && size > int64(len(payload))/int64(d)) {
				return fail("tensor %s: shape %v does not fit a %d-byte payload", rec.Name, rec.Shape, len(payload))
			}
			size *= int64(d)
		}
		if size != rec.Bytes || rec.Offset < 0 || rec.Offset > int64(len(payload))-rec.Bytes {
			return fail("tensor %s: %d bytes at offset %d do not fit shape %v of %s (%d bytes) in a %d-byte payload",
				rec.Name, rec.Bytes, rec.Offset, rec.Shape, rec.DType, size, len(payload))
		}
		if rec.Offset < end {
			return fail("tensor %s: offset %d overlaps the previous tensor (which ends at %d)", rec.Name, rec.Offset, end)
		}
		end = rec.Offset + rec.Bytes
		t := tensors.FromShape(shapes.Make(dtype, rec.Shape...))
		if rec.Bytes > 0 { // GoMLX's MutableBytes panics on a tensor with no elements
			t.MutableBytes(func(dst []byte) { copy(dst, payload[rec.Offset:rec.Offset+rec.Bytes]) })
		}
		ckpt.Tensors[rec.Name] = t
	}
	if err := ckpt.Header.Validate(); err != nil {
		return fail("header: %v", err)
	}
	if err := checkFileName(path, ckpt.Header.Step); err != nil {
		return fail("%v", err)
	}
	return ckpt, nil
}

// decodeHeader reads the header JSON strictly: a field no writer of this version produces, or an
// lr_scale of 0 (writers omit the field instead), is refused.
func decodeHeader(data []byte, h *Header) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(h); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the header object")
	}
	var present struct {
		LRScale *float64 `json:"lr_scale"`
	}
	if err := json.Unmarshal(data, &present); err == nil && present.LRScale != nil && *present.LRScale == 0 {
		return errors.New("lr_scale 0: expected a positive factor (a writer omits lr_scale for 1)")
	}
	return nil
}

// Latest loads the newest checkpoint in dir; ok is false when there is none.
func Latest(dir string) (ckpt *Checkpoint, ok bool, err error) {
	paths, err := List(dir)
	if err != nil || len(paths) == 0 {
		return nil, false, err
	}
	ckpt, err = Load(paths[len(paths)-1])
	return ckpt, err == nil, err
}

// LoadVariable implements context.Loader: variables are filled from the checkpoint as the graph asks.
func (c *Checkpoint) LoadVariable(_ *context.Context, scope, name string) (*tensors.Tensor, bool) {
	t, ok := c.Tensors[context.JoinScope(scope, name)]
	return t, ok
}

// DeleteVariable implements context.Loader.
func (c *Checkpoint) DeleteVariable(_ *context.Context, scope, name string) error {
	delete(c.Tensors, context.JoinScope(scope, name))
	return nil
}
