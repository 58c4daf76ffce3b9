package spec

import (
	"errors"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/netspec"
)

// visionBlocks uses every vision block of the bestiary: the Swin stage on a 6×6 map with 4×4 windows
// (padded to 8×8, its second block shifted by 2), the strided and width-keeping forms of both
// ShuffleNets.
const visionBlocks = `
- input: {size: 12, channels: 3, classes: 4}
- conv: {filters: 8, kernel: 3, bias: false}
- dense_block: {ic: 8, growth_rate: 4, n_layers: 2}
- transition_layer: {ic: 16, oc: 8}
- swin_stage: {dim: 8, heads: 2, mlp_dim: 16, window_size: 4, n_blocks: 2}
- inception_module: {ic: 8, b1out: 4, b2reduce: 4, b2out: 6, b3reduce: 2, b3out: 4, b4out: 2}
- shufflev2_block: {ic: 16, oc: 24, n_units: 2}
- shufflev2_block: {ic: 24, oc: 24, n_units: 1}
- shuffle_block: {ic: 24, oc: 48, groups: 3, n_units: 2}
- shuffle_block: {ic: 48, oc: 48, groups: 4, n_units: 1}
- darknet_block: {channels: 48, n_blocks: 2}
- csp_block: {ic: 48, oc: 16, n_blocks: 1}
- globalavgpool
- dense: {units: classes}
`

// TestVisionBlockShapes: the blocks' inferred output shapes, and the parameter counts of the blocks
// whose torchvision modules have a known size (DenseNet-121's first dense block and transition,
// GoogLeNet's inception3a, shufflenet_v2_x1_0's stage2, swin_t's first stage).
func TestVisionBlockShapes(t *testing.T) {
	net := load(t, visionBlocks, netspec.Sizes{})
	want := map[string]string{
		"dense_block2": "[12, 12, 16]", "transition_layer3": "[6, 6, 8]", "swin_stage4": "[6, 6, 8]", "inception_module5": "[6, 6, 16]",
		"shufflev2_block6": "[3, 3, 24]", "shufflev2_block7": "[3, 3, 24]", "shuffle_block8": "[2, 2, 48]", "shuffle_block9": "[2, 2, 48]",
		"darknet_block10": "[2, 2, 48]", "csp_block11": "[2, 2, 16]",
	}
	for _, l := range net.Layers {
		if w, ok := want[l.Scope]; ok && netspec.ShapeString(l.Out) != w {
			t.Errorf("%s: output %s, want %s", l.Scope, netspec.ShapeString(l.Out), w)
		}
	}
	// torchvision 0.14's modules, counted with sum(p.numel() for p in m.parameters()).
	for _, c := range []struct {
		spec   string
		params int64
	}{
		{"- input: {size: 56, channels: 64, classes: 256}\n- dense_block: {ic: 64, growth_rate: 32, n_layers: 6}\n- globalavgpool", 335040},
		{"- input: {size: 56, channels: 256, classes: 128}\n- transition_layer: {ic: 256, oc: 128}\n- globalavgpool", 33280},
		{"- input: {size: 28, channels: 192, classes: 256}\n- inception_module: {ic: 192, b1out: 64, b2reduce: 96, b2out: 128, b3reduce: 16, b3out: 32, b4out: 32}\n- globalavgpool", 155872},
		{"- input: {size: 56, channels: 24, classes: 116}\n- shufflev2_block: {ic: 24, oc: 116, n_units: 4}\n- globalavgpool", 30192},
		{"- input: {size: 56, channels: 96, classes: 96}\n- swin_stage: {dim: 96, heads: 3, mlp_dim: 384, window_size: 7, n_blocks: 2}\n- globalavgpool", 224694},
	} {
		params, _ := load(t, c.spec, netspec.Sizes{}).Totals()
		if params != c.params {
			t.Errorf("%s: %d parameters, torchvision's module has %d", strings.Split(c.spec, "\n")[1], params, c.params)
		}
	}
}

