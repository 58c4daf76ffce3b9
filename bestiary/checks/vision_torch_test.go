package checks

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/bestiary"
	bref "github.com/trainer/trainer/bestiary/reference"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify"
	"github.com/trainer/trainer/verify/reference"
	"github.com/trainer/trainer/weights"
)

// fixtureKeys are the entries of a block fixture that are not the module's state_dict.
var fixtureKeys = map[string]bool{"input": true, "output_eval": true, "output_train": true}

// TestVisionBlocksMatchTorchvision imports torchvision 0.14's modules' float64 weights
// (scripts/torch_bestiary_vision.py) into the graphs blocks by their state_dict keys and compares the
// outputs in eval mode (running statistics) and in training mode (batch statistics); the plain-loop
// reference of the op checks, fed the same weights, must give torchvision's training-mode output too.
func TestVisionBlocksMatchTorchvision(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node
		ref   func(x reference.Tensor, sd torchWeights) reference.Tensor
	}{
		{"dense_block", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return graphs.DenseBlock(ctx, x, train, opts, 4, 4, 3)
		}, func(x reference.Tensor, sd torchWeights) reference.Tensor {
			var layers []bref.DenseLayer
			for _, l := range []string{"denselayer1.", "denselayer2.", "denselayer3."} {
				layers = append(layers, bref.DenseLayer{Norm1: sd.bn(l+"norm1", torchEps), Conv1: sd.conv(l + "conv1"),
					Norm2: sd.bn(l+"norm2", torchEps), Conv2: sd.conv(l + "conv2")})
			}
			return bref.DenseBlock(x, layers)
		}},
		{"transition_layer", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return graphs.TransitionLayer(ctx, x, train, opts, 4)
		}, func(x reference.Tensor, sd torchWeights) reference.Tensor {
			return bref.Transition(x, sd.bn("norm", torchEps), sd.conv("conv"))
		}},
		{"inception_module", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return graphs.InceptionModule(ctx, x, train, opts, 4, 3, 5, 2, 3, 2)
		}, func(x reference.Tensor, sd torchWeights) reference.Tensor {
			basic := func(p string) bref.ConvBN { return sd.convBN(p+".conv", p+".bn", googLeNetEps) }
			return bref.Inception(x, basic("branch1"), [2]bref.ConvBN{basic("branch2.0"), basic("branch2.1")},
				[2]bref.ConvBN{basic("branch3.0"), basic("branch3.1")}, basic("branch4.1"))
		}},
		{"shufflev2_block", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return bestiary.ShuffleV2Units(ctx, x, train, opts, 16, 3)
		}, func(x reference.Tensor, sd torchWeights) reference.Tensor {
			for u, p := range []string{"0.", "1.", "2."} {
				seq := func(branch string, i int) bref.ConvBN {
					return sd.convBN(p+branch+"."+strconv.Itoa(i), p+branch+"."+strconv.Itoa(i+1), torchEps)
				}
				var b1 [2]bref.ConvBN
				if u == 0 {
					b1 = [2]bref.ConvBN{seq("branch1", 0), seq("branch1", 2)}
				}
				x = bref.ShuffleV2Unit(x, u == 0, b1, [3]bref.ConvBN{seq("branch2", 0), seq("branch2", 3), seq("branch2", 5)})
			}
			return x
		}},
		{"swin_stage", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return graphs.SwinStage(ctx, x, train, opts, 2, 3, 4, []float64{0, 0})
		}, func(x reference.Tensor, sd torchWeights) reference.Tensor {
			for i, p := range []string{"0.", "1."} {
				x = bref.SwinBlock(x, bref.SwinBlockParams{
					Norm1G: sd.get(p + "norm1.weight").Data, Norm1B: sd.get(p + "norm1.bias").Data,
					QKVW: sd.linear(p + "attn.qkv"), QKVB: sd.get(p + "attn.qkv.bias").Data,
					ProjW: sd.linear(p + "attn.proj"), ProjB: sd.get(p + "attn.proj.bias").Data,
					Table:  sd.get(p + "attn.relative_position_bias_table"),
					Norm2G: sd.get(p + "norm2.weight").Data, Norm2B: sd.get(p + "norm2.bias").Data,
					FC1W: sd.linear(p + "mlp.0"), FC1B: sd.get(p + "mlp.0.bias").Data,
					FC2W: sd.linear(p + "mlp.3"), FC2B: sd.get(p + "mlp.3.bias").Data,
					Eps: 1e-5, Heads: 2, Window: 3, Shift: i, GELU: reference.GELUErf,
				})
			}
			return x
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := weights.ReadStateDict(filepath.Join("testdata", "vision", c.name+".pth"))
			if err != nil {
				t.Fatal(err)
			}
			input := fixtureTensor(t, f, "input")
			spec := graphs.Spec{
				Name:       c.name,
				InputShape: [3]int{input.Dims[1], input.Dims[2], input.Dims[3]},
				Build: func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
					return c.build(ctx, graphs.ToCompute(x, opts), train, opts)
				},
				TorchIgnoredKey: func(key string) bool { return fixtureKeys[key] },
				TorchBuffers:    swinIndexBuffers,
			}
			opts := graphs.Options{Precision: "float64"}
			for _, train := range []bool{false, true} {
				ctx := context.New()
				if n, err := weights.Load(ctx, testBackend(), spec, opts, f.Path); err != nil || n == 0 {
					t.Fatalf("importing %s: %d variables, %v", f.Path, n, err)
				}
				exec, err := context.NewExec(testBackend(), ctx.Checked(false), func(ctx *context.Context, x *Node) *Node {
					return c.build(ctx.In(graphs.ModelScope), x, train, opts)
				})
				if err != nil {
					t.Fatal(err)
				}
				out, err := exec.Exec(tensors.FromFlatDataAndDimensions(input.Data, input.Dims...))
				exec.Finalize()
				if err != nil {
					t.Fatal(err)
				}
				if out[0].DType() != dtypes.Float64 {
					t.Fatalf("output %s, want float64", out[0].DType())
				}
				want := fixtureTensor(t, f, map[bool]string{false: "output_eval", true: "output_train"}[train])
				got := verify.FromHost(out[0])
				if verify.DimsString(got.Dims) != verify.DimsString(want.Dims) {
					t.Fatalf("train %v: output %v, torchvision's %v", train, got.Dims, want.Dims)
				}
				abs, rel := reference.Errors(got.Data, want.Data)
				t.Logf("train %v: output %s, max abs err %.2e, rel %.2e", train, verify.DimsString(got.Dims), abs, rel)
				if rel > 1e-10 {
					t.Errorf("train %v: max relative error %.2e against torchvision, want ≤ 1e-10", train, rel)
				}
			}
			want := fixtureTensor(t, f, "output_train")
			got := c.ref(input, torchWeights{t, f})
			abs, rel := reference.Errors(got.Data, want.Data)
			t.Logf("reference: max abs err %.2e, rel %.2e", abs, rel)
			if verify.DimsString(got.Dims) != verify.DimsString(want.Dims) || rel > 1e-10 {
				t.Errorf("the reference gives %v with max relative error %.2e against torchvision's %v, want ≤ 1e-10", got.Dims, rel, want.Dims)
			}
		})
	}
}

