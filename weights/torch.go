package weights

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"path"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"

	"github.com/trainer/trainer/internal/bounded"
	"github.com/trainer/trainer/internal/echo"
)

// PyTorch's checkpoint formats, as torch.save(model.state_dict(), f) writes them:
//
//   - zip (PyTorch >= 1.6): a stored (uncompressed) zip archive NAME/data.pkl, the pickled state_dict
//     whose tensors refer to storages by key, and NAME/data/KEY, each storage's raw little-endian bytes;
//   - legacy (_use_new_zipfile_serialization=False, and torchvision's older weights): five pickles in a
//     row (a magic number, the protocol version 1001, a dict of system info, the state_dict, the list
//     of storage keys), then each storage as an 8-byte little-endian element count and its bytes.
//
// In the pickle a tensor is REDUCE(torch._utils._rebuild_tensor_v2, (storage, offset, size, stride,
// requires_grad, backward_hooks)), the storage being a persistent id ("storage", torch.FloatStorage,
// key, location, numel). Every allocation is bounded by the file's size before it is made.

var zipMagic = []byte("PK\x03\x04")

// ReadStateDict reads a state_dict from a safetensors file or a PyTorch checkpoint (.pth, either
// format), told apart by their first bytes.
func ReadStateDict(path string) (*File, error) {
	head, err := readHead(path, 4)
	if err != nil {
		return nil, err
	}
	if isTorch(head) {
		return ReadTorch(path)
	}
	return Read(path)
}

// isTorch tells a PyTorch checkpoint (a zip archive or a pickle stream, which starts with PROTO)
// from a safetensors file, whose first 8 bytes are a little-endian header length.
func isTorch(head []byte) bool {
	return bytes.HasPrefix(head, zipMagic) || (len(head) > 0 && head[0] == 0x80)
}

func readHead(path string, n int) ([]byte, error) {
	f, _, err := bounded.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	head := make([]byte, n)
	m, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return head[:m], nil
}

// ReadTorch reads a state_dict written by torch.save, in the zip or the legacy format. Tensors come
// back contiguous, in the storage's dtype; pickles are checked by scanPickle and never executed.
func ReadTorch(path string) (*File, error) {
	// A regular file, whose size bounds every storage (readZip and readLegacy read it by path).
	file, size, err := bounded.Open(path)
	if err != nil {
		return nil, err
	}
	file.Close()
	head, err := readHead(path, 4)
	if err != nil {
		return nil, err
	}
	u := &unpickler{maxBytes: size, storages: map[string]*storage{}}
	var obj any
	var format string
	switch {
	case bytes.HasPrefix(head, zipMagic):
		format = "pytorch zip"
		obj, err = u.readZip(path)
	case len(head) > 0 && head[0] == 0x80:
		format = "pytorch legacy"
		obj, err = u.readLegacy(path)
	default:
		return nil, fmt.Errorf("%s is not a PyTorch checkpoint: neither a zip archive nor a pickle stream "+
			"(PyTorch < 0.4's tar format is not read)", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", path, format, err)
	}
	tensors, err := stateDictOf(obj, 0)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", path, format, err)
	}
	f := &File{Path: path, Metadata: map[string]string{"format": format}, Tensors: map[string]*Tensor{}}
	for name, t := range tensors {
		if f.Tensors[name], err = t.materialize(); err != nil {
			return nil, fmt.Errorf("%s (%s): tensor %q: %w", path, format, name, err)
		}
	}
	return f, nil
}

// storageType is a torch.*Storage global: the element type of the storages that name it.
type storageType struct {
	name  string
	dtype DType
}

var storageTypes = map[string]DType{
	"FloatStorage": F32, "DoubleStorage": F64, "HalfStorage": F16, "BFloat16Storage": BF16,
	"LongStorage": I64, "IntStorage": I32, "ShortStorage": I16, "CharStorage": I8, "ByteStorage": U8,
	"BoolStorage": Bool,
}

