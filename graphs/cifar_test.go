package graphs

import (
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Reference numbers from PyTorch models with the layout described in cifar.go (the same Sequential
// the torch cross-check builds, see torchCheckScript); counted as in resnet_test.go.
func TestCIFARNetsMatchTorchStructure(t *testing.T) {
	checkNetAgainstRef(t, "cifar_cnn", netRef{params: 2168362, noDecay: 714, macs: 26579968,
		fingerprint: "b0444596022035f1", keys: 12, classes: 10})
	checkNetAgainstRef(t, "cifar8", netRef{params: 4690506, noDecay: 1930, macs: 209392640,
		fingerprint: "54bfe5ed7f72e81a", keys: 18, classes: 10})
	checkNetAgainstRef(t, "cifar8_bn", netRef{params: 4692426, noDecay: 3850, macs: 209392640,
		fingerprint: "1b6018ce49217fe4", keys: 42, classes: 10})
}

func TestCIFARNoWeightDecayGroup(t *testing.T) {
	spec, _ := Get("cifar8_bn")
	for _, c := range []struct {
		scope, name string
		excluded    bool
	}{
		{"/model/features/0", "weight", false}, // conv
		{"/model/features/1", "weight", true},  // BatchNorm
		{"/model/features/1", "bias", true},
		{"/model/features/4", "weight", true}, // BatchNorm after the second conv
		{"/model/features/7", "weight", false},
		{"/model/classifier", "weight", false},
		{"/model/classifier", "bias", true},
	} {
		if got := spec.ExcludedFromWeightDecay(c.scope, c.name); got != c.excluded {
			t.Errorf("%s/%s: excluded from weight decay %v, want %v", c.scope, c.name, got, c.excluded)
		}
	}
}

func TestCIFARNetsTrainAtReducedWidth(t *testing.T) {
	// Width 1/8, 32 px, batch 4. Measured (float32 and float64 agree to 4 digits): cifar_cnn 2.317 -> 2.090,
	// cifar8 2.337 -> 2.129 (PyTorch's default init shrinks the signal through 8 ReLU convs, so its logits
	// start tiny and learn slowly), cifar8_bn 2.587 -> 0.631.
	opts := Options{Width: 1.0 / 8, NumClasses: 10, Seed: 1}
	t.Run("cifar_cnn", func(t *testing.T) { checkTrains(t, "cifar_cnn", opts, 4, 32, 0.3, 0.1) })
	t.Run("cifar8", func(t *testing.T) { checkTrains(t, "cifar8", opts, 4, 32, 0.3, 0.1) })
	t.Run("cifar8_bn", func(t *testing.T) { checkTrains(t, "cifar8_bn", opts, 4, 32, 0.1, 1.0) })
}

func TestCIFAR8BatchNormModes(t *testing.T) {
	opts := Options{Width: 1.0 / 8, NumClasses: 10, Seed: 2}
	checkBatchNormModes(t, "cifar8_bn", opts, 4, 32, "/model/features/1", func(ctx *context.Context, x *Node) *Node {
		return Conv(ctx.In("features").In("0"), x, ConvConfig{Filters: scaled(64, opts.Width), Kernel: 3,
			Padding: PadSymmetric}, opts)
	})
}

func TestCIFARNetsAgainstTorch(t *testing.T) {
	for _, name := range []string{"cifar_cnn", "cifar8", "cifar8_bn"} {
		checkAgainstTorch(t, name, Options{}, 2, 32)
	}
}