// TestVisionBlockErrors: a block's argument that does not fit its input is one error naming the field.
func TestVisionBlockErrors(t *testing.T) {
	const in = "- input: {size: 8, channels: 8, classes: 3}\n"
	for _, c := range []struct{ name, text, field, want string }{
		{"dense ic", in + "- dense_block: {ic: 4, growth_rate: 2, n_layers: 1}", "ic", "4, but the input has 8 channels"},
		{"transition ic", in + "- transition_layer: {ic: 6, oc: 4}", "ic", "6, but the input has 8 channels"},
		{"inception ic", in + "- inception_module: {ic: 3, b1out: 1, b2reduce: 1, b2out: 1, b3reduce: 1, b3out: 1, b4out: 1}", "ic", "3, but the input has 8"},
		{"shufflev2 odd", in + "- shufflev2_block: {ic: 8, oc: 9, n_units: 1}", "oc", "9 is odd"},
		{"swin dim", in + "- swin_stage: {dim: 4, heads: 2, mlp_dim: 8, window_size: 2, n_blocks: 1}", "dim", "4, but the input has 8 channels"},
		{"swin heads", in + "- swin_stage: {dim: 8, heads: 3, mlp_dim: 16, window_size: 2, n_blocks: 1}", "heads", "3 does not divide dim 8"},
		{"swin mlp", in + "- swin_stage: {dim: 8, heads: 2, mlp_dim: 12, window_size: 2, n_blocks: 1}", "mlp_dim", "12 is not a multiple of dim 8"},
		{"shuffle groups", in + "- shuffle_block: {ic: 8, oc: 16, groups: 3, n_units: 1}", "groups", "3 does not divide 8"},
		{"shuffle narrower", in + "- shuffle_block: {ic: 8, oc: 4, groups: 1, n_units: 1}", "oc", "4 is narrower than ic 8"},
		{"darknet channels", in + "- darknet_block: {channels: 6, n_blocks: 1}", "channels", "6, but the input has 8 channels"},
		{"csp oc", in + "- csp_block: {ic: 8, oc: 6, n_blocks: 1}", "oc", "6 is not a multiple of 4"},
	} {
		_, err := netspec.Load("bad.yaml", parse(t, c.text), netspec.Sizes{})
		var e *netspec.Error
		if !errors.As(err, &e) {
			t.Errorf("%s: got %v, want an *Error", c.name, err)
			continue
		}
		if e.Path != "1" || e.Field != c.field || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (path %q field %q), want layer 1's %s saying %q", c.name, err, e.Path, e.Field, c.field, c.want)
		}
	}
}

// TestVisionBlocksTrainAndDecay: a training step's gradient reaches every parameter of the blocks, and
// exactly the norms' weights (and the Swin bias tables) are in the no-weight-decay group.
func TestVisionBlocksTrainAndDecay(t *testing.T) {
	net := load(t, visionBlocks, netspec.Sizes{})
	var names []string
	var noDecay []bool
	exec, err := context.NewExec(testBackend(), context.New(), func(ctx *context.Context, x *Node) []*Node {
		g := x.Graph()
		logits := net.Build(ctx.In(graphs.ModelScope), x, true, graphs.Options{Seed: 3})
		loss := ReduceAllSum(Mul(logits, Iota(g, logits.Shape(), 1)))
		var wrt []*Node
		names, noDecay = names[:0], noDecay[:0]
		ctx.EnumerateVariables(func(v *context.Variable) {
			if v.Trainable && v.InUseByGraph(g) {
				names = append(names, v.Scope()+"/"+v.Name())
				noDecay = append(noDecay, net.NoWeightDecay(v.Scope(), v.Name()))
				wrt = append(wrt, v.ValueGraph(g))
			}
		})
		var norms []*Node
		for _, gr := range Gradient(loss, wrt...) {
			norms = append(norms, ReduceAllSum(Square(gr)))
		}
		return norms
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Exec(testImages(2, 12, 3))
	exec.Finalize()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d trainable variables", len(out))
	if len(out) < 100 {
		t.Fatalf("%d trainable variables, want every block's", len(out))
	}
	for i, o := range out {
		if v := tensors.ToScalar[float32](o); !(v > 0) || v > 1e30 {
			t.Errorf("gradient of %s has squared norm %v", names[i], v)
		}
		name := names[i][strings.LastIndex(names[i], "/")+1:]
		scope := names[i][:strings.LastIndex(names[i], "/")]
		last := scope[strings.LastIndex(scope, "/")+1:]
		norm := strings.HasPrefix(last, "norm") || strings.HasSuffix(last, "bn") ||
			strings.Contains(scope, "shufflev2_block") && (strings.HasSuffix(scope, "branch1/1") || strings.HasSuffix(scope, "branch1/3") ||
				strings.HasSuffix(scope, "branch2/1") || strings.HasSuffix(scope, "branch2/4") || strings.HasSuffix(scope, "branch2/6"))
		want := name == "bias" || name == "relative_position_bias_table" || norm
		if noDecay[i] != want {
			t.Errorf("%s: no weight decay %v, want %v", names[i], noDecay[i], want)
		}
	}
}
