package spec

import (
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/netspec"
)

// bestiaryDense uses every kind of the bestiary's dense group (dense.go); the
// shared spec tests (counts against the graph, gradients reaching every parameter, bfloat16) run it.
const bestiaryDense = `
- input: {size: 8, channels: 3, classes: 5}
- unetUp:
    ic: 7
    oc: 4
    layers:
      - unetDown: {ic: 3, oc: 4}
- asppModule: {ic: 4, oc: 4}
- mobileVitBlock: {ic: 4, dim: 8, heads: 2, mlpDim: 16, nTxBlocks: 2}
- positionalEncoding: {inputDim: 4, numFrequencies: 2}
- patch_embed: {patch: 2, dim: 6, class_token: false}
- waveNetBlock: {residualCh: 6, skipCh: 5, nLayers: 3}
- nerfMLP: {encodedPosDim: 3, encodedDirDim: 2, hiddenDim: 8}
- token_pool: {mode: mean}
- dense: {units: classes}
`

// TestBestiaryDenseSpec: the group's kinds infer the shapes of their graphs functions, put their
// norms in the no-decay group, and refuse a signature width that is not the input's.
func TestBestiaryDenseSpec(t *testing.T) {
	net := load(t, bestiaryDense, netspec.Sizes{})
	want := map[string]string{
		"unet_down": "[4, 4, 4]", "unet_up": "[8, 8, 4]", "aspp_module": "[8, 8, 4]", "mobilevit_block": "[8, 8, 4]",
		"positional_encoding": "[8, 8, 20]", "wavenet_block": "[16, 5]", "nerf_mlp": "[16, 4]",
	}
	for _, r := range net.Rows() {
		if w, ok := want[r.Kind]; ok && netspec.ShapeString(r.Out) != w {
			t.Errorf("%s: inferred %s, want %s", r.Kind, netspec.ShapeString(r.Out), w)
		}
	}

	ctx := context.New()
	g := NewGraph(testBackend(), "names")
	net.Build(ctx.In(graphs.ModelScope), Parameter(g, "x", testImages(1, 8, 3).Shape()), true, graphs.Options{})
	g.Finalize()
	noDecay := map[string]bool{}
	ctx.EnumerateVariables(func(v *context.Variable) {
		if key, ok := graphs.DefaultTorchName(v.Scope(), v.Name()); ok && v.Trainable {
			noDecay[key] = net.NoWeightDecay(v.Scope(), v.Name())
		}
	})
	for key, nd := range map[string]bool{
		"unet_up1.unet_down0.maxpool_conv.1.double_conv.0.weight": false, "unet_up1.unet_down0.maxpool_conv.1.double_conv.4.weight": true,
		"unet_up1.conv.double_conv.3.weight": false, "unet_up1.conv.double_conv.1.bias": true,
		"aspp_module2.convs.2.0.weight": false, "aspp_module2.convs.4.2.weight": true, "aspp_module2.project.1.bias": true,
		"mobilevit_block3.transformer.1.attn.qkv.weight": false, "mobilevit_block3.norm.weight": true,
		"mobilevit_block3.conv_fusion.bn.weight": true, "wavenet_block6.layers.2.gate.weight": false,
		"nerf_mlp7.pts_linears.5.weight": false, "nerf_mlp7.rgb_linear.bias": true,
	} {
		got, ok := noDecay[key]
		if !ok || got != nd {
			t.Errorf("%s: present %v, no-decay %v; want present, no-decay %v", key, ok, got, nd)
		}
	}

	for _, c := range []struct{ text, msg string }{
		{"- unetDown: {ic: 4, oc: 4}", "layer 1 (unet_down): ic: 4, but the input is [8, 8, 3]"},
		{"- asppModule: {ic: 2, oc: 4}", "layer 1 (aspp_module): ic: 2"},
		{"- mobileVitBlock: {ic: 3, dim: 8, heads: 3, mlpDim: 16, nTxBlocks: 1}", "heads: 3 does not divide dim 8"},
		{"- nerfMLP: {encodedPosDim: 2, encodedDirDim: 2, hiddenDim: 8}", "encodedPosDim: 2 + encodedDirDim 2 = 4, but the input is [8, 8, 3]"},
		{"- waveNetBlock: {residualCh: 3, skipCh: 2, nLayers: 2}", "expected tokens"},
		{"- unetUp: {ic: 6, oc: 4, layers: [unetDown: {ic: 3, oc: 4}]}", "ic: 6, but the skip has 3 channels and the body's output 4; expected their sum 7"},
		{"- unetUp: {ic: 6, oc: 4, layers: [relu]}", "layers: the body maps [8, 8, 3] to [8, 8, 3]; expected an image of exactly half the size"},
	} {
		text := "- input: {size: 8, channels: 3, classes: 5}\n" + c.text + "\n- globalavgpool\n- dense: {units: classes}\n"
		_, err := netspec.Load("test.yaml", parse(t, text), netspec.Sizes{})
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want one containing %q", c.text, err, c.msg)
		}
	}
}
