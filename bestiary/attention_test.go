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

// torchDimsArray is a flat tensor with its dims, as scripts/torch_bestiary_attention.py writes it.
type torchDimsArray struct {
	Dims []int     `json:"dims"`
	Data []float64 `json:"data"`
}

// TestTransformerDecoderMatchesTorch: with nn.TransformerDecoder's weights (scripts/
// torch_bestiary_attention.py, float64), TransformerDecoder gives PyTorch's output on the same memory.
func TestTransformerDecoderMatchesTorch(t *testing.T) {
	raw, err := os.ReadFile("testdata/transformer_decoder_torch.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Dim, Heads, Blocks, Queries int
		MLPDim                      int       `json:"mlp_dim"`
		QueryEmbed                  []float64 `json:"query_embed"`
		Memory, Output              torchDimsArray
		StateDict                   map[string]torchDimsArray `json:"state_dict"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	set := func(scope, name string, data []float64, dims ...int) {
		ctx.InAbsPath("/"+scope).VariableWithValue(name, tensors.FromFlatDataAndDimensions(data, dims...))
	}
	set("dec/query_embed", "weight", fx.QueryEmbed, fx.Queries, fx.Dim)
	for key, a := range fx.StateDict {
		cut := strings.LastIndex(key, ".")
		scope, name := "dec/"+strings.ReplaceAll(key[:cut], ".", "/"), key[cut+1:]
		if len(a.Dims) == 2 { // PyTorch's [out, in] -> [in, out]
			rows, cols := a.Dims[0], a.Dims[1]
			tr := make([]float64, len(a.Data))
			for r := range rows {
				for c := range cols {
					tr[c*rows+r] = a.Data[r*cols+c]
				}
			}
			set(scope, name, tr, cols, rows)
		} else {
			set(scope, name, a.Data, a.Dims...)
		}
	}
	before := len(fx.StateDict) + 1
	opts := graphs.Options{Precision: "float64"}
	exec, err := context.NewExec(testBackend(), ctx.Checked(false), func(ctx *context.Context, memory *Node) *Node {
		return TransformerDecoder(ctx.In("dec"), memory, fx.Heads, fx.MLPDim, fx.Blocks, fx.Queries, opts)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	out, err := exec.Exec(tensors.FromFlatDataAndDimensions(fx.Memory.Data, fx.Memory.Dims...))
	if err != nil {
		t.Fatal(err)
	}
	if n := ctx.NumVariables(); n != before {
		t.Errorf("the decoder has %d variables, PyTorch's state_dict and the queries %d", n, before)
	}
	got := tensors.MustCopyFlatData[float64](out[0])
	if dims := out[0].Shape().Dimensions; len(got) != len(fx.Output.Data) || dims[1] != fx.Queries {
		t.Fatalf("output %v, PyTorch's %v", dims, fx.Output.Dims)
	}
	worst := 0.0
	for i := range got {
		worst = max(worst, math.Abs(got[i]-fx.Output.Data[i]))
	}
	t.Logf("%d values, largest difference from nn.TransformerDecoder %g", len(got), worst)
	if worst > 1e-10 {
		t.Errorf("largest difference from nn.TransformerDecoder: %g", worst)
	}
}

// TestMambaBlocksAreCausal: changing the input at time step 3 leaves the outputs before it unchanged
// (causal conv, forward scan) and changes those from it on, and the state carries it to the last step.
func TestMambaBlocksAreCausal(t *testing.T) {
	const b, l, d, changed = 2, 6, 8, 3
	x := make([]float64, b*l*d)
	for i := range x {
		x[i] = math.Sin(0.7*float64(i) + 0.2)
	}
	y := append([]float64(nil), x...)
	for n := range b {
		for c := range d {
			y[(n*l+changed)*d+c] += 0.5
		}
	}
	exec, err := context.NewExec(testBackend(), context.New(), func(ctx *context.Context, a, c *Node) []*Node {
		opts := graphs.Options{Precision: "float64", Seed: 4}
		return []*Node{MambaBlocks(ctx, a, 4, 2, 2, opts), MambaBlocks(ctx.Reuse(), c, 4, 2, 2, opts)}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	out, err := exec.Exec(tensors.FromFlatDataAndDimensions(x, b, l, d), tensors.FromFlatDataAndDimensions(y, b, l, d))
	if err != nil {
		t.Fatal(err)
	}
	p, q := tensors.MustCopyFlatData[float64](out[0]), tensors.MustCopyFlatData[float64](out[1])
	for n := range b {
		for step := range l {
			diff := 0.0
			for c := range d {
				i := (n*l+step)*d + c
				diff = max(diff, math.Abs(p[i]-q[i]))
			}
			if step < changed && diff != 0 {
				t.Errorf("example %d: step %d changed by %g after a change at step %d", n, step, diff, changed)
			}
			if step >= changed && diff < 1e-9 {
				t.Errorf("example %d: step %d unchanged (%g) after a change at step %d", n, step, diff, changed)
			}
		}
	}
}
