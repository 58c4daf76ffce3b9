package graphs

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Shared helpers (netCheck*) are in convnext_test.go.

// vitSmall is a reduced ViT for the numeric tests: at 32 px, 4 patches of 16 plus the class token.
var vitSmall = vitConfig{patch: 16, dim: 32, depth: 2, heads: 2, mlp: 64}

func vitBuild(c vitConfig) BuildFn {
	return func(ctx *context.Context, x *Node, train bool, opts Options) *Node {
		return buildViT(ctx, x, train, opts, c)
	}
}

// vitParams counts a timm ViT's parameters from the architecture.
func vitParams(c vitConfig, tokens, classes int) int {
	block := 2*c.dim + (c.dim*3*c.dim + 3*c.dim) + (c.dim*c.dim + c.dim) + 2*c.dim +
		(c.dim*c.mlp + c.mlp) + (c.mlp*c.dim + c.dim)
	return c.patch*c.patch*3*c.dim + c.dim + c.dim + tokens*c.dim + c.depth*block + 2*c.dim + c.dim*classes + classes
}

func TestViTTinySummary(t *testing.T) {
	spec, err := Get("vit_tiny")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := Summarize(testBackend(), spec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// timm vit_tiny_patch16_224 / the book's ViT-Tiny: 5,717,416.
	if sum.Parameters != 5_717_416 || vitParams(vitTiny, 197, 1000) != 5_717_416 {
		t.Errorf("vit_tiny: %d parameters (formula %d), want 5,717,416", sum.Parameters, vitParams(vitTiny, 197, 1000))
	}
	// MACs by hand: patchify, per block qkv + q·kᵀ and attn·v (2·t²·dim) + proj + MLP, head.
	const tk, d = 197, 192
	macs := int64(196*d*16*16*3 + 12*(tk*d*3*d+2*tk*tk*d+tk*d*d+2*tk*d*768) + d*1000)
	if sum.ForwardFLOPs != 2*macs {
		t.Errorf("vit_tiny: %d forward FLOPs, want %d", sum.ForwardFLOPs, 2*macs)
	}
	t.Logf("vit_tiny: %d parameters, %.3f GMACs", sum.Parameters, float64(macs)/1e9)

	// Width 2 is ViT-S/16's shape (6 heads of 64, dim 384): timm vit_small_patch16_224 has 22,050,664.
	sum, err = Summarize(testBackend(), spec, Options{Width: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Parameters != 22_050_664 {
		t.Errorf("vit_tiny at width 2: %d parameters, want ViT-S's 22,050,664", sum.Parameters)
	}
}

func TestViTWidthRule(t *testing.T) {
	for _, c := range []struct {
		width           float64
		heads, dim, mlp int
	}{
		{0, 3, 192, 768}, {1, 3, 192, 768}, {1.0 / 3, 1, 64, 256}, {0.1, 1, 64, 256},
		{0.5, 2, 128, 512}, {2, 6, 384, 1536}, {4, 12, 768, 3072},
	} {
		got := vitTiny.widened(c.width)
		if got.heads != c.heads || got.dim != c.dim || got.mlp != c.mlp || got.depth != 12 || got.patch != 16 {
			t.Errorf("width %g: %+v, want %d heads, dim %d, MLP %d, depth 12", c.width, got, c.heads, c.dim, c.mlp)
		}
	}
}

func TestViTNamesAndDecayGroup(t *testing.T) {
	spec, _ := Get("vit_tiny")
	opts := Options{NumClasses: 10, ImageSize: 32}
	netCheckDecayGroup(t, spec, opts, 32, "cls_token", "pos_embed")

	ctx := netCheckVariables(t, spec, opts, 32)
	got := map[string][]int{}
	ctx.EnumerateVariables(func(v *context.Variable) {
		key, ok := spec.StateDictKey(v.Scope(), v.Name())
		if !ok {
			t.Errorf("no state_dict key for %s/%s", v.Scope(), v.Name())
		}
		got[key] = v.Shape().Dimensions
	})
	want := map[string][]int{
		"patch_embed.proj.weight":   {16, 16, 3, 192},
		"patch_embed.proj.bias":     {192},
		"cls_token":                 {1, 1, 192},
		"pos_embed":                 {1, 5, 192}, // 32 px: 2x2 patches + class token
		"blocks.0.norm1.weight":     {192},
		"blocks.0.norm1.bias":       {192},
		"blocks.0.attn.qkv.weight":  {192, 576},
		"blocks.0.attn.qkv.bias":    {576},
		"blocks.4.attn.proj.weight": {192, 192},
		"blocks.7.norm2.weight":     {192},
		"blocks.9.mlp.fc1.weight":   {192, 768},
		"blocks.9.mlp.fc1.bias":     {768},
		"blocks.11.mlp.fc2.weight":  {768, 192},
		"blocks.11.mlp.fc2.bias":    {192},
		"norm.weight":               {192},
		"norm.bias":                 {192},
		"head.weight":               {192, 10},
		"head.bias":                 {10},
	}
	for key, dims := range want {
		if d, ok := got[key]; !ok || !slices.Equal(d, dims) {
			t.Errorf("%s: shape %v (present %v), want %v", key, d, ok, dims)
		}
	}
	// Patch embed 2, cls and pos 2, 12 blocks of 12, final norm 2, head 2.
	if len(got) != 2+2+12*12+2+2 {
		t.Errorf("%d variables, want %d", len(got), 2+2+12*12+2+2)
	}
}

func TestViTInitialisation(t *testing.T) {
	stats := netCheckInitStats(t, "vit_tiny", Options{NumClasses: 10, ImageSize: 32, Seed: 1})
	for _, s := range []string{"blocks/0/attn/qkv", "blocks/5/attn/proj", "blocks/11/mlp/fc1", "head"} {
		mean, std, _ := stats(s, "weight")
		if math.Abs(std-0.02) > 0.003 || math.Abs(mean) > 0.003 {
			t.Errorf("%s weight: mean %.4f std %.4f, want trunc_normal(0.02)", s, mean, std)
		}
		if _, _, m := stats(s, "bias"); m != 0 {
			t.Errorf("%s bias: not zero (max %g)", s, m)
		}
	}
	if mean, std, _ := stats("", "pos_embed"); math.Abs(std-0.02) > 0.003 || math.Abs(mean) > 0.003 {
		t.Errorf("pos_embed: mean %.4f std %.4f, want trunc_normal(0.02)", mean, std)
	}
	if _, std, _ := stats("", "cls_token"); std < 0.5e-6 || std > 2e-6 {
		t.Errorf("cls_token: std %g, want normal(1e-6)", std)
	}
	// The patch conv keeps PyTorch's Conv2d default: U(±1/√fanIn) for weight and bias, fanIn 16·16·3.
	bound := 1 / math.Sqrt(768)
	if _, std, m := stats("patch_embed/proj", "weight"); m > bound || math.Abs(std-bound/math.Sqrt(3)) > 0.002 {
		t.Errorf("patch conv weight: std %.4f max %.4f, want U(±%.4f)", std, m, bound)
	}
	if _, _, m := stats("patch_embed/proj", "bias"); m > bound || m == 0 {
		t.Errorf("patch conv bias: max %.4f, want U(±%.4f)", m, bound)
	}
}

func TestViTForwardShapeAndPrecisions(t *testing.T) {
	netCheckPrecisions(t, "vit_tiny", Options{Width: 1.0 / 3, NumClasses: 10, ImageSize: 32, Seed: 3})
}

func TestViTRejectsAnInputOfAnotherSize(t *testing.T) {
	spec, _ := Get("vit_tiny")
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "position embedding is sized for 64x64") {
			t.Errorf("a 32 px input with ImageSize 64 should panic naming the sizes, got %v", r)
		}
	}()
	g := NewGraph(testBackend(), "size")
	defer g.Finalize()
	spec.Build(context.New(), Parameter(g, "x", netCheckImages(1, 32)), false, Options{ImageSize: 64})
}

func TestViTTrains(t *testing.T) {
	// The registered net at width 1/3 (one head of 64, depth 12): 2+2+12·12+2+2 variables.
	spec, _ := Get("vit_tiny")
	netCheckTrains(t, spec.Build, Options{Width: 1.0 / 3, NumClasses: 10, ImageSize: 32, Seed: 4}, 32, 0.1, 152)
}

func TestViTGradientsMatchFiniteDifferences(t *testing.T) {
	// The input-image gradient goes through the 16x16 patchify: GoMLX's stock conv VJP got it wrong.
	netCheckGradients(t, vitBuild(vitSmall), Options{NumClasses: 10, Seed: 5}, 32)
}

func TestViTDropPath(t *testing.T) {
	c := vitSmall
	c.depth = 4
	netCheckDropPath(t, vitBuild(c), Options{NumClasses: 10, Seed: 6}, 32)
}

func TestViTGELUForms(t *testing.T) {
	netCheckGELUForms(t, vitBuild(vitSmall), Options{NumClasses: 10, Seed: 7}, 32)
}
