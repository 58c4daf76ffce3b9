package bestiary

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// torchArray is a flat tensor in PyTorch's layout, as scripts/torch_bestiary_dense.py writes it.
type torchArray struct {
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// moveAxis returns a's data with axis from moved to the last position.
func (a torchArray) moveAxis(from int) *tensors.Tensor {
	dims := append([]int(nil), a.Shape...)
	outer, mid, inner := 1, dims[from], 1
	for _, d := range dims[:from] {
		outer *= d
	}
	for _, d := range dims[from+1:] {
		inner *= d
	}
	out := make([]float64, len(a.Data))
	for o := range outer {
		for m := range mid {
			for i := range inner {
				out[(o*inner+i)*mid+m] = a.Data[(o*mid+m)*inner+i]
			}
		}
	}
	return tensors.FromFlatDataAndDimensions(out, append(append(dims[:from:from], dims[from+1:]...), mid)...)
}

// activation converts an NCHW image or NCT sequence to NHWC or NTC (channels last); rows stay.
func (a torchArray) activation() *tensors.Tensor {
	if len(a.Shape) < 3 {
		return tensors.FromFlatDataAndDimensions(append([]float64(nil), a.Data...), a.Shape...)
	}
	return a.moveAxis(1)
}

// param converts a state_dict entry to the layout graphs uses: OIHW kernels to HWIO, Conv1d's OIK to
// KIO (a kernel of 1 to a Linear's [in, out]), a Linear's [out, in] to [in, out].
func (a torchArray) param() *tensors.Tensor {
	switch len(a.Shape) {
	case 2, 3, 4:
		// Moving the out axis last, then the in axis after it, gives [kernel..., in, out].
		t := a.moveAxis(0)
		d := t.Shape().Dimensions
		io := torchArray{Shape: d, Data: tensors.MustCopyFlatData[float64](t)}
		// [in, kernel..., out] -> [kernel..., in, out]: move axis 0 before the last.
		if len(d) > 2 {
			kernel := d[1 : len(d)-1]
			k := 1
			for _, v := range kernel {
				k *= v
			}
			in, out := d[0], d[len(d)-1]
			data := make([]float64, len(io.Data))
			for c := range in {
				for j := range k {
					for f := range out {
						data[(j*in+c)*out+f] = io.Data[(c*k+j)*out+f]
					}
				}
			}
			dims := append(append(append([]int(nil), kernel...), in), out)
			if len(kernel) == 1 && kernel[0] == 1 {
				dims = []int{in, out}
			}
			return tensors.FromFlatDataAndDimensions(data, dims...)
		}
		return t
	}
	return tensors.FromFlatDataAndDimensions(append([]float64(nil), a.Data...), a.Shape...)
}

// torchCase is one layer of the fixture: its state_dict, inputs and outputs in evaluation mode and,
// when present, training mode.
type torchCase struct {
	State  map[string]torchArray `json:"state"`
	Inputs []torchArray          `json:"inputs"`
	Eval   []torchArray          `json:"eval"`
	Train  []torchArray          `json:"train"`
}

// loadTorchState puts a state_dict into ctx: key "a.b.c.weight" is variable weight of scope /a/b/c.
func loadTorchState(ctx *context.Context, state map[string]torchArray) {
	for key, a := range state {
		dot := strings.LastIndex(key, ".")
		ctx.InAbsPath("/"+strings.ReplaceAll(key[:dot], ".", "/")).VariableWithValue(key[dot+1:], a.param())
	}
}

// runLayer builds fn over inputs in float64 and returns its outputs' values (channels last, flat).
func runLayer(t *testing.T, ctx *context.Context, inputs []*tensors.Tensor, fn func(ctx *context.Context, in []*Node) []*Node) [][]float64 {
	t.Helper()
	exec, err := context.NewExec(testBackend(), ctx.Checked(false), fn)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	args := make([]any, len(inputs))
	for i, in := range inputs {
		args[i] = in
	}
	outs, err := exec.Exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	res := make([][]float64, len(outs))
	for i, o := range outs {
		res[i] = tensors.MustCopyFlatData[float64](o)
	}
	return res
}

// scaledMaxDiff is max |got−want| / max|want|.
func scaledMaxDiff(got, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	scale, worst := 0.0, 0.0
	for i := range want {
		scale = max(scale, math.Abs(want[i]))
		worst = max(worst, math.Abs(got[i]-want[i]))
	}
	return worst / scale
}

// TestBestiaryDenseMatchesTorch: the dense group's layers against PyTorch with the same float64 weights
// and inputs (scripts/torch_bestiary_dense.py): torchvision 0.14's ASPP and FeaturePyramidNetwork, and
// the positional encoding, U-Net's down and up steps, NeRF's MLP, WaveNet's stack and MobileViT's block
// written with PyTorch's modules; in evaluation mode and, for the layers with BatchNorm, in training
// mode (dropout 0).
func TestBestiaryDenseMatchesTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/dense_torch.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx map[string]torchCase
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	const tol = 1e-12
	noDropout := 0.0
	opts := graphs.Options{Precision: "float64", DropoutRate: &noDropout}
	layers := map[string]func(ctx *context.Context, in []*Node, train bool, width int) []*Node{
		"asppModule": func(ctx *context.Context, in []*Node, train bool, width int) []*Node {
			return []*Node{ASPPModule(ctx, in[0], train, opts, width, ASPPRates)}
		},
		"fpnModule": func(ctx *context.Context, in []*Node, _ bool, width int) []*Node {
			return FPNModule(ctx.In("fpn"), in, opts, width)
		},
		"unetDown": func(ctx *context.Context, in []*Node, train bool, width int) []*Node {
			return []*Node{UNetDown(ctx, in[0], train, opts, width)}
		},
		"unetUp": func(ctx *context.Context, in []*Node, train bool, width int) []*Node {
			return []*Node{UNetUp(ctx, in[0], in[1], train, opts, width)}
		},
		"nerfMLP": func(ctx *context.Context, in []*Node, _ bool, _ int) []*Node {
			return []*Node{NeRFMLP(ctx, in[0], opts, 9, 6, 8)}
		},
		"waveNetBlock": func(ctx *context.Context, in []*Node, _ bool, width int) []*Node {
			return []*Node{WaveNetBlock(ctx, in[0], opts, width, 4)}
		},
		"positionalEncoding": func(_ *context.Context, in []*Node, _ bool, _ int) []*Node {
			return []*Node{PositionalEncoding(in[0], 4)}
		},
		"mobileVitBlock": func(ctx *context.Context, in []*Node, train bool, _ int) []*Node {
			return []*Node{MobileViTBlock(ctx, in[0], train, opts, 8, 2, 16, 2)}
		},
	}
	if len(fx) != len(layers) {
		t.Errorf("the fixture has %d layers, the test %d", len(fx), len(layers))
	}
	for name, build := range layers {
		c, ok := fx[name]
		if !ok {
			t.Errorf("%s: not in the fixture", name)
			continue
		}
		var inputs []*tensors.Tensor
		for _, in := range c.Inputs {
			inputs = append(inputs, in.activation())
		}
		for _, train := range []bool{false, true} {
			want := c.Eval
			if train {
				if want = c.Train; want == nil {
					continue
				}
			}
			// The output width: channels of an image (NCHW) or sequence (NCT), else the last axis.
			width := want[0].Shape[len(want[0].Shape)-1]
			if len(want[0].Shape) > 2 {
				width = want[0].Shape[1]
			}
			ctx := context.New()
			loadTorchState(ctx, c.State)
			got := runLayer(t, ctx, inputs, func(ctx *context.Context, in []*Node) []*Node { return build(ctx, in, train, width) })
			if len(got) != len(want) {
				t.Errorf("%s (train %v): %d outputs, PyTorch %d", name, train, len(got), len(want))
				continue
			}
			for i, w := range want {
				d := scaledMaxDiff(got[i], tensors.MustCopyFlatData[float64](w.activation()))
				t.Logf("%s (train %v) output %d: max difference %.2g of the largest value", name, train, i, d)
				if !(d < tol) {
					t.Errorf("%s (train %v) output %d against PyTorch: max difference %.3g of the largest value, want < %g", name, train, i, d, tol)
				}
			}
		}
	}
}
