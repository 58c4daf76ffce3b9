package netspec

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/testbackend"
)

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

func load(t *testing.T, text string, sizes Sizes) *Net {
	t.Helper()
	n, err := Load("test.yaml", parse(t, text), sizes)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// mnistCNN is the registered mnist_cnn written as a spec, its layers named as the registered net names
// its modules, so the same seed draws the same weights.
const mnistCNN = `
- input: {size: 28, channels: 1, classes: 10}
- conv: {name: conv1, filters: 32, kernel: 3, padding: valid}
- relu
- conv: {name: conv2, filters: 64, kernel: 3, padding: valid}
- relu
- maxpool: {kernel: 2}
- flatten: {order: chw}
- dense: {name: fc1, units: 128}
- relu
- dense: {name: fc2, units: classes}
`

// logits runs build once on images (eval mode) in a fresh context.
func logits(t *testing.T, build graphs.BuildFn, opts graphs.Options, images *tensors.Tensor) []float32 {
	t.Helper()
	exec, err := context.NewExec(testBackend(), context.New(), func(ctx *context.Context, x *Node) *Node {
		return build(ctx.In(graphs.ModelScope), x, false, opts)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	out, err := exec.Exec(images)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float32](out[0])
}

func testImages(batch, size, channels int) *tensors.Tensor {
	values := make([]float32, batch*size*size*channels)
	for i := range values {
		values[i] = float32((i*7919)%251)/125 - 1
	}
	return tensors.FromFlatDataAndDimensions(values, batch, size, size, channels)
}

// TestMNISTCNNSpecIsTheRegisteredNet: the spec's inferred counts, the counts of its built graph and
// the registered mnist_cnn's agree, and with the same seed both give the same logits.
func TestMNISTCNNSpecIsTheRegisteredNet(t *testing.T) {
	net := load(t, mnistCNN, Sizes{})
	reg, err := graphs.Get("mnist_cnn")
	if err != nil {
		t.Fatal(err)
	}
	want, err := graphs.Summarize(testBackend(), reg, graphs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := graphs.Summarize(testBackend(), net.Spec("netspec"), graphs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	params, macs := net.Totals()
	if want.Parameters != 1199882 || got.Parameters != want.Parameters || params != int64(want.Parameters) {
		t.Errorf("parameters: spec inferred %d, spec built %d, registered %d (torch: 1199882)", params, got.Parameters, want.Parameters)
	}
	if got.ForwardFLOPs != want.ForwardFLOPs || 2*macs != want.ForwardFLOPs {
		t.Errorf("forward FLOPs: spec inferred %d, spec built %d, registered %d", 2*macs, got.ForwardFLOPs, want.ForwardFLOPs)
	}
	if got.InputShape != want.InputShape || got.NumClasses != 10 {
		t.Errorf("input %v classes %d, want %v and 10", got.InputShape, got.NumClasses, want.InputShape)
	}
	opts := graphs.Options{Seed: 7}
	images := testImages(3, 28, 1)
	a, b := logits(t, reg.Build, opts, images), logits(t, net.Build, opts, images)
	if len(a) != 30 || len(b) != 30 {
		t.Fatalf("logits %d and %d values, want 30", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("logit %d: registered %v, spec %v", i, a[i], b[i])
		}
	}
	if a[0] == logits(t, reg.Build, graphs.Options{Seed: 8}, images)[0] {
		t.Error("another seed gave the same first logit: the comparison would not see different weights")
	}
}

// everyKind uses every layer kind; its counts are checked against the built graph's.
const everyKind = `
- input: {size: 16, channels: 3, classes: 5}
- conv: {filters: 8, kernel: 3, stride: 2, bias: false}
- batchnorm
- relu6
- residual:
    projection: conv_bn
    layers:
      - conv: {filters: 12, kernel: 3, stride: 2, padding: same}
      - silu
      - conv: {filters: 12, kernel: 1, groups: 4}
- residual:
    layers:
      - mbconv: {filters: 12, expand: 2, kernel: 5, se: 0.25}
      - se: {squeeze: 3}
      - layernorm
- mbconv: {filters: 16, expand: 1, stride: 2, activation: relu6}
- maxpool: {kernel: 3, stride: 1, padding: 1}
- avgpool: {kernel: 2}
- sigmoid
- globalavgpool
- dense: {units: 20}
- tanh
- gelu: {form: tanh}
- dropout: {rate: 0.1}
- dense: {units: classes, bias: false}
`

const tokens = `
- input: {size: 12, channels: 2, classes: 4}
- patch_embed: {patch: 4, dim: 8}
- transformer: {heads: 2, mlp: 16}
- attention: {heads: 4}
- layernorm: {eps: 1e-6}
- gelu
- residual: {layers: [dense: {units: 8}]}
- token_pool
- dense: {units: classes}
`

// countSpecs are the specs TestSpecCountsMatchTheGraph builds (the bestiary's kinds have their own, in
// bestiary/spec).
var countSpecs = map[string]string{"every kind": everyKind, "tokens": tokens, "mnist_cnn": mnistCNN}

// TestSpecCountsMatchTheGraph: for specs covering every layer kind, the parameters and MACs inferred
// at load equal those of the built graph, the built shapes equal the inferred ones (Build panics
// otherwise), and a training-mode forward pass runs.
func TestSpecCountsMatchTheGraph(t *testing.T) {
	covered := map[string]bool{}
	for name, text := range countSpecs {
		net := load(t, text, Sizes{})
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
	for _, k := range KindNames() {
		if !covered[k] {
			t.Errorf("layer kind %s is in no spec of this test", k)
		}
	}
}

// TestSpecNamesAndNoDecay: parameters live under stable scopes (kind + index, or the name given), and
// biases and norms are in the no-decay group.
func TestSpecNamesAndNoDecay(t *testing.T) {
	net := load(t, everyKind, Sizes{})
	ctx := context.New()
	g := NewGraph(testBackend(), "names")
	net.Build(ctx.In(graphs.ModelScope), Parameter(g, "x", testImages(1, 16, 3).Shape()), true, graphs.Options{})
	g.Finalize()
	keys := map[string]bool{}
	noDecay := map[string]bool{}
	ctx.EnumerateVariables(func(v *context.Variable) {
		if !v.Trainable {
			return
		}
		key, ok := graphs.DefaultTorchName(v.Scope(), v.Name())
		if !ok {
			t.Fatalf("variable %s/%s outside the model scope", v.Scope(), v.Name())
		}
		keys[key] = true
		noDecay[key] = net.NoWeightDecay(v.Scope(), v.Name())
	})
	for key, nd := range map[string]bool{
		"conv1.weight": false, "batchnorm2.weight": true, "residual4.conv0.weight": false,
		"residual4.projection.weight": false, "residual4.projection_bn.bias": true, "residual5.mbconv0.expand.weight": false,
		"residual5.mbconv0.depthwise_bn.weight": true, "residual5.mbconv0.se.reduce.bias": true, "residual5.layernorm2.weight": true,
		"mbconv6.depthwise.weight": false, "dense11.weight": false, "dense15.weight": false,
	} {
		if !keys[key] {
			t.Errorf("no parameter %s; have %v", key, keys)
		} else if noDecay[key] != nd {
			t.Errorf("%s: no weight decay %v, want %v", key, noDecay[key], nd)
		}
	}
	if keys["mbconv6.expand.weight"] || keys["dense15.bias"] {
		t.Error("expand 1 or bias false still made the parameter")
	}
}

// TestSpecErrors: each kind of bad spec is one *Error naming the source, the layer's index path, the
// field and what was expected.
func TestSpecErrors(t *testing.T) {
	const in = "- input: {size: 8, channels: 1, classes: 3}\n"
	for _, c := range []struct {
		name, text, path, field string
		want                    []string
	}{
		{"unknown kind", in + "- convolution: {filters: 4}", "1", "", []string{`unknown layer kind "convolution"`, "expected one of: ", " conv, ", " dense, "}},
		{"unknown argument", in + "- conv: {filters: 4, kernel: 3, size: 2}", "1", "size", []string{"unknown argument", "conv takes: name, filters, kernel"}},
		{"missing argument", in + "- conv: {kernel: 3}", "1", "filters", []string{"missing; expected an integer in [1, 65536]"}},
		{"wrong type", in + "- conv: {filters: four, kernel: 3}", "1", "filters", []string{`got "four", expected an integer`}},
		{"out of range", in + "- dropout: {rate: 1}", "1", "rate", []string{"got 1, expected a number in [0, 1)"}},
		{"bad choice", in + "- conv: {filters: 4, kernel: 3, padding: full}", "1", "padding", []string{"one of: symmetric, same, valid"}},
		{"kernel too large", in + "- conv: {filters: 4, kernel: 3, stride: 2}\n- conv: {filters: 4, kernel: 7, padding: valid}", "2", "kernel",
			[]string{"7 is larger than the 4-cell input", "expected at most 4"}},
		{"pool too large", in + "- maxpool: {kernel: 16}", "1", "kernel", []string{"16 is larger than the 8-cell input"}},
		{"wrong width", in + "- conv: {filters: 4, kernel: 3}\n- residual: {layers: [conv: {filters: 8, kernel: 3}]}", "2", "projection",
			[]string{"maps [8, 8, 4] to [8, 8, 8]", "expected a body that keeps the shape"}},
		{"groups", in + "- conv: {filters: 6, kernel: 3, groups: 4}", "1", "groups", []string{"4 does not divide the 1 input channels"}},
		{"nested", in + "- conv: {filters: 4, kernel: 3}\n- residual:\n    layers:\n      - relu\n      - conv: {filters: 4, kernel: 3, dilation: 0}", "2.1", "dilation",
			[]string{"layer 2.1 (conv): dilation: got 0"}},
		{"image to dense", in + "- dense: {units: 3}", "1", "", []string{"got the image [8, 8, 1]: add globalavgpool or flatten"}},
		{"patch", in + "- patch_embed: {patch: 3, dim: 4}", "1", "patch", []string{"3 does not divide the 8×8 input"}},
		{"heads", in + "- patch_embed: {patch: 4, dim: 6}\n- transformer: {heads: 4, mlp: 8}", "2", "heads", []string{"4 does not divide the token width 6"}},
		{"not logits", in + "- globalavgpool", "1", "", []string{"ends with shape [1], expected the logits [3]"}},
		{"no input", "- conv: {filters: 4, kernel: 3}", "0", "", []string{"expected the first entry to be `input"}},
		{"input twice", in + in, "1", "", []string{"the input entry may only be the first"}},
		{"two kinds", in + "- {relu: {}, tanh: {}}", "1", "", []string{"expected one layer kind as the key", "got 2 keys (relu, tanh)"}},
		{"bad name", in + "- relu: {name: a.b}", "1", "name", []string{`got "a.b", expected a name of letters`}},
		{"empty", "", "", "", []string{"no layers"}},
		{"empty entry", in + "- {}", "1", "", []string{"an empty entry"}},
		{"duplicate name", in + "- conv: {filters: 2, kernel: 1}\n- conv: {name: conv1, filters: 2, kernel: 1}", "2", "name",
			[]string{"conv1 is layer 1's name too"}},
	} {
		_, err := Load("nets/bad.yaml", parse(t, c.text), Sizes{})
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: got %v, want an *Error", c.name, err)
			continue
		}
		if e.Source != "nets/bad.yaml" || e.Path != c.path || e.Field != c.field || !strings.HasPrefix(err.Error(), "nets/bad.yaml: ") {
			t.Errorf("%s: source %q path %q field %q, want nets/bad.yaml, %q, %q (%v)", c.name, e.Source, e.Path, e.Field, c.path, c.field, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant it to say %q", c.name, err, w)
			}
		}
	}
}

// TestSpecBounds: the number of layers and the nesting depth are bounded before anything is built,
// and so are widths and the parameter count.
func TestSpecBounds(t *testing.T) {
	long := "- input: {size: 8, channels: 1, classes: 1}\n" + strings.Repeat("- relu\n", MaxLayers)
	if _, err := Load("s", parse(t, long), Sizes{}); err == nil || !strings.Contains(err.Error(), "more than 1024 layers") {
		t.Errorf("%d layers: %v", MaxLayers+1, err)
	}
	deep := "[relu]"
	for range MaxDepth {
		deep = "[residual: {layers: " + deep + "}]"
	}
	_, err := Load("s", parse(t, "- input: {size: 8, channels: 1, classes: 1}\n- residual: {layers: "+deep+"}"), Sizes{})
	if err == nil || !strings.Contains(err.Error(), "nested 9 deep, expected at most 8") {
		t.Errorf("nesting %d deep: %v", MaxDepth+1, err)
	}
	huge := "- input: {size: 4096, channels: 3, classes: 1}\n- flatten\n- dense: {units: 65536}\n- dense: {units: classes}"
	if _, err := Load("s", parse(t, huge), Sizes{}); err == nil || !strings.Contains(err.Error(), "parameters here, expected at most") {
		t.Errorf("a 3-trillion-parameter dense: %v", err)
	}
	wide := "- input: {size: 8, channels: 1, classes: 1}\n- conv: {filters: 70000, kernel: 1}"
	if _, err := Load("s", parse(t, wide), Sizes{}); err == nil || !strings.Contains(err.Error(), "filters: got 70000") {
		t.Errorf("70000 filters: %v", err)
	}
}

// TestSpecSizes: net.image_size and net.num_classes reshape the inferred net (and the logits), and
// the word classes follows them.
func TestSpecSizes(t *testing.T) {
	net := load(t, mnistCNN, Sizes{ImageSize: 32, NumClasses: 3})
	rows := net.Rows()
	if got := ShapeString(rows[1].Out); got != "[30, 30, 32]" {
		t.Errorf("conv1 at 32 px: %s, want [30, 30, 32]", got)
	}
	if got := ShapeString(rows[len(rows)-1].Out); got != "[3]" {
		t.Errorf("logits: %s, want [3]", got)
	}
	if !net.FixedInputSize {
		t.Error("a spec with flatten must say it takes one input size")
	}
	if load(t, everyKind, Sizes{}).FixedInputSize {
		t.Error("a convolutional spec with globalavgpool takes any size")
	}
	sum, err := graphs.Summarize(testBackend(), net.Spec("x"), graphs.Options{ImageSize: 32, NumClasses: 3})
	params, _ := net.Totals()
	if err != nil || int64(sum.Parameters) != params {
		t.Errorf("at 32 px and 3 classes: graph %d parameters, inferred %d (%v)", sum.Parameters, params, err)
	}
	_ = dtypes.Float32
}

// TestDocsListEveryKind: docs/nets.md's NetSpec table is the registry's (KindTable), so every layer
// kind and argument is documented as the code reads it.
func TestDocsListEveryKind(t *testing.T) {
	doc, err := os.ReadFile("../../docs/nets.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := KindTable(); !strings.Contains(string(doc), want) {
		t.Errorf("docs/nets.md lacks the layer table as the registry renders it; paste:\n%s", want)
	}
}

// TestSpecGradientsReachEveryParameter: in a training-mode step of the specs that use every kind, the
// loss's gradient is finite and non-zero for every trainable variable, so each kind's parameters train.
func TestSpecGradientsReachEveryParameter(t *testing.T) {
	for name, text := range map[string]string{"every kind": everyKind, "tokens": tokens} {
		net := load(t, text, Sizes{})
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
		t.Logf("%s: %d trainable variables, first %s squared gradient norm %v", name, len(out), names[0], out[0])
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
	for name, text := range map[string]string{"every kind": everyKind, "tokens": tokens} {
		net := load(t, text, Sizes{})
		got := logits(t, net.Build, graphs.Options{Precision: "bfloat16", Seed: 1}, testImages(2, net.Input[0], net.Input[2]))
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

// TestSpellingsNameTheSameKind: a kind and its arguments may be written in camel case, in snake case or
// as registered; all give the same layer, scope and counts, and an argument given in two spellings is
// one error naming it. (bestiary/spec checks the book's signatures the same way.)
func TestSpellingsNameTheSameKind(t *testing.T) {
	in := "- input: {size: 8, channels: 3, classes: 4}\n"
	var first []Row
	for _, line := range []string{
		"- patchEmbed: {patch: 4, dim: 8, classToken: false}",
		"- patch_embed: {patch: 4, dim: 8, class_token: false}",
		"- PatchEmbed: {Patch: 4, dim: 8, Class_Token: false}",
	} {
		rows := load(t, in+line+"\n- token_pool\n- dense: {units: classes}", Sizes{}).Rows()
		if rows[1].Kind != "patch_embed" || rows[1].Scope != "patch_embed1" || rows[1].Params != 3*4*4*8+8+4*8 {
			t.Errorf("%s: row %+v, want kind patch_embed, scope patch_embed1 and %d parameters (conv and position embedding, no class token)", line, rows[1], 3*4*4*8+8+4*8)
		}
		if first == nil {
			first = rows
		} else if fmt.Sprint(rows) != fmt.Sprint(first) {
			t.Errorf("%s: rows %+v, want those of the registered spelling %+v", line, rows, first)
		}
	}
	_, err := Load("test.yaml", parse(t, in+"- patch_embed: {patch: 4, dim: 8, class_token: false, classToken: true}"), Sizes{})
	if err == nil || !strings.Contains(err.Error(), "given twice") || !strings.Contains(err.Error(), "class") {
		t.Errorf("class_token and classToken together: %v, want one error saying the argument is given twice", err)
	}
}

// TestNonFiniteArgumentsRefused: NaN and the infinities fail every number argument's range, which
// `f < min || f > max` let NaN through (a dropout of rate NaN dropped every input, a BatchNorm of eps
// NaN normalised to NaN).
func TestNonFiniteArgumentsRefused(t *testing.T) {
	in := "- input: {size: 8, channels: 3, classes: 4}\n"
	for _, layer := range []string{
		"- dropout: {rate: .nan}", "- dropout: {rate: .inf}", "- dropout: {rate: -.inf}",
		"- conv: {filters: 4, kernel: 3}\n- batchnorm: {eps: .nan}", "- conv: {filters: 4, kernel: 3}\n- batchnorm: {decay: .nan}",
		"- mbconv: {filters: 4, expand: 1, kernel: 3, se: .nan}",
	} {
		_, err := Load("test.yaml", parse(t, in+layer+"\n- globalavgpool\n- dense: {units: classes}"), Sizes{})
		if err == nil || !strings.Contains(err.Error(), "expected a number in") {
			t.Errorf("%s: %v, want the argument refused with its range", layer, err)
		}
	}
}
