package weights

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/testbackend"
)

var testBackend = testbackend.Go

// testNet has one of every kind of variable the layout rules treat: a conv kernel, a depthwise kernel,
// BatchNorm (with running statistics), LayerNorm, a rank-1 layer_scale (torch [C,1,1]), a rank-3
// embedding-like parameter, and a Linear head.
const testNet = "weights_test_net"

func init() {
	graphs.Register(graphs.Spec{
		Name: testNet, Description: "test-only net", InputShape: [3]int{8, 8, 3}, NumClasses: 5,
		TorchShape: graphs.LayerScaleTorchShape, // its layer_scale is stored as torchvision ConvNeXt's
		Build: func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			g := x.Graph()
			x = graphs.ToCompute(x, opts)
			x = graphs.Conv(ctx.In("stem").In("0"), x, graphs.ConvConfig{Filters: 4, Kernel: 3, Stride: 2}, opts)
			x = graphs.BatchNorm(ctx.In("stem").In("1"), x, train, graphs.TorchBN, opts)
			x = graphs.Conv(ctx.In("dw"), x, graphs.ConvConfig{Filters: 4, Kernel: 3, Groups: 4, Bias: true}, opts)
			x = graphs.LayerNorm(ctx.In("norm"), x, 1e-6, opts)
			scale := graphs.Param(ctx.In("block"), g, opts, "layer_scale", graphs.InitConst(0.5), 0, 0, 4)
			x = Mul(x, Reshape(scale, 1, 1, 1, 4))
			x = graphs.GlobalAvgPool(x)
			offset := graphs.Param(ctx, g, opts, "offset", graphs.InitNormal(1), 0, 0, 1, 1, 4)
			x = Add(x, Reshape(offset, 1, 4))
			x = graphs.Linear(ctx.In("head"), x, graphs.LinearConfig{Units: 5}, opts)
			return graphs.FromCompute(x, opts)
		},
	})
}

func TestTransposeAndLayouts(t *testing.T) {
	// HWIO [2,3,4,5] -> OIHW [5,4,2,3]: element (h,w,i,o) lands at (o,i,h,w).
	dims := []int{2, 3, 4, 5}
	data := make([]int, 2*3*4*5)
	for i := range data {
		data[i] = i
	}
	convnext, err := graphs.Get("convnext_tiny")
	if err != nil {
		t.Fatal(err)
	}
	var plain graphs.Spec
	perm, torchDims := torchLayout(plain, "/model/conv", "weight", dims)
	if !slices.Equal(torchDims, []int{5, 4, 2, 3}) {
		t.Fatalf("torch dims %v", torchDims)
	}
	out := transpose(data, dims, perm)
	for h := range 2 {
		for w := range 3 {
			for i := range 4 {
				for o := range 5 {
					src := ((h*3+w)*4+i)*5 + o
					dst := ((o*4+i)*2+h)*3 + w
					if out[dst] != src {
						t.Fatalf("(%d,%d,%d,%d): got %d, want %d", h, w, i, o, out[dst], src)
					}
				}
			}
		}
	}
	if back := transpose(out, torchDims, inversePerm(perm)); !slices.Equal(back, data) {
		t.Fatal("inverse permutation does not restore the kernel")
	}
	if _, d := torchLayout(plain, "/model/dw", "weight", []int{3, 3, 1, 8}); !slices.Equal(d, []int{8, 1, 3, 3}) {
		t.Errorf("depthwise kernel -> %v", d)
	}
	if _, d := torchLayout(plain, "/model/fc", "weight", []int{7, 3}); !slices.Equal(d, []int{3, 7}) {
		t.Errorf("linear weight -> %v", d)
	}
	if p, d := torchLayout(convnext, "/model/features/1/0", "layer_scale", []int{6}); p != nil || !slices.Equal(d, []int{6, 1, 1}) {
		t.Errorf("layer_scale -> %v %v", p, d)
	}
	if p, d := torchLayout(convnext, "/model", "pos_embed", []int{1, 5, 6}); p != nil || !slices.Equal(d, []int{1, 5, 6}) {
		t.Errorf("pos_embed -> %v %v", p, d)
	}
	m := transpose([]int{1, 2, 3, 4, 5, 6}, []int{2, 3}, []int{1, 0})
	if !slices.Equal(m, []int{1, 4, 2, 5, 3, 6}) {
		t.Errorf("matrix transpose %v", m)
	}
}

