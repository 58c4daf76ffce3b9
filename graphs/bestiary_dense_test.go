package graphs

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// torchArray is a flat tensor in PyTorch's layout, as scripts/torch_bestiary_dense.py writes it.
type torchArray struct {
	Shape []int     `json:"shape"`
	Data  []float64 `json:"data"`
}

// nhwc converts an NCHW array to an NHWC tensor.
func (a torchArray) nhwc() *tensors.Tensor {
	n, c, h, w := a.Shape[0], a.Shape[1], a.Shape[2], a.Shape[3]
	out := make([]float64, len(a.Data))
	for b := range n {
		for k := range c {
			for i := range h {
				for j := range w {
					out[((b*h+i)*w+j)*c+k] = a.Data[((b*c+k)*h+i)*w+j]
				}
			}
		}
	}
	return tensors.FromFlatDataAndDimensions(out, n, h, w, c)
}

// param converts a state_dict entry to the layout graphs uses: OIHW kernels to HWIO.
func (a torchArray) param() *tensors.Tensor {
	if len(a.Shape) != 4 {
		return tensors.FromFlatDataAndDimensions(append([]float64(nil), a.Data...), a.Shape...)
	}
	o, in, kh, kw := a.Shape[0], a.Shape[1], a.Shape[2], a.Shape[3]
	out := make([]float64, len(a.Data))
	for f := range o {
		for c := range in {
			for i := range kh {
				for j := range kw {
					out[((i*kw+j)*in+c)*o+f] = a.Data[((f*in+c)*kh+i)*kw+j]
				}
			}
		}
	}
	return tensors.FromFlatDataAndDimensions(out, kh, kw, in, o)
}

type bestiaryDenseFixture struct {
	ASPP struct {
		State map[string]torchArray `json:"state"`
		X     torchArray            `json:"x"`
		Eval  torchArray            `json:"eval"`
		Train torchArray            `json:"train"`
	} `json:"aspp"`
	FPN struct {
		State   map[string]torchArray `json:"state"`
		Levels  []torchArray          `json:"levels"`
		Outputs []torchArray          `json:"outputs"`
	} `json:"fpn"`
}

// loadTorchState puts a state_dict into ctx under root: key "a.b.c.weight" is variable weight of
// scope root/a/b/c.
func loadTorchState(ctx *context.Context, root string, state map[string]torchArray) {
	for key, a := range state {
		dot := strings.LastIndex(key, ".")
		scope := "/" + root + "/" + strings.ReplaceAll(key[:dot], ".", "/")
		ctx.InAbsPath(scope).VariableWithValue(key[dot+1:], a.param())
	}
}

// runLayer builds fn over inputs in float64 and returns its outputs' values (NHWC, flat).
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

// TestBestiaryDenseMatchesTorch: torchvision 0.14's ASPP (evaluation mode, and training mode with its
// dropout at 0) and FeaturePyramidNetwork, with the same float64 weights and inputs, against
// graphs.ASPPModule and graphs.FPNModule (the fixture: scripts/torch_bestiary_dense.py).
func TestBestiaryDenseMatchesTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/bestiary_dense_torch.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx bestiaryDenseFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	const tol = 1e-12
	opts := Options{Precision: "float64"}

	for _, train := range []bool{false, true} {
		ctx := context.New()
		loadTorchState(ctx, "aspp", fx.ASPP.State)
		want := fx.ASPP.Eval
		if train {
			want = fx.ASPP.Train
		}
		out := want.Shape[1]
		got := runLayer(t, ctx, []*tensors.Tensor{fx.ASPP.X.nhwc()}, func(ctx *context.Context, in []*Node) []*Node {
			zero := 0.0
			o := opts
			o.DropoutRate = &zero
			return []*Node{ASPPModule(ctx.In("aspp"), in[0], train, o, out, ASPPRates)}
		})
		wantNHWC := tensors.MustCopyFlatData[float64](want.nhwc())
		if d := scaledMaxDiff(got[0], wantNHWC); !(d < tol) {
			t.Errorf("ASPP (train %v) against torchvision: max relative difference %.3g, want < %g", train, d, tol)
		}
	}

	ctx := context.New()
	loadTorchState(ctx, "fpn", fx.FPN.State)
	var levels []*tensors.Tensor
	for _, l := range fx.FPN.Levels {
		levels = append(levels, l.nhwc())
	}
	target := fx.FPN.Outputs[0].Shape[1]
	got := runLayer(t, ctx, levels, func(ctx *context.Context, in []*Node) []*Node {
		return FPNModule(ctx.In("fpn"), in, opts, target)
	})
	if len(got) != len(fx.FPN.Outputs) {
		t.Fatalf("FPN: %d outputs, torchvision %d", len(got), len(fx.FPN.Outputs))
	}
	for i, want := range fx.FPN.Outputs {
		if d := scaledMaxDiff(got[i], tensors.MustCopyFlatData[float64](want.nhwc())); !(d < tol) {
			t.Errorf("FPN level %d against torchvision: max relative difference %.3g, want < %g", i, d, tol)
		}
	}
}
