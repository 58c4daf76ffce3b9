package weights

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// The .pth fixtures are written by scripts/torch_pth_fixtures.py with Debian's PyTorch 1.13.

// TestReadTorchMatchesTorch reads a state_dict of every storage type, a 0-dim tensor, a transposed
// view and two views of one storage, saved in both formats, and compares every tensor with the values
// torch printed.
func TestReadTorchMatchesTorch(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "pth", "tensors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]struct {
		DType  DType
		Shape  []int
		Values []float64
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"tensors.pth", "tensors_legacy.pth"} {
		t.Run(name, func(t *testing.T) {
			f, err := ReadStateDict(filepath.Join("testdata", "pth", name))
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Names(); !slices.Equal(got, sortedKeys(want)) {
				t.Fatalf("tensors %v, want %v", got, sortedKeys(want))
			}
			for key, w := range want {
				got := f.Tensors[key]
				if got.DType != w.DType || !slices.Equal(got.Shape, w.Shape) {
					t.Errorf("%s: %s %v, want %s %v", key, got.DType, got.Shape, w.DType, w.Shape)
					continue
				}
				values, err := got.Float64s()
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(values, w.Values) {
					t.Errorf("%s: values %v, want %v", key, values, w.Values)
				}
			}
		})
	}
}

// TestTorchvisionPthImportsToSameLogits is the acceptance check: torchvision's
// mobilenet_v2, saved by torch.save(model.state_dict()), imports to exactly the tensors and logits of
// the same weights as safetensors, which match torch's logits.
func TestTorchvisionPthImportsToSameLogits(t *testing.T) {
	dir := filepath.Join("testdata", "mobilenet_v2")
	pth, err := ReadStateDict(filepath.Join(dir, "weights.pth"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := Read(filepath.Join(dir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pth.Names(), st.Names()) {
		t.Fatalf("the .pth holds %d tensors, the safetensors file %d", len(pth.Names()), len(st.Names()))
	}
	for _, name := range st.Names() {
		a, _ := pth.Tensors[name].Float64s()
		b, _ := st.Tensors[name].Float64s()
		if !slices.Equal(a, b) || !slices.Equal(pth.Tensors[name].Shape, st.Tensors[name].Shape) {
			t.Fatalf("%s differs between the .pth and the safetensors file", name)
		}
	}
	io, err := Read(filepath.Join(dir, "io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	input := io.Tensors["input"]
	images, _ := input.Float32s()
	want, _ := io.Tensors["logits"].Float64s()
	opts := graphs.Options{Width: 0.25, NumClasses: 10, ImageSize: 32}
	spec, err := graphs.Get("mobilenet_v2")
	if err != nil {
		t.Fatal(err)
	}
	logits := map[string][][]float64{}
	for _, file := range []string{"weights.pth", "weights.safetensors"} {
		ctx := context.New()
		if _, err := Load(ctx, testBackend(), spec, opts, filepath.Join(dir, file)); err != nil {
			t.Fatal(err)
		}
		ev, err := NewEvaluator(testBackend(), ctx, spec, opts, true)
		if err != nil {
			t.Fatal(err)
		}
		logits[file], err = ev.Logits(images, input.Shape[0], input.Shape[1], input.Shape[2], input.Shape[3])
		ev.Finalize()
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, row := range logits["weights.pth"] {
		if !slices.Equal(row, logits["weights.safetensors"][i]) {
			t.Fatalf("image %d: logits %v from the .pth, %v from the safetensors file", i, row, logits["weights.safetensors"][i])
		}
	}
	if maxAbs, rel := logitErrors(logits["weights.pth"], want); !(rel <= torchTolF32) {
		t.Errorf("logits differ from torch's by %.3g relative (max abs %.3g)", rel, maxAbs)
	}
}

// torchZip writes a zip-format checkpoint "archive/..." with the given data.pkl and records.
func torchZip(t *testing.T, pkl []byte, records map[string][]byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, data []byte) {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: "archive/" + name, Method: zip.Store})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	add("data.pkl", pkl)
	for name, data := range records {
		add(name, data)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.pth")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Pickle snippets (protocol 2).
func global(module, name string) string { return "c" + module + "\n" + name + "\n" }

func binunicode(s string) string {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(s)))
	return "X" + string(n[:]) + s
}

// oneTensor is a state_dict {"w": float32 tensor of 2 elements in storage "0" of numel elements},
// with the given offset, size and stride.
func oneTensor(numel, offset, size, stride byte) string {
	k := func(b byte) string { return "K" + string([]byte{b}) } // BININT1
	return "\x80\x02" + global("collections", "OrderedDict") + ")R(" + binunicode("w") +
		global("torch._utils", "_rebuild_tensor_v2") + "((" + binunicode("storage") + global("torch", "FloatStorage") +
		binunicode("0") + binunicode("cpu") + k(numel) + "tQ" + k(offset) +
		k(size) + "\x85" + k(stride) + "\x85\x89" + global("collections", "OrderedDict") + ")Rt" + "Ru."
}

func TestReadTorchReadsAHandWrittenPickle(t *testing.T) {
	path := torchZip(t, []byte(oneTensor(3, 1, 2, 1)), map[string][]byte{"data/0": f32bytes(1, 2, 3)})
	f, err := ReadTorch(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Tensors["w"].Float64s(); !slices.Equal(got, []float64{2, 3}) {
		t.Errorf("w = %v, want [2 3]", got)
	}
}

func f32bytes(v ...float32) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.LittleEndian, v)
	return b.Bytes()
}

// Pickles that would run code in Python, or that a state_dict never holds, are refused by name
// before anything is built; lengths and views are bounded by the file.
func TestReadTorchRefusesMaliciousPickles(t *testing.T) {
	cases := []struct {
		name, pkl string
		records   map[string][]byte
		want      string
	}{
		{"GLOBAL os.system", "\x80\x02" + global("os", "system") + binunicode("touch /tmp/pwned") + "\x85R.", nil,
			"pickle global os.system refused"},
		{"GLOBAL posix.system (what pickle writes for os.system)", "\x80\x02" + global("posix", "system") + binunicode("id") + "\x85R.", nil,
			"pickle global posix.system refused"},
		{"GLOBAL builtins.eval", "\x80\x02" + global("builtins", "eval") + binunicode("1") + "\x85R.", nil,
			"pickle global builtins.eval refused"},
		{"GLOBAL copy_reg._reconstructor", "\x80\x02" + global("copy_reg", "_reconstructor") + ".", nil,
			"pickle global copy_reg._reconstructor refused"},
		{"STACK_GLOBAL os.system", "\x80\x04\x8c\x02os\x8c\x06system\x93\x8c\x02id\x85R.", nil,
			"pickle global os.system refused"},
		{"REDUCE of a storage type", "\x80\x02" + global("torch", "FloatStorage") + ")R.", nil,
			"REDUCE of torch.FloatStorage refused"},
		{"REDUCE of a string", "\x80\x02" + binunicode("os.system") + ")R.", nil, "REDUCE requires a Callable"},
		{"NEWOBJ", "\x80\x02" + global("collections", "OrderedDict") + ")\x81.", nil, "opcode NEWOBJ at byte 28 refused"},
		{"INST", "\x80\x02(ios\nsystem\n.", nil, "opcode INST at byte 3 refused"},
		{"unknown opcode", "\x80\x02\xff.", nil, "unknown opcode 0xff"},
		{"a length past the end", "\x80\x04\x8e\x00\x00\x00\x00\x00\x00\x00\x10.", nil, "argument of 1152921504606846976 bytes past the end"},
		{"a frame past the end", "\x80\x04\x95\xff\xff\xff\xff\x00\x00\x00\x00.", nil, "FRAME at byte 2"},
		{"no STOP", "\x80\x02N", nil, "no STOP"},
		{"a list, not a state_dict", "\x80\x02].", nil, "holds a *types.List, not a state_dict"},
		{"a storage larger than the file", oneTensor(250, 0, 2, 1), map[string][]byte{"data/0": f32bytes(1, 2)},
			"250 elements of FloatStorage do not fit"},
		{"a view past its storage", oneTensor(3, 2, 2, 1), map[string][]byte{"data/0": f32bytes(1, 2, 3)},
			"reach past the storage's 3 elements"},
		{"an expanded view", oneTensor(1, 0, 2, 0), map[string][]byte{"data/0": f32bytes(1)},
			"holds more elements than its storage's 1"},
		{"a record shorter than its storage", oneTensor(3, 0, 2, 1), map[string][]byte{"data/0": f32bytes(1, 2)},
			"holds 8 bytes, storage \"0\" needs 12"},
		{"a missing record", oneTensor(3, 0, 2, 1), nil, "no record archive/data/0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadTorch(torchZip(t, []byte(c.pkl), c.records))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	var refused *RefusedGlobalError
	_, err := ReadTorch(torchZip(t, []byte(cases[0].pkl), nil))
	if !errors.As(err, &refused) || refused.Module != "os" || refused.Name != "system" {
		t.Errorf("os.system: %v is not a *RefusedGlobalError naming it", err)
	}
}

// The legacy format's pickles go through the same checks; its storage sizes are checked against the
// file before anything is sliced.
func TestReadTorchLegacyRefusesAndBounds(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("testdata", "pth", "tensors_legacy.pth"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(data []byte) string {
		p := filepath.Join(t.TempDir(), "legacy.pth")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The three header pickles of the real file, then a malicious state_dict.
	u := &unpickler{maxBytes: int64(len(good)), storages: map[string]*storage{}, legacy: true}
	at := 0
	for range 3 {
		_, n, err := u.unpickle(good[at:])
		if err != nil {
			t.Fatal(err)
		}
		at += n
	}
	evil := append(slices.Clone(good[:at]), "\x80\x02"+global("os", "system")+binunicode("id")+"\x85R."...)
	if _, err := ReadTorch(write(evil)); err == nil || !strings.Contains(err.Error(), "pickle global os.system refused") {
		t.Errorf("legacy os.system: %v", err)
	}
	for _, cut := range []int{len(good) - 1, len(good) - 40, at + 10} {
		if _, err := ReadTorch(write(good[:cut])); err == nil {
			t.Errorf("legacy file cut at %d of %d bytes: read without error", cut, len(good))
		}
	}
	if _, err := ReadTorch(write(append(slices.Clone(good), 0))); err == nil || !strings.Contains(err.Error(), "trailing") {
		t.Errorf("legacy file with a trailing byte: %v", err)
	}
}

func TestReadStateDictTellsFormatsApart(t *testing.T) {
	st, err := ReadStateDict(filepath.Join("testdata", "mnist_cnn", "weights.safetensors"))
	if err != nil || st.Metadata["format"] != "pt" {
		t.Errorf("safetensors: %v, metadata %v", err, st)
	}
	junk := filepath.Join(t.TempDir(), "junk.pth")
	if err := os.WriteFile(junk, []byte("not weights at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadTorch(junk); err == nil || !strings.Contains(err.Error(), "not a PyTorch checkpoint") {
		t.Errorf("junk: %v", err)
	}
}

// The classifier is what changes shape with the class count; a file whose classifier has another size
// loads everything else when the classifier may be re-initialised, and is refused otherwise.
func TestHeadVariablesAndReinit(t *testing.T) {
	for net, want := range map[string][]string{
		"resnet50":     {"/model/fc/bias", "/model/fc/weight"},
		"mobilenet_v2": {"/model/classifier/1/bias", "/model/classifier/1/weight"},
	} {
		spec, _ := graphs.Get(net)
		head, err := HeadVariables(testBackend(), spec, graphs.Options{Width: 0.25, NumClasses: 7, ImageSize: 32})
		if err != nil {
			t.Fatal(err)
		}
		if got := sortedKeys(head); !slices.Equal(got, want) {
			t.Errorf("%s: head %v, want %v", net, got, want)
		}
	}
	spec, _ := graphs.Get("mobilenet_v2")
	opts := graphs.Options{Width: 0.25, NumClasses: 3, ImageSize: 32} // the file has 10 classes
	f, err := ReadStateDict(filepath.Join("testdata", "mobilenet_v2", "weights.pth"))
	if err != nil {
		t.Fatal(err)
	}
	template, err := Template(testBackend(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	head, _ := HeadVariables(testBackend(), spec, opts)
	values, skipped, err := FromStateDictReinit(spec, template, f, head)
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != len(template)-2 || strings.Join(skipped, "; ") !=
		"classifier.1.bias [10] (the net's is [3]); classifier.1.weight [10 1280] (the net's is [3 1280])" {
		t.Errorf("%d of %d loaded, skipped %v", len(values), len(template), skipped)
	}
	var fit *FitError
	if _, err := FromStateDict(spec, template, f); !errors.As(err, &fit) || len(fit.Mismatched) != 2 {
		t.Errorf("without re-initialisation: %v", err)
	}
}
