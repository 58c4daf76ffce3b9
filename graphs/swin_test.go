package graphs

import (
	"math"
	"testing"
)

func TestSwinTMatchesTorchvisionStructure(t *testing.T) {
	// scripts/torchvision_net_refs.py swin_t: noDecay is the 1-D parameters (LayerNorms, biases) and the
	// relative position bias tables; the MACs include the windows' qkv, proj, q·kᵀ and attention·v; the
	// fingerprint covers the relative_position_index buffers (TorchBuffers).
	checkNetAgainstRef(t, "swin_t", netRef{params: 28288354, noDecay: 88930, macs: 4490566656,
		fingerprint: "1f44c3f19ba08de3", keys: 185, classes: 1000})
}

func TestSwinTAtReducedWidthMatchesTorchvision(t *testing.T) {
	// Heads scale with the width (widened); scripts/torchvision_net_refs.py swin_t --width W --size S
	// --classes 10 builds torchvision's SwinTransformer with the same embedding and heads.
	spec, _ := Get("swin_t")
	for _, c := range []struct {
		width        float64
		size         int
		params, keys int
		macs         int64
		fingerprint  string
	}{
		{0.125, 64, 445940, 185, 15906096, "bc667b90a040e849"},   // embed 12, heads 1, 2, 4, 8
		{0.5, 224, 6910710, 185, 1161101568, "7f4983a38c1bebfc"}, // embed 48, heads 2, 4, 8, 16
	} {
		info := inspectNet(t, spec, Options{Width: c.width, NumClasses: 10}, c.size)
		if info.trainable != c.params || info.macs != c.macs || info.fingerprint != c.fingerprint || info.keys != c.keys {
			t.Errorf("width %g at %d px: %d params, %d MACs, fingerprint %s over %d keys; torch: %d, %d, %s over %d",
				c.width, c.size, info.trainable, info.macs, info.fingerprint, info.keys, c.params, c.macs, c.fingerprint, c.keys)
		}
	}
}

func TestSwinTNoWeightDecayGroup(t *testing.T) {
	spec, _ := Get("swin_t")
	for _, c := range []struct {
		scope, name string
		excluded    bool
	}{
		{"/model/features/0/0", "weight", false},
		{"/model/features/0/2", "weight", true},
		{"/model/features/3/1/norm1", "weight", true},
		{"/model/features/3/1/attn/qkv", "weight", false},
		{"/model/features/3/1/attn/qkv", "bias", true},
		{"/model/features/3/1/attn", "relative_position_bias_table", true},
		{"/model/features/3/1/mlp/3", "weight", false},
		{"/model/features/4/norm", "weight", true},
		{"/model/features/4/reduction", "weight", false},
		{"/model/norm", "weight", true},
		{"/model/head", "weight", false},
		{"/model/head", "bias", true},
	} {
		if got := spec.ExcludedFromWeightDecay(c.scope, c.name); got != c.excluded {
			t.Errorf("%s/%s: excluded from weight decay %v, want %v", c.scope, c.name, got, c.excluded)
		}
	}
}

func TestSwinTInitialisation(t *testing.T) {
	// torchvision's SwinTransformer: every Linear trunc_normal_(std 0.02) with zero bias (the MLP's
	// xavier init is overwritten by that final loop), the tables trunc_normal_(0.02), LayerNorms ones and
	// zeros, the patch conv PyTorch's default U(±1/√fan_in) for weight and bias.
	checkInitialisation(t, "swin_t", 64, []initWant{
		{scope: "features/0/0", name: "weight", bound: 1 / math.Sqrt(48)},
		{scope: "features/5/2/attn/qkv", name: "weight", std: 0.02},
		{scope: "features/5/2/attn/qkv", name: "bias", constant: 0},
		{scope: "features/5/2/attn", name: "relative_position_bias_table", std: 0.02},
		{scope: "features/5/2/mlp/0", name: "weight", std: 0.02},
		{scope: "features/5/2/mlp/3", name: "bias", constant: 0},
		{scope: "features/6/reduction", name: "weight", std: 0.02},
		{scope: "features/6/norm", name: "weight", constant: 1},
		{scope: "head", name: "weight", std: 0.02},
	})
}

func TestSwinRelativePositionIndex(t *testing.T) {
	// torchvision's relative_position_index for a 2x2 window (torch 1.13): rows are query tokens.
	want := []int{4, 3, 1, 0, 5, 4, 2, 1, 7, 6, 4, 3, 8, 7, 5, 4}
	got := SwinRelativePositionIndex(2)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("window 2: %v, want %v", got, want)
		}
	}
}

func TestSwinShiftMaskSeparatesRegions(t *testing.T) {
	// A 4x4 map in 2x2 windows rolled by 1: the last window mixes the four regions (rows 0-1, 2, 3 cut
	// at pad−window=2 and pad−shift=3), the first window is one region.
	mask := swinShiftMask(4, 4, 2, 1, 1).Value().([][][]float32)
	for i := range 4 {
		for j := range 4 {
			if mask[0][i][j] != 0 {
				t.Errorf("window 0 (one region) masks %d->%d", i, j)
			}
			// Window 3 holds rows 2, 3 and columns 2, 3: token t at (2+t/2, 2+t%2), each its own region.
			if want := map[bool]float32{true: 0, false: -100}[i == j]; mask[3][i][j] != want {
				t.Errorf("window 3: mask %d->%d is %v, want %v", i, j, mask[3][i][j], want)
			}
		}
	}
}

func TestSwinTTrainsAtReducedWidth(t *testing.T) {
	// 64 px: 16x16 tokens pad to 21 (3x3 windows, shifted), then 8x8 (2x2 windows, shifted), 4x4 and 2x2
	// (one padded window, no shift).
	// Without the default drop path 0.2, whose masks come from the context's unseeded RNG, so that the run
	// repeats exactly (verify's whole-net check covers the drop-path gradient).
	zero := 0.0
	opts := Options{Width: 0.125, NumClasses: 10, Seed: 1, DropPathRate: &zero}
	checkTrains(t, "swin_t", opts, 4, 64, 0.1, 0.3)
}
