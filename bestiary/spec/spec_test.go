package spec

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/netspec"
	"github.com/trainer/trainer/graphs/testbackend"
)

// coreKinds are the kinds netspec registers itself, read before Register adds the bestiary's.
var coreKinds []string

// TestMain checks that importing the package registers nothing, then registers the bestiary's kinds
// (twice: the second call must change nothing) for every test.
func TestMain(m *testing.M) {
	if _, ok := netspec.Lookup("dense_block"); ok {
		fmt.Fprintln(os.Stderr, "the bestiary's kinds were registered before Register was called")
		os.Exit(1)
	}
	coreKinds = netspec.KindNames()
	Register()
	Register()
	os.Exit(m.Run())
}

// bestiaryKinds are the kinds Register added.
func bestiaryKinds() []string {
	var names []string
	for _, k := range netspec.KindNames() {
		if !slices.Contains(coreKinds, k) {
			names = append(names, k)
		}
	}
	return names
}

var testBackend = testbackend.Go

// parse reads a YAML list as the config loader hands it over.
func parse(t *testing.T, text string) []any {
	t.Helper()
	var list []any
	if err := yaml.Unmarshal([]byte(text), &list); err != nil {
		t.Fatal(err)
	}
	return list
}

func load(t *testing.T, text string, sizes netspec.Sizes) *netspec.Net {
	t.Helper()
	n, err := netspec.Load("test.yaml", parse(t, text), sizes)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func testImages(batch, size, channels int) *tensors.Tensor {
	values := make([]float32, batch*size*size*channels)
	for i := range values {
		values[i] = float32((i*7919)%251)/125 - 1
	}
	return tensors.FromFlatDataAndDimensions(values, batch, size, size, channels)
}

// bestiaryTokens uses the kinds that read tokens.
const bestiaryTokens = `
- input: {size: 12, channels: 2, classes: 4}
- patch_embed: {patch: 4, dim: 8}
- mamba_block: {dim: 8, stateSize: 4, expand: 2, nBlocks: 2}
- transformer_decoder: {dim: 8, heads: 2, mlpDim: 12, nBlocks: 2, nQueries: 3}
- token_pool
- dense: {units: classes}
`

// countSpecs together use every kind Register adds.
var countSpecs = map[string]string{"vision blocks": visionBlocks, "bestiary dense": bestiaryDense, "bestiary tokens": bestiaryTokens}

// TestSpecCountsMatchTheGraph: for specs covering every bestiary kind, the parameters and MACs
// inferred at load equal those of the built graph, the built shapes equal the inferred ones (Build
// panics otherwise), and a training-mode forward pass runs.
func TestSpecCountsMatchTheGraph(t *testing.T) {
	covered := map[string]bool{}
	for name, text := range countSpecs {
		net := load(t, text, netspec.Sizes{})
		for _, r := range net.Rows() {
			covered[r.Kind] = true
		}
		sum, err := graphs.Summarize(testBackend(), net.Spec("netspec"), graphs.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		params, macs := net.Totals()
		if params != int64(sum.Parameters) || 2*macs != sum.ForwardFLOPs || params == 0 || macs == 0 {
			t.Errorf("%s: inferred %d parameters and %d MACs, the graph has %d and %d", name, params, macs, sum.Parameters, sum.ForwardFLOPs/2)
		}
		exec, err := context.NewExec(testBackend(), context.New(), func(ctx *context.Context, x *Node) *Node {
			return net.Build(ctx.In(graphs.ModelScope), x, true, graphs.Options{Seed: 1})
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Exec(testImages(2, net.Input[0], net.Input[2]))
		exec.Finalize()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := out[0].Shape().Dimensions; len(got) != 2 || got[0] != 2 || got[1] != net.Classes {
			t.Errorf("%s: logits %v, want [2 %d]", name, got, net.Classes)
		}
	}
	kinds := bestiaryKinds()
	if len(kinds) == 0 {
		t.Fatal("Register added no kind")
	}
	for _, k := range kinds {
		if !covered[k] {
			t.Errorf("layer kind %s is in no spec of this test", k)
		}
	}
}

// TestSpecGradientsReachEveryParameter: in a training-mode step of the specs that use the dense and
// token kinds, the loss's gradient is finite and non-zero for every trainable variable, so each kind's
// parameters train (TestVisionBlocksTrainAndDecay does this for the vision blocks).
func TestSpecGradientsReachEveryParameter(t *testing.T) {
	for name, text := range map[string]string{"bestiary dense": bestiaryDense, "bestiary tokens": bestiaryTokens} {
		net := load(t, text, netspec.Sizes{})
		var names []string
		exec, err := context.NewExec(testBackend(), context.New(), func(ctx *context.Context, x *Node) []*Node {
			g := x.Graph()
			logits := net.Build(ctx.In(graphs.ModelScope), x, true, graphs.Options{Seed: 3})
			loss := ReduceAllSum(Mul(logits, Iota(g, logits.Shape(), 1))) // weights the classes differently
			var wrt []*Node
			names = names[:0]
			ctx.EnumerateVariables(func(v *context.Variable) {
				if v.Trainable && v.InUseByGraph(g) {
					names = append(names, v.Scope()+"/"+v.Name())
					wrt = append(wrt, v.ValueGraph(g))
				}
			})
			grads := Gradient(loss, wrt...)
			norms := make([]*Node, len(grads))
			for i, gr := range grads {
				norms[i] = ReduceAllSum(Square(gr))
			}
			return norms
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Exec(testImages(4, net.Input[0], net.Input[2]))
		exec.Finalize()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(out) < 10 {
			t.Fatalf("%s: %d trainable variables, want every kind's", name, len(out))
		}
		for i, o := range out {
			if v := tensors.ToScalar[float32](o); !(v > 0) || v > 1e30 {
				t.Errorf("%s: gradient of %s has squared norm %v", name, names[i], v)
			}
		}
	}
}

// TestSpecInBFloat16: under bfloat16 compute the specs build and give float32 logits of the right shape.
func TestSpecInBFloat16(t *testing.T) {
	for name, text := range map[string]string{"bestiary dense": bestiaryDense, "bestiary tokens": bestiaryTokens} {
		net := load(t, text, netspec.Sizes{})
		exec, err := context.NewExec(testBackend(), context.New(), func(ctx *context.Context, x *Node) *Node {
			return net.Build(ctx.In(graphs.ModelScope), x, false, graphs.Options{Precision: "bfloat16", Seed: 1})
		})
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Exec(testImages(2, net.Input[0], net.Input[2]))
		exec.Finalize()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := tensors.MustCopyFlatData[float32](out[0])
		if len(got) != 2*net.Classes {
			t.Errorf("%s: %d logits, want %d", name, len(got), 2*net.Classes)
		}
		for _, v := range got {
			if v != v || v > 1e30 || v < -1e30 {
				t.Errorf("%s: logit %v", name, v)
			}
		}
	}
}

// TestDocsListEveryKind: docs/bestiary.md's NetSpec table is the bestiary's kinds as the registry
// renders them, so every kind and argument is documented as the code reads it.
func TestDocsListEveryKind(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bestiary.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := netspec.KindTableOf(bestiaryKinds()); !strings.Contains(string(doc), want) {
		t.Errorf("docs/bestiary.md lacks the layer table as the registry renders it; paste:\n%s", want)
	}
}

// TestSpellingsNameTheSameKind: a kind and its arguments may be written as the book's signatures spell
// them (camel case), in snake case or as registered; all give the same layer, scope and counts, and an
// argument given in two spellings is one error naming it.
func TestSpellingsNameTheSameKind(t *testing.T) {
	in := "- input: {size: 8, channels: 4, classes: 4}\n"
	var first []netspec.Row
	for _, line := range []string{
		"- denseBlock: {ic: 4, growthRate: 2, nLayers: 2}",
		"- dense_block: {ic: 4, growth_rate: 2, n_layers: 2}",
		"- DenseBlock: {ic: 4, GrowthRate: 2, n_Layers: 2}",
	} {
		rows := load(t, in+line+"\n- globalavgpool\n- dense: {units: classes}", netspec.Sizes{}).Rows()
		if rows[1].Kind != "dense_block" || rows[1].Scope != "dense_block1" || rows[1].Params == 0 {
			t.Errorf("%s: row %+v, want kind dense_block, scope dense_block1 and parameters", line, rows[1])
		}
		if first == nil {
			first = rows
		} else if fmt.Sprint(rows) != fmt.Sprint(first) {
			t.Errorf("%s: rows %+v, want those of the book's spelling %+v", line, rows, first)
		}
	}
	_, err := netspec.Load("test.yaml", parse(t, in+"- dense_block: {ic: 4, growth_rate: 2, growthRate: 2, n_layers: 1}"), netspec.Sizes{})
	if err == nil || !strings.Contains(err.Error(), "given twice") || !strings.Contains(err.Error(), "growth") {
		t.Errorf("growth_rate and growthRate together: %v, want one error saying the argument is given twice", err)
	}
}
