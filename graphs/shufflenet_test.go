package graphs

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

func TestShuffleNetV2MatchesTorchvisionStructure(t *testing.T) {
	// scripts/torchvision_net_refs.py shufflenet_v2_x1_0; noDecay: the 1-D parameters (BN weight/bias, fc bias).
	checkNetAgainstRef(t, "shufflenet_v2_x1_0", netRef{params: 2278604, noDecay: 17180, macs: 144907992,
		fingerprint: "a8e23a9a2d160913", keys: 282, classes: 1000})
}

func TestShuffleNetV2NoWeightDecayGroup(t *testing.T) {
	spec, _ := Get("shufflenet_v2_x1_0")
	for _, c := range []struct {
		scope, name string
		excluded    bool
	}{
		{"/model/conv1/0", "weight", false},
		{"/model/conv1/1", "weight", true},
		{"/model/stage2/0/branch1/0", "weight", false},
		{"/model/stage2/0/branch1/1", "weight", true},
		{"/model/stage2/0/branch1/2", "weight", false},
		{"/model/stage2/0/branch1/3", "weight", true},
		{"/model/stage3/1/branch2/3", "weight", false},
		{"/model/stage3/1/branch2/4", "weight", true},
		{"/model/stage3/1/branch2/5", "weight", false},
		{"/model/stage3/1/branch2/6", "bias", true},
		{"/model/conv5/0", "weight", false},
		{"/model/conv5/1", "weight", true},
		{"/model/fc", "weight", false},
		{"/model/fc", "bias", true},
	} {
		if got := spec.ExcludedFromWeightDecay(c.scope, c.name); got != c.excluded {
			t.Errorf("%s/%s: excluded from weight decay %v, want %v", c.scope, c.name, got, c.excluded)
		}
	}
}

func TestChannelShuffleInterleavesGroups(t *testing.T) {
	// Six channels in two groups: [a0 a1 a2 b0 b1 b2] -> [a0 b0 a1 b1 a2 b2], at every position.
	images := tensorsOfChannels(2, 6)
	got := forward64(t, context.New(), images, func(_ *context.Context, x *Node) *Node { return ChannelShuffle(x, 2) })
	want := []int{0, 3, 1, 4, 2, 5}
	for pos := range 2 {
		for c, from := range want {
			if got[pos*6+c] != float64(pos*100+from) {
				t.Fatalf("position %d channel %d: %v, want the input's channel %d: %v", pos, c, got[pos*6+c], from, got)
			}
		}
	}
}

// tensorsOfChannels is a [1, 1, positions, channels] tensor whose value at (p, c) is 100·p + c.
func tensorsOfChannels(positions, channels int) *tensors.Tensor {
	values := make([]float64, positions*channels)
	for p := range positions {
		for c := range channels {
			values[p*channels+c] = float64(100*p + c)
		}
	}
	return tensors.FromFlatDataAndDimensions(values, 1, 1, positions, channels)
}

func TestShuffleNetV2TrainsAtReducedWidth(t *testing.T) {
	opts := Options{Width: 0.25, NumClasses: 10, Seed: 1}
	checkTrains(t, "shufflenet_v2_x1_0", opts, 4, 48, 0.1, 0.5)
}

func TestShuffleNetV2Initialisation(t *testing.T) {
	// torchvision's ShuffleNetV2 keeps PyTorch's defaults: U(±1/√fan_in) for every conv (fan_in = k²·in/groups)
	// and for the Linear's weight and bias; BatchNorm ones and zeros.
	checkInitialisation(t, "shufflenet_v2_x1_0", 64, []initWant{
		{scope: "conv1/0", name: "weight", bound: 1 / math.Sqrt(27)},
		{scope: "stage3/0/branch1/0", name: "weight", bound: 1 / 3.0}, // depthwise 3x3 over 116
		{scope: "stage3/3/branch2/5", name: "weight", bound: 1 / math.Sqrt(116)},
		{scope: "stage3/3/branch2/6", name: "weight", constant: 1},
		{scope: "stage3/3/branch2/6", name: "bias", constant: 0},
		{scope: "conv5/0", name: "weight", bound: 1 / math.Sqrt(464)},
		{scope: "fc", name: "weight", bound: 1 / math.Sqrt(1024)},
		{scope: "fc", name: "bias", bound: 1 / math.Sqrt(1024)},
	})
}