// Call refuses a REDUCE of a storage type: a state_dict only names them in persistent ids.
func (s *storageType) Call(...any) (any, error) {
	return nil, fmt.Errorf("pickle REDUCE of torch.%s refused: a state_dict names storage types only in persistent ids", s.name)
}

// storage is one persistent storage: numel elements of its type, whose bytes arrive after the pickle.
type storage struct {
	typ   *storageType
	key   string
	numel int64
	data  []byte // nil until read
}

// torchTensor is a rebuilt tensor: a strided view of a storage.
type torchTensor struct {
	storage      *storage
	offset       int64
	size, stride []int64
}

// unpickler loads the pickles of one file, collecting the storages they refer to.
type unpickler struct {
	maxBytes int64 // no storage may be larger than the file
	legacy   bool  // persistent ids carry a sixth field, the (refused) view metadata
	storages map[string]*storage
}

// unpickle scans the pickle at the start of data and loads it, returning the value and the pickle's
// length.
func (u *unpickler) unpickle(data []byte) (value any, n int, err error) {
	if n, err = scanPickle(data); err != nil {
		return nil, 0, err
	}
	p := pickle.NewUnpickler(bytes.NewReader(data[:n]))
	p.FindClass = u.findClass
	p.PersistentLoad = u.persistentLoad
	defer func() {
		// gopickle panics on some malformed input (an unhashable dict key, an empty LONG1).
		if r := recover(); r != nil {
			value, err = nil, fmt.Errorf("malformed pickle: %v", r)
		}
	}()
	value, err = p.Load()
	if err != nil {
		return nil, 0, fmt.Errorf("pickle: %w", err)
	}
	return value, n, nil
}

// findClass resolves the accepted globals and refuses every other by name. (gopickle resolves
// collections.OrderedDict, copy_reg._reconstructor and __builtin__.object itself; scanPickle has
// refused the last two in GLOBAL opcodes, and stateDictOf refuses any value they could make.)
func (u *unpickler) findClass(module, name string) (any, error) {
	if err := checkGlobal(module, name); err != nil {
		return nil, err
	}
	switch module + "." + name {
	case "collections.OrderedDict":
		return &types.OrderedDictClass{}, nil
	case "torch._utils._rebuild_tensor_v2":
		return rebuildTensor{v2: true}, nil
	case "torch._utils._rebuild_tensor":
		return rebuildTensor{}, nil
	case "torch._utils._rebuild_parameter":
		return rebuildParameter{}, nil
	}
	return &storageType{name: name, dtype: storageTypes[name]}, nil
}

// persistentLoad resolves ("storage", type, key, location, numel) (legacy: a sixth field, None).
func (u *unpickler) persistentLoad(id any) (any, error) {
	t, ok := id.(*types.Tuple)
	fields := 5
	if u.legacy {
		fields = 6
	}
	if !ok || t.Len() != fields {
		return nil, fmt.Errorf("persistent id %v: expected a tuple of %d fields (\"storage\", type, key, location, numel)", id, fields)
	}
	kind, _ := t.Get(0).(string)
	typ, typOK := t.Get(1).(*storageType)
	key, keyOK := t.Get(2).(string)
	_, locOK := t.Get(3).(string)
	numel, numelOK := t.Get(4).(int)
	if kind != "storage" || !typOK || !keyOK || !locOK || !numelOK {
		return nil, fmt.Errorf("persistent id %v: expected (\"storage\", torch.*Storage, key, location, numel)", *t)
	}
	if u.legacy && t.Get(5) != nil {
		return nil, fmt.Errorf("storage %q is a view of another storage (PyTorch < 1.0's format), which is not read", key)
	}
	size := int64(typ.dtype.Size())
	if numel < 0 || int64(numel) > u.maxBytes/size {
		return nil, fmt.Errorf("storage %q: %d elements of %s do not fit in the %d-byte file", key, numel, typ.name, u.maxBytes)
	}
	if s, ok := u.storages[key]; ok {
		if s.typ.name != typ.name || s.numel != int64(numel) {
			return nil, fmt.Errorf("storage %q is named twice with different types or sizes", key)
		}
		return s, nil
	}
	s := &storage{typ: typ, key: key, numel: int64(numel)}
	u.storages[key] = s
	return s, nil
}

