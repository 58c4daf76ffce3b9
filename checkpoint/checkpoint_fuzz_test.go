package checkpoint

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"
)

// frameCheckpoint lays out a checkpoint file around a header and a payload with a valid CRC, so tests
// and the fuzzer reach the checks behind the checksum.
func frameCheckpoint(version uint32, header, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString(magic)
	_ = binary.Write(&b, binary.LittleEndian, version)
	_ = binary.Write(&b, binary.LittleEndian, uint32(len(header)))
	b.Write(header)
	b.Write(payload)
	_ = binary.Write(&b, binary.LittleEndian, crc32.Checksum(b.Bytes(), crcTable))
	return b.Bytes()
}

// withCRC replaces the last 4 bytes of data by the CRC of the rest.
func withCRC(data []byte) []byte {
	if len(data) < 4 {
		return data
	}
	out := append([]byte{}, data...)
	binary.LittleEndian.PutUint32(out[len(out)-4:], crc32.Checksum(out[:len(out)-4], crcTable))
	return out
}

func validCheckpointBytes(t testing.TB) []byte {
	t.Helper()
	ctx := context.New()
	ctx.In("model").In("fc").VariableWithValue("weight", [][]float32{{1, 2}, {3, 4}})
	ctx.In("model").In("fc").VariableWithValue("bias", []float32{0.5, -0.5})
	ctx.InAbsPath("/optimizer/model/fc/weight").VariableWithValue("m", [][]float64{{0, 1}, {2, 3}})
	file, err := encode(ctx, Header{TrainerVersion: "0.1.0", Net: "linear", Step: 3, ConfigHash: ConfigHash("seed: 1\n"), Config: "seed: 1\n"})
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// TestCheckpointOtherVersionsRefused: a file of a future (2) or a never-written (0) version is refused
// naming the version found and the one expected, even when its checksum is not where version 1 has it.
func TestCheckpointOtherVersionsRefused(t *testing.T) {
	good := validCheckpointBytes(t)
	for _, v := range []uint32{0, 2} {
		for _, fixCRC := range []bool{true, false} {
			data := append([]byte{}, good...)
			binary.LittleEndian.PutUint32(data[len(magic):], v)
			if fixCRC {
				data = withCRC(data)
			}
			path := filepath.Join(t.TempDir(), "v.tckpt")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			want := map[uint32]string{0: "format version 0, expected 1", 2: "format version 2, expected 1: written by a newer trainer"}[v]
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
				t.Errorf("version %d (valid CRC %v): %v; want %q and the path", v, fixCRC, err, want)
			}
		}
	}
}

// TestCheckpointRefusesInconsistentHeaders: headers that pass the checksum but describe tensors the
// payload cannot hold are refused with the tensor's name, never allocated or half-loaded.
func TestCheckpointRefusesInconsistentHeaders(t *testing.T) {
	payload := make([]byte, 16)
	cases := map[string]struct{ header, want string }{
		"negative dim":  {`{"tensors":[{"name":"a","dtype":"Float32","shape":[-1,4],"offset":0,"bytes":16}]}`, "tensor a: shape [-1 4]"},
		"overflow":      {`{"tensors":[{"name":"a","dtype":"Float32","shape":[4294967296,4294967296],"offset":0,"bytes":0}]}`, "does not fit a 16-byte payload"},
		"past the end":  {`{"tensors":[{"name":"a","dtype":"Float32","shape":[4],"offset":4,"bytes":16}]}`, "16 bytes at offset 4"},
		"bytes ≠ shape": {`{"tensors":[{"name":"a","dtype":"Float32","shape":[2],"offset":0,"bytes":16}]}`, "do not fit shape [2]"},
		"bad dtype":     {`{"tensors":[{"name":"a","dtype":"Float7","shape":[1],"offset":0,"bytes":4}]}`, `unknown dtype "Float7"`},
		"duplicate":     {`{"tensors":[{"name":"a","dtype":"Int8","shape":[1],"offset":0,"bytes":1},{"name":"a","dtype":"Int8","shape":[1],"offset":1,"bytes":1}]}`, "listed twice"},
		"overlap":       {`{"tensors":[{"name":"a","dtype":"Int8","shape":[2],"offset":0,"bytes":2},{"name":"b","dtype":"Int8","shape":[2],"offset":1,"bytes":2}]}`, "tensor b: offset 1 overlaps"},
		"not JSON":      {`{"tensors":`, "header:"},
		"huge rank":     {`{"tensors":[{"name":"a","dtype":"Int8","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"offset":0,"bytes":1}]}`, "rank 17"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parse("x.tckpt", frameCheckpoint(formatVersion, []byte(c.header), payload))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "x.tckpt") {
				t.Errorf("%v; want %q", err, c.want)
			}
		})
	}
	// The header length field pointing past the file.
	data := frameCheckpoint(formatVersion, []byte(`{}`), nil)
	binary.LittleEndian.PutUint32(data[len(magic)+4:], 1<<31)
	if _, err := parse("x", withCRC(data)); err == nil || !strings.Contains(err.Error(), "header length") {
		t.Errorf("header length past the end: %v", err)
	}
}