func fixtureTensor(t *testing.T, f *weights.File, key string) reference.Tensor {
	t.Helper()
	st, ok := f.Tensors[key]
	if !ok {
		t.Fatalf("%s has no %q", f.Path, key)
	}
	v, err := st.Float64s()
	if err != nil {
		t.Fatal(err)
	}
	return reference.FromData(v, st.Shape...)
}

// torchWeights reads a fixture's state_dict in the reference's layouts.
type torchWeights struct {
	t *testing.T
	f *weights.File
}

func (w torchWeights) get(key string) reference.Tensor { return fixtureTensor(w.t, w.f, key) }

// conv reads key.weight [O, I, kh, kw] as HWIO [kh, kw, I, O].
func (w torchWeights) conv(key string) reference.Tensor {
	oihw := w.get(key + ".weight")
	o, i, kh, kw := oihw.Dims[0], oihw.Dims[1], oihw.Dims[2], oihw.Dims[3]
	hwio := reference.New(kh, kw, i, o)
	for a := range o {
		for b := range i {
			for y := range kh {
				for x := range kw {
					hwio.Set(oihw.At(a, b, y, x), y, x, b, a)
				}
			}
		}
	}
	return hwio
}

// linear reads key.weight [out, in] as [in, out].
func (w torchWeights) linear(key string) reference.Tensor {
	oi := w.get(key + ".weight")
	io := reference.New(oi.Dims[1], oi.Dims[0])
	for a := range oi.Dims[0] {
		for b := range oi.Dims[1] {
			io.Set(oi.At(a, b), b, a)
		}
	}
	return io
}

func (w torchWeights) bn(key string, eps float64) bref.BN {
	return bref.BN{Gamma: w.get(key + ".weight").Data, Beta: w.get(key + ".bias").Data, Eps: eps}
}

func (w torchWeights) convBN(conv, bn string, eps float64) bref.ConvBN {
	return bref.ConvBN{W: w.conv(conv), BN: w.bn(bn, eps)}
}

// swinIndexBuffers is torchvision's relative_position_index beside each bias table (3×3 windows): the
// import checks the file's equals the one the graph computes.
func swinIndexBuffers(keys []string) map[string]graphs.TorchBuffer {
	out := map[string]graphs.TorchBuffer{}
	for _, key := range keys {
		if prefix, ok := strings.CutSuffix(key, "relative_position_bias_table"); ok {
			var index []int64
			for _, v := range graphs.SwinRelativePositionIndex(3) {
				index = append(index, int64(v))
			}
			out[prefix+"relative_position_index"] = graphs.TorchBuffer{Shape: []int{len(index)}, Values: index}
		}
	}
	return out
}