// rebuildTensor is torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
// backward_hooks[, metadata]), or with v2 false the older _rebuild_tensor(storage, offset, size, stride).
type rebuildTensor struct{ v2 bool }

// Call implements gopickle's types.Callable.
func (r rebuildTensor) Call(args ...any) (any, error) {
	name := "_rebuild_tensor"
	want := []int{4}
	if r.v2 {
		name, want = "_rebuild_tensor_v2", []int{6, 7}
	}
	if len(args) != want[0] && len(args) != want[len(want)-1] {
		return nil, fmt.Errorf("%s: %d arguments, expected %v", name, len(args), want)
	}
	s, ok := args[0].(*storage)
	if !ok {
		return nil, fmt.Errorf("%s: argument 0 is %T, expected a storage", name, args[0])
	}
	offset, ok := args[1].(int)
	if !ok || offset < 0 {
		return nil, fmt.Errorf("%s: storage offset %v, expected an integer >= 0", name, args[1])
	}
	size, err := intTuple(args[2])
	if err != nil {
		return nil, fmt.Errorf("%s: size: %w", name, err)
	}
	stride, err := intTuple(args[3])
	if err != nil {
		return nil, fmt.Errorf("%s: stride: %w", name, err)
	}
	if r.v2 {
		if hooks, ok := args[5].(*types.OrderedDict); !ok || hooks.Len() != 0 {
			return nil, fmt.Errorf("%s: backward hooks %v, expected an empty OrderedDict", name, args[5])
		}
		if len(args) == 7 && args[6] != nil && !emptyDict(args[6]) {
			return nil, fmt.Errorf("%s: tensor metadata %v refused (tensor subclasses are not read)", name, args[6])
		}
	}
	t := &torchTensor{storage: s, offset: int64(offset), size: size, stride: stride}
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// rebuildParameter is torch._utils._rebuild_parameter(data, requires_grad, backward_hooks): the
// tensor itself (a state_dict of parameters saved without .detach()).
type rebuildParameter struct{}

// Call implements gopickle's types.Callable.
func (rebuildParameter) Call(args ...any) (any, error) {
	if len(args) != 3 {
		return nil, fmt.Errorf("_rebuild_parameter: %d arguments, expected 3", len(args))
	}
	t, ok := args[0].(*torchTensor)
	if !ok {
		return nil, fmt.Errorf("_rebuild_parameter: argument 0 is %T, expected a tensor", args[0])
	}
	if hooks, ok := args[2].(*types.OrderedDict); !ok || hooks.Len() != 0 {
		return nil, fmt.Errorf("_rebuild_parameter: backward hooks %v, expected an empty OrderedDict", args[2])
	}
	return t, nil
}

func emptyDict(v any) bool {
	switch d := v.(type) {
	case *types.Dict:
		return d.Len() == 0
	case *types.OrderedDict:
		return d.Len() == 0
	}
	return false
}

// maxRank bounds a tensor's rank.
const maxRank = 16

func intTuple(v any) ([]int64, error) {
	t, ok := v.(*types.Tuple)
	if !ok {
		return nil, fmt.Errorf("%T, expected a tuple of integers", v)
	}
	if t.Len() > maxRank {
		return nil, fmt.Errorf("rank %d, at most %d", t.Len(), maxRank)
	}
	out := make([]int64, t.Len())
	for i := range out {
		n, ok := t.Get(i).(int)
		if !ok || n < 0 {
			return nil, fmt.Errorf("%v, expected integers >= 0", *t)
		}
		out[i] = int64(n)
	}
	return out, nil
}

// check refuses a view that reaches outside its storage or holds more elements than it (a stride-0
// expansion, which a state_dict does not need and which could ask for any amount of memory).
func (t *torchTensor) check() error {
	if len(t.size) != len(t.stride) {
		return fmt.Errorf("size %v and stride %v differ in rank", t.size, t.stride)
	}
	numel := int64(1)
	for _, d := range t.size {
		if d == 0 {
			return nil
		}
		if d > t.storage.numel/numel {
			return fmt.Errorf("size %v holds more elements than its storage's %d", t.size, t.storage.numel)
		}
		numel *= d
	}
	last := t.offset
	for i, d := range t.size {
		if t.stride[i] > 0 && d-1 > (t.storage.numel-last)/t.stride[i] {
			return fmt.Errorf("offset %d, size %v, stride %v reach past the storage's %d elements", t.offset, t.size, t.stride, t.storage.numel)
		}
		last += (d - 1) * t.stride[i]
	}
	if last >= t.storage.numel {
		return fmt.Errorf("offset %d, size %v, stride %v reach past the storage's %d elements", t.offset, t.size, t.stride, t.storage.numel)
	}
	return nil
}

// materialize copies the view into a contiguous tensor (aliasing the storage when it already is one).
func (t *torchTensor) materialize() (*Tensor, error) {
	s := t.storage
	if s.data == nil {
		return nil, fmt.Errorf("storage %q has no data in the file", s.key)
	}
	es := int64(s.typ.dtype.Size())
	shape := make([]int, len(t.size))
	numel := int64(1)
	for i, d := range t.size {
		shape[i] = int(d)
		numel *= d
	}
	out := &Tensor{DType: s.typ.dtype, Shape: shape}
	if numel == 0 {
		out.Data = []byte{}
		return out, nil
	}
	contiguous, want := true, int64(1)
	for i := len(t.size) - 1; i >= 0; i-- {
		if t.size[i] != 1 && t.stride[i] != want {
			contiguous = false
		}
		want *= t.size[i]
	}
	if contiguous {
		begin, end := t.offset*es, (t.offset+numel)*es
		out.Data = s.data[begin:end:end]
		return out, nil
	}
	out.Data = make([]byte, numel*es)
	idx := make([]int64, len(t.size))
	src := t.offset
	for o := int64(0); o < numel; o++ {
		copy(out.Data[o*es:(o+1)*es], s.data[src*es:(src+1)*es])
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			src += t.stride[a]
			if idx[a] < t.size[a] {
				break
			}
			src -= t.stride[a] * idx[a]
			idx[a] = 0
		}
	}
	return out, nil
}

