package weights

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func mustTensor(t *testing.T, dtype DType, shape []int, values []float64) *Tensor {
	t.Helper()
	st, err := FromFloat64s(dtype, shape, values)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestEncodeGolden(t *testing.T) {
	data, err := Encode(map[string]*Tensor{
		"b": mustTensor(t, I64, nil, []float64{7}),
		"a": mustTensor(t, F32, []int{2}, []float64{1, -2}),
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	header := `{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"b":{"dtype":"I64","shape":[],"data_offsets":[8,16]}}`
	padded := header + strings.Repeat(" ", (8-len(header)%8)%8)
	want := binary.LittleEndian.AppendUint64(nil, uint64(len(padded)))
	want = append(want, padded...)
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(1))
	want = binary.LittleEndian.AppendUint32(want, math.Float32bits(-2))
	want = binary.LittleEndian.AppendUint64(want, 7)
	if string(data) != string(want) {
		t.Fatalf("encoding:\n got %q\nwant %q", data, want)
	}
	if (8+len(padded))%8 != 0 {
		t.Fatal("payload not 8-byte aligned")
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	rng := rand.New(rand.NewPCG(1, 2))
	in := map[string]*Tensor{}
	for _, dt := range []DType{F64, F32, F16, BF16} {
		v := make([]float64, 2*3*4)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		in["t."+string(dt)] = mustTensor(t, dt, []int{2, 3, 4}, v)
	}
	in["empty"] = mustTensor(t, F32, []int{0, 5}, nil)
	in["count"], _ = FromInt64s(nil, []int64{-3})
	if err := Write(path, in, map[string]string{"net": "x"}); err != nil {
		t.Fatal(err)
	}
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata["net"] != "x" || len(f.Tensors) != len(in) {
		t.Fatalf("metadata %v, %d tensors", f.Metadata, len(f.Tensors))
	}
	for name, want := range in {
		got := f.Tensors[name]
		if got == nil || got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || string(got.Data) != string(want.Data) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
	v, _ := f.Tensors["count"].Float64s()
	if len(v) != 1 || v[0] != -3 {
		t.Errorf("int64 scalar decodes to %v", v)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("atomic write left %d files in the directory", len(entries))
	}
}

func TestWriteRefusesBadTensors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.safetensors")
	bad := map[string]*Tensor{"w": {DType: F32, Shape: []int{3}, Data: make([]byte, 8)}}
	if err := Write(path, bad, nil); err == nil || !strings.Contains(err.Error(), `"w"`) {
		t.Fatalf("short payload: %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a refused write created the file")
	}
	if err := Write(path, map[string]*Tensor{"w": {DType: "F8", Shape: []int{1}, Data: []byte{0}}}, nil); err == nil {
		t.Fatal("unknown dtype accepted")
	}
}

// rawFile assembles a file from a literal header and payload.
func rawFile(header string, payload []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), payload...)
}

func TestDecodeValidates(t *testing.T) {
	f32 := func(name string, shape string, b, e int) string {
		return `"` + name + `":{"dtype":"F32","shape":` + shape + `,"data_offsets":[` + strconv.Itoa(b) + `,` + strconv.Itoa(e) + `]}`
	}
	cases := []struct {
		name    string
		data    []byte
		wantErr []string
	}{
		{"too short", []byte{1, 2, 3}, []string{"too short"}},
		{"header past end", append(binary.LittleEndian.AppendUint64(nil, 1000), "{}"...), []string{"header length 1000"}},
		{"not json", rawFile("{x", nil), []string{"header"}},
		{"not an object", rawFile("[1]", nil), []string{"JSON object"}},
		{"unknown dtype", rawFile(`{"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1)), []string{`"w"`, "unknown dtype"}},
		{"no shape", rawFile(`{"w":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4)), []string{`"w"`, "no shape"}},
		{"unknown field", rawFile(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, make([]byte, 4)), []string{`"w"`, "unknown field"}},
		{"offsets outside", rawFile("{"+f32("w", "[2]", 0, 8)+"}", make([]byte, 4)), []string{`"w"`, "outside the 4-byte payload"}},
		{"size mismatch", rawFile("{"+f32("w", "[3]", 0, 8)+"}", make([]byte, 8)), []string{`"w"`, "needs 12 bytes"}},
		{"negative dim", rawFile("{"+f32("w", "[-1]", 0, 0)+"}", nil), []string{`"w"`, "negative"}},
		{"overlap", rawFile("{"+f32("a", "[2]", 0, 8)+","+f32("b", "[2]", 4, 12)+"}", make([]byte, 12)), []string{`"b"`, "overlap", `"a"`}},
		{"gap", rawFile("{"+f32("a", "[1]", 0, 4)+","+f32("b", "[1]", 8, 12)+"}", make([]byte, 12)), []string{`"b"`, "gap"}},
		{"trailing", rawFile("{"+f32("a", "[1]", 0, 4)+"}", make([]byte, 6)), []string{"2 trailing bytes"}},
		{"duplicate", rawFile("{"+f32("a", "[1]", 0, 4)+","+f32("a", "[1]", 0, 4)+"}", make([]byte, 4)), []string{`"a"`, "twice"}},
		{"garbage after header", rawFile("{"+f32("a", "[1]", 0, 4)+"}x", make([]byte, 4)), []string{"after the JSON object"}},
		{"bad metadata", rawFile(`{"__metadata__":{"k":1}}`, nil), []string{"__metadata__"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode("some/file.safetensors", c.data)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append(c.wantErr, "some/file.safetensors") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// The same structure with consistent offsets is fine, in any header order.
	ok := rawFile("{"+f32("b", "[1]", 4, 8)+","+f32("a", "[1]", 0, 4)+`}   `, make([]byte, 8))
	if _, err := Decode("ok", ok); err != nil {
		t.Fatal(err)
	}
}