// initialised builds the net in a fresh context, runs it once so every variable is created, and
// randomises all values (BatchNorm statistics included) so that eval mode is a real test.
func initialised(t *testing.T, name string, opts graphs.Options) (*context.Context, graphs.Spec, []float32) {
	t.Helper()
	spec, err := graphs.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	ev, err := NewEvaluator(testBackend(), ctx, spec, opts, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Finalize()
	in := InputShape(spec, opts)
	images := randomImages(2, in[1], in[2], in[3], 7)
	if _, err := ev.Logits(images, 2, in[1], in[2], in[3]); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	ctx.EnumerateVariables(func(v *context.Variable) {
		value := v.MustValue()
		n := value.Shape().Size()
		switch value.DType() {
		case dtypes.Float32:
			vals := make([]float32, n)
			for i := range vals {
				vals[i] = float32(0.1 + 0.5*rng.Float64())
			}
			v.MustSetValue(tensors.FromFlatDataAndDimensions(vals, value.Shape().Dimensions...))
		case dtypes.Float64:
			vals := make([]float64, n)
			for i := range vals {
				vals[i] = float64(float32(0.1 + 0.5*rng.Float64())) // export writes float32
			}
			v.MustSetValue(tensors.FromFlatDataAndDimensions(vals, value.Shape().Dimensions...))
		}
	})
	return ctx, spec, images
}

func randomImages(n, h, w, c int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]float32, n*h*w*c)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

func logitsOf(t *testing.T, ctx *context.Context, spec graphs.Spec, opts graphs.Options, reuse bool, images []float32) [][]float64 {
	t.Helper()
	ev, err := NewEvaluator(testBackend(), ctx, spec, opts, reuse)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Finalize()
	in := InputShape(spec, opts)
	rows, err := ev.Logits(images, len(images)/(in[1]*in[2]*in[3]), in[1], in[2], in[3])
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestExportImportRoundTrip(t *testing.T) {
	for _, c := range []struct {
		net  string
		opts graphs.Options
		keys map[string][]int // a few exported keys and their PyTorch shapes
	}{
		{testNet, graphs.Options{}, map[string][]int{
			"stem.0.weight": {4, 3, 3, 3}, "stem.1.running_var": {4}, "stem.1.num_batches_tracked": {},
			"dw.weight": {4, 1, 3, 3}, "dw.bias": {4}, "block.layer_scale": {4, 1, 1}, "offset": {1, 1, 4},
			"head.weight": {5, 4}, "norm.weight": {4},
		}},
		{testNet, graphs.Options{Precision: "float64"}, map[string][]int{"head.weight": {5, 4}}},
		{"mnist_cnn", graphs.Options{Width: 0.25}, map[string][]int{
			"conv1.weight": {8, 1, 3, 3}, "conv2.weight": {16, 8, 3, 3}, "fc1.weight": {32, 12 * 12 * 16}, "fc2.bias": {10},
		}},
	} {
		t.Run(c.net+"/"+c.opts.Precision, func(t *testing.T) {
			ctx, spec, images := initialised(t, c.net, c.opts)
			want := logitsOf(t, ctx, spec, c.opts, true, images)
			path := filepath.Join(t.TempDir(), "w.safetensors")
			if err := Save(path, spec, ctx, map[string]string{"step": "3"}); err != nil {
				t.Fatal(err)
			}
			f, err := Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Metadata["net"] != c.net || f.Metadata["step"] != "3" || f.Metadata["format"] != "pt" {
				t.Errorf("metadata %v", f.Metadata)
			}
			for key, shape := range c.keys {
				st := f.Tensors[key]
				if st == nil || !slices.Equal(st.Shape, shape) {
					t.Errorf("%s: %+v, want shape %v", key, st, shape)
				}
			}
			for name, st := range f.Tensors {
				wantType := F32
				if strings.HasSuffix(name, BatchTrackedKey) {
					wantType = I64
				}
				if st.DType != wantType {
					t.Errorf("%s exported as %s", name, st.DType)
				}
			}

			fresh := context.New()
			n, err := Load(fresh, testBackend(), spec, c.opts, path)
			if err != nil {
				t.Fatal(err)
			}
			orig, _ := ContextVariables(ctx)
			loaded, _ := ContextVariables(fresh)
			if n != len(orig) || len(loaded) != len(orig) {
				t.Fatalf("loaded %d variables (%d in the context), the net has %d", n, len(loaded), len(orig))
			}
			for path, a := range orig {
				b := loaded[path]
				if b == nil || !a.Shape().Equal(b.Shape()) {
					t.Fatalf("%s: loaded %v, want %v", path, b, a.Shape())
				}
				av, _ := tensorFloat64s(a)
				bv, _ := tensorFloat64s(b)
				if !slices.Equal(av, bv) {
					t.Fatalf("%s: values differ after the round trip", path)
				}
			}
			got := logitsOf(t, fresh, spec, c.opts, true, images)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Fatalf("logits row %d: %v after import, %v before", i, got[i], want[i])
				}
			}
		})
	}
}

