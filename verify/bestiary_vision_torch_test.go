package verify

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify/reference"
	"github.com/trainer/trainer/weights"
)

// fixtureKeys are the entries of a block fixture that are not the module's state_dict.
var fixtureKeys = map[string]bool{"input": true, "output_eval": true, "output_train": true}

// TestVisionBlocksMatchTorchvision imports torchvision 0.14's modules' float64 weights
// (scripts/torch_bestiary_vision.py) into the graphs blocks by their state_dict keys and compares the
// outputs in eval mode (running statistics) and in training mode (batch statistics).
func TestVisionBlocksMatchTorchvision(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node
	}{
		{"dense_block", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return graphs.DenseBlock(ctx, x, train, opts, 4, 4, 3)
		}},
		{"transition_layer", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return graphs.TransitionLayer(ctx, x, train, opts, 4)
		}},
		{"inception_module", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return graphs.InceptionModule(ctx, x, train, opts, 4, 3, 5, 2, 3, 2)
		}},
		{"shufflev2_block", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return graphs.ShuffleV2Units(ctx, x, train, opts, 16, 3)
		}},
		{"swin_stage", func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			return graphs.SwinStage(ctx, x, train, opts, 2, 3, 4, []float64{0, 0})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := weights.ReadStateDict(filepath.Join("testdata", "bestiary_vision", c.name+".pth"))
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
				got := fromHost(out[0])
				if dimsString(got.Dims) != dimsString(want.Dims) {
					t.Fatalf("train %v: output %v, torchvision's %v", train, got.Dims, want.Dims)
				}
				abs, rel := reference.Errors(got.Data, want.Data)
				t.Logf("train %v: output %s, max abs err %.2e, rel %.2e", train, dimsString(got.Dims), abs, rel)
				if rel > 1e-10 {
					t.Errorf("train %v: max relative error %.2e against torchvision, want ≤ 1e-10", train, rel)
				}
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
