package graphs

import (
	"math"
	"testing"
)

func TestDenseNet121MatchesTorchvisionStructure(t *testing.T) {
	// scripts/torchvision_net_refs.py densenet121; noDecay: the 1-D parameters (BN weight/bias, fc bias).
	checkNetAgainstRef(t, "densenet121", netRef{params: 7978856, noDecay: 84648, macs: 2834161664,
		fingerprint: "9de4aad2d5fb03ee", keys: 606, classes: 1000})
}

func TestDenseNet121NoWeightDecayGroup(t *testing.T) {
	spec, _ := Get("densenet121")
	for _, c := range []struct {
		scope, name string
		excluded    bool
	}{
		{"/model/features/conv0", "weight", false},
		{"/model/features/norm0", "weight", true},
		{"/model/features/denseblock2/denselayer3/norm1", "weight", true},
		{"/model/features/denseblock2/denselayer3/conv1", "weight", false},
		{"/model/features/denseblock2/denselayer3/norm2", "bias", true},
		{"/model/features/denseblock2/denselayer3/conv2", "weight", false},
		{"/model/features/transition3/norm", "weight", true},
		{"/model/features/transition3/conv", "weight", false},
		{"/model/features/norm5", "weight", true},
		{"/model/classifier", "weight", false},
		{"/model/classifier", "bias", true},
	} {
		if got := spec.ExcludedFromWeightDecay(c.scope, c.name); got != c.excluded {
			t.Errorf("%s/%s: excluded from weight decay %v, want %v", c.scope, c.name, got, c.excluded)
		}
	}
}

func TestDenseNet121Initialisation(t *testing.T) {
	// torchvision's DenseNet: kaiming_normal_ (fan_in, ReLU gain) for every conv, BatchNorm ones and zeros,
	// the Linear's weight at PyTorch's default U(±1/√fan_in) and its bias zero.
	checkInitialisation(t, "densenet121", 64, []initWant{
		{scope: "features/conv0", name: "weight", std: math.Sqrt(2.0 / (49 * 3))},
		{scope: "features/denseblock3/denselayer5/conv1", name: "weight", std: math.Sqrt(2.0 / 384)},
		{scope: "features/denseblock3/denselayer5/conv2", name: "weight", std: math.Sqrt(2.0 / (9 * 128))},
		{scope: "features/transition2/conv", name: "weight", std: math.Sqrt(2.0 / 512)},
		{scope: "features/norm5", name: "weight", constant: 1},
		{scope: "features/norm5", name: "bias", constant: 0},
		{scope: "classifier", name: "weight", bound: 1 / math.Sqrt(1024)},
		{scope: "classifier", name: "bias", constant: 0},
	})
}

func TestDenseNet121TrainsAtReducedWidth(t *testing.T) {
	opts := Options{Width: 0.25, NumClasses: 10, Seed: 1}
	checkTrains(t, "densenet121", opts, 4, 48, 0.1, 0.5)
}

func TestDenseNetLegacyKeys(t *testing.T) {
	for in, want := range map[string]string{
		"features.denseblock1.denselayer1.norm.1.weight":               "features.denseblock1.denselayer1.norm1.weight",
		"features.denseblock3.denselayer24.conv.2.weight":              "features.denseblock3.denselayer24.conv2.weight",
		"features.denseblock2.denselayer12.norm.2.num_batches_tracked": "features.denseblock2.denselayer12.norm2.num_batches_tracked",
		"features.denseblock1.denselayer1.norm1.weight":                "features.denseblock1.denselayer1.norm1.weight",
		"features.transition1.norm.weight":                             "features.transition1.norm.weight",
		"features.norm5.running_var":                                   "features.norm5.running_var",
	} {
		if got := denseNetLegacyKey(in); got != want {
			t.Errorf("%s -> %s, want %s", in, got, want)
		}
	}
}