func TestImportListsEveryProblem(t *testing.T) {
	ctx, spec, _ := initialised(t, testNet, graphs.Options{})
	vars, _ := ContextVariables(ctx)
	sd, err := ToStateDict(spec, vars)
	if err != nil {
		t.Fatal(err)
	}
	delete(sd, "stem.1.running_mean")
	delete(sd, "dw.bias")
	sd["extra.weight"] = sd["head.weight"]
	sd["head.weight"] = mustTensor(t, F32, []int{4, 5}, make([]float64, 20)) // transposed: a mismatch
	sd["norm.bias"] = mustTensor(t, F32, []int{2, 2}, make([]float64, 4))    // same count, other shape
	delete(sd, "stem.1.num_batches_tracked")                                 // optional
	template, err := Template(testBackend(), spec, graphs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = FromStateDict(spec, template, &File{Path: "w.safetensors", Tensors: sd})
	var fit *FitError
	if !errors.As(err, &fit) {
		t.Fatalf("error %v is not a FitError", err)
	}
	if !slices.Equal(fit.Missing, []string{"dw.bias", "stem.1.running_mean"}) ||
		!slices.Equal(fit.Unexpected, []string{"extra.weight"}) || len(fit.Mismatched) != 2 {
		t.Fatalf("missing %v, unexpected %v, mismatched %v", fit.Missing, fit.Unexpected, fit.Mismatched)
	}
	msg := err.Error()
	for _, w := range []string{"w.safetensors", testNet, "head.weight: file [4 5], net expects [5 4]", "norm.bias"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error lacks %q:\n%s", w, msg)
		}
	}
	// A rank-1 layer_scale is read from torch's [C,1,1] and from a plain [C].
	sd2, _ := ToStateDict(spec, vars)
	sd2["block.layer_scale"] = &Tensor{DType: F32, Shape: []int{4}, Data: sd2["block.layer_scale"].Data}
	if _, err := FromStateDict(spec, template, &File{Path: "x", Tensors: sd2}); err != nil {
		t.Fatalf("layer_scale [C]: %v", err)
	}
}