// maxStateDictNesting bounds how deep stateDictOf looks for a state_dict under "state_dict" or
// "model": a pickle can make a dict that holds itself, which would otherwise recurse until the stack
// overflows.
const maxStateDictNesting = 4

var errNestedTooDeep = fmt.Errorf("the state_dict is nested more than %d dicts deep under \"state_dict\" or \"model\" "+
	"(a dict that holds itself?)", maxStateDictNesting)

// stateDictOf returns the tensors of an unpickled state_dict: an OrderedDict (or dict) of names to
// tensors, or a dict holding one under "state_dict" or "model" (as training scripts save it), at
// most maxStateDictNesting levels down; depth is the level of obj.
func stateDictOf(obj any, depth int) (map[string]*torchTensor, error) {
	if depth > maxStateDictNesting {
		return nil, errNestedTooDeep
	}
	entries, ok := dictEntries(obj)
	if !ok {
		return nil, fmt.Errorf("the pickle holds a %T, not a state_dict (a dict of tensors)", obj)
	}
	out := map[string]*torchTensor{}
	var others []string
	for _, e := range entries {
		name, ok := e.Key.(string)
		if !ok {
			return nil, fmt.Errorf("state_dict key %v is a %T, expected a string", e.Key, e.Key)
		}
		t, ok := e.Value.(*torchTensor)
		if !ok {
			others = append(others, name)
			continue
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("state_dict key %q appears twice", name)
		}
		out[name] = t
	}
	if len(others) == 0 {
		if len(out) == 0 {
			return nil, errors.New("the state_dict holds no tensors")
		}
		return out, nil
	}
	if len(out) == 0 {
		for _, e := range entries {
			if k := e.Key.(string); k == "state_dict" || k == "model" {
				inner, err := stateDictOf(e.Value, depth+1)
				if err == nil || errors.Is(err, errNestedTooDeep) {
					return inner, err
				}
			}
		}
	}
	return nil, fmt.Errorf("the pickle's dict holds entries that are not tensors: %s (a state_dict holds only tensors; "+
		"a training checkpoint is read when its weights are under \"state_dict\" or \"model\")", echo.List(others, 5))
}