// TestCheckpointWriteFailureKeepsPrevious: when the new checkpoint cannot be written (here: its name is
// taken by a directory, so the rename fails after the data was written; or the checkpoint directory is
// a file), the error names the file, the previous checkpoint is intact, nothing is pruned, and no
// temporary file is left for --resume or anything else to find.
func TestCheckpointWriteFailureKeepsPrevious(t *testing.T) {
	dir := t.TempDir()
	ctx := contextWithVariables(t)
	first, err := Save(dir, ctx, testHeader(1), 1)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(first)
	blocked := filepath.Join(dir, FileName(2))
	if err := os.MkdirAll(filepath.Join(blocked, "occupied"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Save(dir, ctx, testHeader(2), 1)
	if err == nil || !strings.Contains(err.Error(), blocked) || !strings.Contains(err.Error(), "previous checkpoints kept") {
		t.Fatalf("write over a directory: %v; want an error naming %s", err, blocked)
	}
	after, err := os.ReadFile(first)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the previous checkpoint changed or vanished: %v", err)
	}
	if ckpt, ok, err := Latest(dir); err != nil || !ok || ckpt.Path != first {
		t.Errorf("latest checkpoint after the failure: %v, %v, %v; want %s", ckpt, ok, err, first)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}

	// A checkpoint directory that is a file.
	file := filepath.Join(t.TempDir(), "checkpoints")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Save(file, ctx, testHeader(1), 1); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("checkpoint directory is a file: %v", err)
	}
	if err := SaveFile(filepath.Join(file, "best.tckpt"), ctx, testHeader(0)); err == nil ||
		!strings.Contains(err.Error(), file) {
		t.Errorf("best checkpoint under a file: %v", err)
	}
	// A read-only directory (only meaningful when not root, who may write anyway).
	if os.Geteuid() != 0 {
		ro := t.TempDir()
		prev, err := Save(ro, ctx, testHeader(1), 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(ro, 0o755) })
		if _, err := Save(ro, ctx, testHeader(2), 3); err == nil ||
			!strings.Contains(err.Error(), filepath.Join(ro, FileName(2))) {
			t.Errorf("read-only directory: %v", err)
		}
		if _, err := Load(prev); err != nil {
			t.Errorf("previous checkpoint after a failed write: %v", err)
		}
	}
}

// FuzzParseCheckpoint: no input makes the reader panic or allocate beyond the input; whatever it
// accepts is consistent. Each input is tried as given and with its checksum made valid, so the fuzzer
// gets past the CRC to the header and tensor checks. `go test` runs the seeds.
func FuzzParseCheckpoint(f *testing.F) {
	good := validCheckpointBytes(f)
	f.Add(good)
	f.Add(good[:len(good)-7])
	f.Add(good[:20])
	f.Add([]byte(magic))
	f.Add(frameCheckpoint(1, []byte(`{"tensors":[{"name":"a","dtype":"Float32","shape":[-3],"offset":0,"bytes":-12}]}`), nil))
	f.Add(frameCheckpoint(1, []byte(`{"tensors":[{"name":"a","dtype":"Float64","shape":[],"offset":0,"bytes":8}]}`), make([]byte, 8)))
	f.Add(frameCheckpoint(1, []byte(`{"tensors":[{"name":"a","dtype":"Bool","shape":[3,0],"offset":9,"bytes":0}]}`), make([]byte, 9)))
	f.Add(frameCheckpoint(2, []byte(`{}`), nil))
	f.Add(frameCheckpoint(1, []byte(`null`), nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, withCRC(data)} {
			ckpt, err := parse("fuzz.tckpt", in)
			if err != nil {
				if !strings.Contains(err.Error(), "fuzz.tckpt") {
					t.Fatalf("error %q does not name the file", err)
				}
				continue
			}
			if len(ckpt.Tensors) != len(ckpt.Header.Tensors) {
				t.Fatalf("%d tensors loaded, header lists %d", len(ckpt.Tensors), len(ckpt.Header.Tensors))
			}
			var total int64
			for _, rec := range ckpt.Header.Tensors {
				tt := ckpt.Tensors[rec.Name]
				if int64(tt.Shape().Memory()) != rec.Bytes {
					t.Fatalf("tensor %s: %d bytes, header says %d", rec.Name, tt.Shape().Memory(), rec.Bytes)
				}
				total += rec.Bytes
			}
			if total > int64(len(in)) {
				t.Fatalf("accepted %d tensor bytes from a %d-byte file", total, len(in))
			}
		}
	})
}