// Swin's relative_position_index has no variable: export writes it (Spec.TorchBuffers), import accepts
// it when it is the net's constant and refuses another one.
func TestTorchBuffersRoundTrip(t *testing.T) {
	opts := graphs.Options{Width: 0.0625, NumClasses: 10, ImageSize: 32}
	ctx, spec, _ := initialised(t, "swin_t", opts)
	vars, _ := ContextVariables(ctx)
	sd, err := ToStateDict(spec, vars)
	if err != nil {
		t.Fatal(err)
	}
	const key = "features.5.3.attn.relative_position_index"
	index, ok := sd[key]
	if !ok || index.DType != I64 || !slices.Equal(index.Shape, []int{49 * 49}) {
		t.Fatalf("export wrote %s as %+v, want int64 [2401]", key, index)
	}
	values, _ := index.Float64s()
	// Token 0 (row 0, column 0) against token 48 (row 6, column 6): offset (−6, −6), table row 0; against
	// itself: offset (0, 0), row 6·13+6.
	if values[48] != 0 || values[0] != 84 {
		t.Errorf("%s[48] = %v, [0] = %v; want 0 and 84", key, values[48], values[0])
	}
	template, err := Template(testBackend(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromStateDict(spec, template, &File{Path: "ok", Tensors: sd}); err != nil {
		t.Fatalf("import of our own export: %v", err)
	}
	wrong := slices.Clone(values)
	wrong[1] = 5
	sd[key] = mustTensor(t, I64, []int{len(wrong)}, wrong)
	_, err = FromStateDict(spec, template, &File{Path: "wrong", Tensors: sd})
	var fit *FitError
	if !errors.As(err, &fit) || len(fit.Mismatched) != 1 || !strings.Contains(fit.Mismatched[0], key) {
		t.Fatalf("a wrong %s should be the one mismatch, got %v", key, err)
	}
}

// torchvision's densenet checkpoints spell the dense layers' modules "norm.1", "conv.2": import renames
// them (Spec.TorchLegacyKey) and reads the same values; a file holding both spellings of a key is refused.
func TestLegacyKeysImport(t *testing.T) {
	opts := graphs.Options{Width: 0.125, NumClasses: 10, ImageSize: 32}
	ctx, spec, _ := initialised(t, "densenet121", opts)
	vars, _ := ContextVariables(ctx)
	sd, err := ToStateDict(spec, vars)
	if err != nil {
		t.Fatal(err)
	}
	legacy := map[string]*Tensor{}
	renamed := 0
	for key, st := range sd {
		old := key
		for _, m := range []string{"norm1", "norm2", "conv1", "conv2"} {
			if strings.Contains(key, ".denselayer") && strings.Contains(key, "."+m+".") {
				old = strings.Replace(key, "."+m+".", "."+m[:4]+"."+m[4:]+".", 1)
				renamed++
			}
		}
		legacy[old] = st
	}
	// 58 dense layers, each with two BatchNorms (weight, bias, running_mean, running_var,
	// num_batches_tracked) and two conv weights.
	if renamed != 58*12 {
		t.Fatalf("%d keys renamed, want %d", renamed, 58*12)
	}
	template, err := Template(testBackend(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := FromStateDict(spec, template, &File{Path: "current", Tensors: sd})
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromStateDict(spec, template, &File{Path: "legacy", Tensors: legacy})
	if err != nil {
		t.Fatalf("legacy keys: %v", err)
	}
	for path, w := range want {
		if g, ok := got[path]; !ok || !slices.Equal(tensors.MustCopyFlatData[float32](g), tensors.MustCopyFlatData[float32](w)) {
			t.Fatalf("%s differs when read from the legacy keys", path)
		}
	}
	legacy["features.denseblock1.denselayer1.norm1.weight"] = sd["features.denseblock1.denselayer1.norm1.weight"]
	_, err = FromStateDict(spec, template, &File{Path: "both", Tensors: legacy})
	var fit *FitError
	if !errors.As(err, &fit) || !strings.Contains(err.Error(), "denselayer1.norm.1.weight") {
		t.Fatalf("both spellings of a key should be refused, got %v", err)
	}
}

// googlenet leaves out torchvision's auxiliary heads: a checkpoint holding them (as torchvision's
// ImageNet file does) imports, other extra keys are still refused.
func TestIgnoredKeysImport(t *testing.T) {
	opts := graphs.Options{Width: 0.125, NumClasses: 10, ImageSize: 32}
	ctx, spec, _ := initialised(t, "googlenet", opts)
	vars, _ := ContextVariables(ctx)
	sd, err := ToStateDict(spec, vars)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sd["aux1.fc2.weight"]; ok {
		t.Fatal("export wrote an auxiliary head the net does not have")
	}
	sd["aux1.conv.conv.weight"] = mustTensor(t, F32, []int{128, 512, 1, 1}, make([]float64, 128*512))
	sd["aux2.fc2.bias"] = mustTensor(t, F32, []int{1000}, make([]float64, 1000))
	template, err := Template(testBackend(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromStateDict(spec, template, &File{Path: "aux", Tensors: sd}); err != nil {
		t.Fatalf("auxiliary heads should be skipped: %v", err)
	}
	sd["aux3.fc.bias"] = sd["aux2.fc2.bias"]
	_, err = FromStateDict(spec, template, &File{Path: "aux3", Tensors: sd})
	var fit *FitError
	if !errors.As(err, &fit) || !slices.Equal(fit.Unexpected, []string{"aux3.fc.bias"}) {
		t.Fatalf("aux3.fc.bias should be the one unexpected key, got %v", err)
	}
}
