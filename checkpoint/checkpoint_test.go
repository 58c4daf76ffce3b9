package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

func contextWithVariables(t *testing.T) *context.Context {
	t.Helper()
	ctx := context.New()
	ctx.In("model").In("dense").VariableWithValue("weights", [][]float32{{1, 2, 3}, {4, 5, 6}})
	ctx.In("model").In("dense").VariableWithValue("biases", []float32{-1, 0.5})
	ctx.InAbsPath("/optimizer/model/dense/weights").VariableWithValue("velocity", [][]float64{{0.25, 0}, {0, 1}})
	return ctx
}

// testHeader is the header a run writes at step, without its config.
func testHeader(step int) Header { return Header{TrainerVersion: "0.1.0", Net: "linear", Step: step} }

func TestCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	ctx := contextWithVariables(t)
	path, err := Save(dir, ctx, Header{TrainerVersion: "0.1.0", Net: "linear", Step: 42, Epoch: 1, ConfigHash: "0123456789abcdef"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ckpt.Header.Step != 42 || ckpt.Header.Net != "linear" || ckpt.Header.ConfigHash != "0123456789abcdef" {
		t.Errorf("header = %+v", ckpt.Header)
	}
	if len(ckpt.Tensors) != 3 {
		t.Fatalf("%d tensors, want 3", len(ckpt.Tensors))
	}
	w := tensors.MustCopyFlatData[float32](ckpt.Tensors["/model/dense/weights"])
	if want := []float32{1, 2, 3, 4, 5, 6}; !slices.Equal(w, want) {
		t.Errorf("weights = %v, want %v", w, want)
	}
	v := tensors.MustCopyFlatData[float64](ckpt.Tensors["/optimizer/model/dense/weights/velocity"])
	if want := []float64{0.25, 0, 0, 1}; !slices.Equal(v, want) {
		t.Errorf("velocity = %v, want %v", v, want)
	}
	// Loading into a fresh context goes through the context.Loader interface.
	fresh := context.New()
	fresh.SetLoader(ckpt)
	got := fresh.In("model").In("dense").GetVariable("biases")
	if got == nil {
		t.Fatal("variable not loaded through the Loader")
	}
	if b := tensors.MustCopyFlatData[float32](got.MustValue()); !slices.Equal(b, []float32{-1, 0.5}) {
		t.Errorf("biases = %v", b)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left behind: %s", e.Name())
		}
	}
}

func TestCheckpointRefusesDamagedFiles(t *testing.T) {
	dir := t.TempDir()
	path, err := Save(dir, contextWithVariables(t), testHeader(1), 3)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(path)
	cases := map[string][]byte{
		"truncated":   good[:len(good)-10],
		"tiny":        good[:5],
		"flipped bit": append(append([]byte{}, good[:len(good)/2]...), append([]byte{good[len(good)/2] ^ 1}, good[len(good)/2+1:]...)...),
		"wrong magic": append([]byte("NOTACKPT"), good[8:]...),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad.tckpt")
			if err := os.WriteFile(bad, body, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(bad)
			if err == nil {
				t.Fatal("loaded a damaged checkpoint")
			}
			if !strings.Contains(err.Error(), bad) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestCheckpointKeepsNewestN(t *testing.T) {
	dir := t.TempDir()
	ctx := contextWithVariables(t)
	for step := 1; step <= 5; step++ {
		if _, err := Save(dir, ctx, testHeader(step*100), 2); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || !strings.HasSuffix(paths[0], FileName(400)) || !strings.HasSuffix(paths[1], FileName(500)) {
		t.Fatalf("kept %v, want the checkpoints of steps 400 and 500", paths)
	}
	ckpt, ok, err := Latest(dir)
	if err != nil || !ok || ckpt.Header.Step != 500 {
		t.Fatalf("latest = %v, %v, %v", ckpt, ok, err)
	}
}