// dictEntries lists the items of an OrderedDict or a dict in order.
func dictEntries(obj any) ([]types.DictEntry, bool) {
	switch d := obj.(type) {
	case *types.OrderedDict:
		var out []types.DictEntry
		for e := d.List.Front(); e != nil; e = e.Next() {
			entry := e.Value.(*types.OrderedDictEntry)
			out = append(out, types.DictEntry{Key: entry.Key, Value: entry.Value})
		}
		return out, true
	case *types.Dict:
		return *d, true
	}
	return nil, false
}

// readZip loads a zip-format checkpoint: its data.pkl, then each storage's record.
func (u *unpickler) readZip(file string) (any, error) {
	zr, err := zip.OpenReader(file)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	records := map[string]*zip.File{}
	var pkl *zip.File
	for _, f := range zr.File {
		records[f.Name] = f
		dir, base := path.Split(f.Name)
		if strings.Count(dir, "/") != 1 {
			continue
		}
		switch base {
		case "data.pkl":
			if pkl != nil {
				return nil, fmt.Errorf("two data.pkl records (%s, %s)", pkl.Name, f.Name)
			}
			pkl = f
		case "constants.pkl":
			return nil, errors.New("a TorchScript archive, not a state_dict: save model.state_dict() with torch.save")
		}
	}
	if pkl == nil {
		return nil, errors.New("no NAME/data.pkl record: not a torch.save archive")
	}
	prefix := path.Dir(pkl.Name)
	if order, ok := records[prefix+"/byteorder"]; ok {
		b, err := u.readRecord(order, 16)
		if err != nil {
			return nil, err
		}
		if string(b) != "little" {
			return nil, fmt.Errorf("byteorder %q: only little-endian checkpoints are read", b)
		}
	}
	data, err := u.readRecord(pkl, maxPickle)
	if err != nil {
		return nil, err
	}
	obj, n, err := u.unpickle(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkl.Name, err)
	}
	if n != len(data) {
		return nil, fmt.Errorf("%s: %d bytes after the pickle's STOP", pkl.Name, len(data)-n)
	}
	for key, s := range u.storages {
		rec, ok := records[prefix+"/data/"+key]
		if !ok {
			return nil, fmt.Errorf("storage %q: no record %s/data/%s", key, prefix, key)
		}
		want := s.numel * int64(s.typ.dtype.Size())
		if rec.UncompressedSize64 != uint64(want) {
			return nil, fmt.Errorf("record %s holds %d bytes, storage %q needs %d (%d × %s)",
				rec.Name, rec.UncompressedSize64, key, want, s.numel, s.typ.name)
		}
		if s.data, err = u.readRecord(rec, want); err != nil {
			return nil, err
		}
	}
	return obj, nil
}

