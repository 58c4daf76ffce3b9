package netspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/trainer/trainer/graphs"
)

// Registered nets written as specs: the counts a spec infers at load must be the registered net's,
// as graphs.Summarize measures them on its built graph (which match torchvision's and timm's).

// mobileSpec writes an inverted-residual net: a 3×3 stride-2 stem, rows of mbconv blocks
// (expand, filters, repeats, stride, kernel), a 1×1 head conv, global pool, dropout and the classifier.
func mobileSpec(act string, se float64, rows [][5]int) string {
	var b strings.Builder
	b.WriteString("- input: {size: 224, channels: 3, classes: 1000}\n")
	fmt.Fprintf(&b, "- conv: {filters: 32, kernel: 3, stride: 2, bias: false}\n- batchnorm\n- %s\n", act)
	for _, r := range rows {
		for i := range r[2] {
			stride := 1
			if i == 0 {
				stride = r[3]
			}
			fmt.Fprintf(&b, "- mbconv: {expand: %d, filters: %d, stride: %d, kernel: %d, se: %g, activation: %s}\n", r[0], r[1], stride, r[4], se, act)
		}
	}
	fmt.Fprintf(&b, "- conv: {filters: 1280, kernel: 1, bias: false}\n- batchnorm\n- %s\n- globalavgpool\n- dropout: {rate: 0.2}\n- dense: {units: classes}\n", act)
	return b.String()
}

// resnetSpec writes a basic-block ResNet: stem, residual blocks whose first block of a stage strides
// and projects (conv_bn, torchvision's downsample), each followed by a ReLU, pool and classifier.
func resnetSpec(blocks [4]int) string {
	var b strings.Builder
	b.WriteString("- input: {size: 224, channels: 3, classes: 1000}\n")
	b.WriteString("- conv: {filters: 64, kernel: 7, stride: 2, bias: false}\n- batchnorm\n- relu\n- maxpool: {kernel: 3, stride: 2, padding: 1}\n")
	for stage, n := range blocks {
		width := 64 << stage
		for i := range n {
			stride, proj := 1, "none"
			if i == 0 && stage > 0 {
				stride, proj = 2, "conv_bn"
			}
			fmt.Fprintf(&b, "- residual:\n    projection: %s\n    layers:\n", proj)
			fmt.Fprintf(&b, "      - conv: {filters: %d, kernel: 3, stride: %d, bias: false}\n      - batchnorm\n      - relu\n", width, stride)
			fmt.Fprintf(&b, "      - conv: {filters: %d, kernel: 3, bias: false}\n      - batchnorm\n- relu\n", width)
		}
	}
	b.WriteString("- globalavgpool\n- dense: {units: classes}\n")
	return b.String()
}

// TestRegisteredNetsAsSpecs: resnet34, mobilenet_v2, efficientnet_b0 and vit_tiny written as specs
// infer torchvision's and timm's parameter counts (21,797,672; 3,504,872; 5,288,548; 5,717,416) and
// the registered nets' MACs, exercising residual projections, mbconv with and without SE, patch_embed
// and transformer at full size.
func TestRegisteredNetsAsSpecs(t *testing.T) {
	vit := "- input: {size: 224, channels: 3, classes: 1000}\n- patch_embed: {patch: 16, dim: 192}\n" +
		strings.Repeat("- transformer: {heads: 3, mlp: 768}\n", 12) +
		"- layernorm: {eps: 1e-6}\n- token_pool\n- dense: {units: classes}\n"
	for name, text := range map[string]string{
		"mobilenet_v2": mobileSpec("relu6", 0, [][5]int{
			{1, 16, 1, 1, 3}, {6, 24, 2, 2, 3}, {6, 32, 3, 2, 3}, {6, 64, 4, 2, 3}, {6, 96, 3, 1, 3}, {6, 160, 3, 2, 3}, {6, 320, 1, 1, 3}}),
		"efficientnet_b0": mobileSpec("silu", 0.25, [][5]int{
			{1, 16, 1, 1, 3}, {6, 24, 2, 2, 3}, {6, 40, 2, 2, 5}, {6, 80, 3, 2, 3}, {6, 112, 3, 1, 5}, {6, 192, 4, 2, 5}, {6, 320, 1, 1, 3}}),
		"vit_tiny": vit,
		"resnet34": resnetSpec([4]int{3, 4, 6, 3}),
	} {
		net := load(t, text, Sizes{})
		reg, err := graphs.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		sum, err := graphs.Summarize(testBackend(), reg, graphs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		params, macs := net.Totals()
		if params != int64(sum.Parameters) || 2*macs != sum.ForwardFLOPs {
			t.Errorf("%s as a spec: %d parameters, %d forward FLOPs; registered: %d, %d", name, params, 2*macs, sum.Parameters, sum.ForwardFLOPs)
		}
		t.Logf("%s as a spec: %d parameters, %.3f forward GFLOPs, as registered", name, params, float64(2*macs)/1e9)
	}
}