// readRecord reads a stored (uncompressed, as torch.save writes them) zip record of at most limit bytes.
func (u *unpickler) readRecord(f *zip.File, limit int64) ([]byte, error) {
	if f.Method != zip.Store {
		return nil, fmt.Errorf("record %s is compressed (method %d): torch.save stores records uncompressed", f.Name, f.Method)
	}
	if f.UncompressedSize64 > uint64(limit) || f.UncompressedSize64 > uint64(u.maxBytes) {
		return nil, fmt.Errorf("record %s: %d bytes, more than the %d allowed", f.Name, f.UncompressedSize64, min(limit, u.maxBytes))
	}
	r, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", f.Name, err)
	}
	defer r.Close()
	data := make([]byte, f.UncompressedSize64)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("record %s: %w", f.Name, err)
	}
	// Reading to EOF makes archive/zip check the record's CRC-32.
	if n, err := r.Read(make([]byte, 1)); n != 0 || (err != nil && err != io.EOF) {
		return nil, fmt.Errorf("record %s: %v (longer than its header says, or corrupt)", f.Name, err)
	}
	return data, nil
}

// legacyMagic is the first pickle of a legacy checkpoint, as hexadecimal.
const legacyMagic = "1950a86a20f9469cfc6c"

// readLegacy loads a legacy-format checkpoint; the storages alias the file's bytes.
func (u *unpickler) readLegacy(file string) (any, error) {
	u.legacy = true
	data, err := bounded.ReadFile(file, 0)
	if err != nil {
		return nil, err
	}
	at := 0
	next := func(what string) (any, error) {
		v, n, err := u.unpickle(data[at:])
		if err != nil {
			return nil, fmt.Errorf("%s (at byte %d): %w", what, at, err)
		}
		at += n
		return v, nil
	}
	magic, err := next("magic number")
	if err != nil {
		return nil, err
	}
	if m, ok := magic.(*big.Int); !ok || m.Text(16) != legacyMagic {
		return nil, fmt.Errorf("magic number %v: not a PyTorch legacy checkpoint", magic)
	}
	if version, err := next("protocol version"); err != nil {
		return nil, err
	} else if version != 1001 {
		return nil, fmt.Errorf("protocol version %v, expected 1001", version)
	}
	sysInfo, err := next("system info")
	if err != nil {
		return nil, err
	}
	entries, _ := dictEntries(sysInfo)
	for _, e := range entries {
		if e.Key == "little_endian" && e.Value != true {
			return nil, errors.New("written on a big-endian machine: only little-endian checkpoints are read")
		}
	}
	obj, err := next("state_dict")
	if err != nil {
		return nil, err
	}
	keysValue, err := next("storage keys")
	if err != nil {
		return nil, err
	}
	keys, ok := keysValue.(*types.List)
	if !ok {
		return nil, fmt.Errorf("storage keys: a %T, expected a list", keysValue)
	}
	for _, k := range *keys {
		key, ok := k.(string)
		s := u.storages[key]
		if !ok || s == nil {
			return nil, fmt.Errorf("storage key %v is not one the state_dict names", k)
		}
		if s.data != nil {
			return nil, fmt.Errorf("storage %q listed twice", key)
		}
		if len(data)-at < 8 {
			return nil, fmt.Errorf("storage %q: the file ends at byte %d, before its size", key, len(data))
		}
		count := binary.LittleEndian.Uint64(data[at:])
		if count != uint64(s.numel) {
			return nil, fmt.Errorf("storage %q: %d elements in the file, %d in the pickle", key, count, s.numel)
		}
		at += 8
		size := int(s.numel) * s.typ.dtype.Size() // fits: persistentLoad bounded it by the file size
		if len(data)-at < size {
			return nil, fmt.Errorf("storage %q: %d bytes needed at byte %d, the file ends at %d", key, size, at, len(data))
		}
		s.data = data[at : at+size : at+size]
		at += size
	}
	if at != len(data) {
		return nil, fmt.Errorf("%d trailing bytes after the last storage", len(data)-at)
	}
	return obj, nil
}
