package graphs

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// The book's small nets for 28x28 grey images (MNIST, Fashion-MNIST), with PyTorch's default
// initialisation and module names (fc1, conv1, ...).
func init() {
	mnist := [3]int{28, 28, 1}
	Register(Spec{
		Name:        "linear",
		Description: "softmax regression: flatten, one dense layer",
		InputShape:  mnist, NumClasses: 10, Eval: MNISTEval,
		Build: func(ctx *context.Context, x *Node, _ bool, opts Options) *Node {
			x = ToCompute(x, opts)
			return FromCompute(Linear(ctx.In("fc"), Flatten(x), LinearConfig{Units: classes(opts, 10)}, opts), opts)
		},
	})
	Register(Spec{
		Name:        "mlp",
		Description: "two ReLU hidden layers (512, 256) and a dense head",
		InputShape:  mnist, NumClasses: 10, Eval: MNISTEval,
		Build: func(ctx *context.Context, x *Node, _ bool, opts Options) *Node {
			x = Flatten(ToCompute(x, opts))
			x = ReLU(Linear(ctx.In("fc1"), x, LinearConfig{Units: scaled(512, opts.Width)}, opts))
			x = ReLU(Linear(ctx.In("fc2"), x, LinearConfig{Units: scaled(256, opts.Width)}, opts))
			return FromCompute(Linear(ctx.In("fc3"), x, LinearConfig{Units: classes(opts, 10)}, opts), opts)
		},
	})
	// mnist_fast: strided convolutions instead of pools (on the pure-Go backend a max-pool's gradient costs
	// more than the convolution before it), BatchNorm so that a high one-cycle lr trains in two epochs.
	fastLayers := []cifarLayer{{'s', 16}, {'b', 0}, {'r', 0}, {'s', 32}, {'b', 0}, {'r', 0}, {'c', 64}, {'b', 0}, {'r', 0}}
	Register(Spec{
		Name: "mnist_fast",
		Description: "a small BatchNorm CNN built for speed: conv3x3 stride 2 (16), conv3x3 stride 2 (32), conv3x3 (64), " +
			"each without bias + BatchNorm + ReLU (28 -> 14 -> 7 px), flatten, Linear 10",
		InputShape: mnist, NumClasses: 10, Eval: MNISTEval,
		Reference: "ours (configs/mnist_fast.yaml): nn.Sequential features (Conv2d(bias=False), BatchNorm2d, ReLU) x3, " +
			"flatten (channel-major), nn.Linear classifier",
		Build: func(ctx *context.Context, x *Node, train bool, opts Options) *Node {
			x = cifarApply(ctx.In("features"), ToCompute(x, opts), train, opts, fastLayers)
			x = Flatten(TransposeAllDims(x, 0, 3, 1, 2)) // channel-major, as PyTorch flattens
			return FromCompute(Linear(ctx.In("classifier"), x, LinearConfig{Units: classes(opts, 10)}, opts), opts)
		},
		NoWeightDecay: cifarNoWeightDecay(fastLayers),
	})
	Register(Spec{
		Name:        "mnist_cnn",
		Description: "conv3x3(32), conv3x3(64), max-pool 2, dense 128, dense head (PyTorch's MNIST example)",
		InputShape:  mnist, NumClasses: 10, Eval: MNISTEval,
		Reference: "pytorch/examples mnist Net (its dropouts, which have no weights, left out)",
		Revision:  1, RevisionNote: "revision 1: fc1 reads the features flattened in PyTorch's channel-major order",
		Build: func(ctx *context.Context, x *Node, _ bool, opts Options) *Node {
			x = ReLU(Conv(ctx.In("conv1"), ToCompute(x, opts), ConvConfig{Filters: scaled(32, opts.Width), Kernel: 3, Padding: PadValid, Bias: true}, opts))
			x = ReLU(Conv(ctx.In("conv2"), x, ConvConfig{Filters: scaled(64, opts.Width), Kernel: 3, Padding: PadValid, Bias: true}, opts))
			x = Flatten(TransposeAllDims(MaxPool2D(x, 2, 2, 0), 0, 3, 1, 2)) // channel-major, as PyTorch flattens
			x = ReLU(Linear(ctx.In("fc1"), x, LinearConfig{Units: scaled(128, opts.Width)}, opts))
			return FromCompute(Linear(ctx.In("fc2"), x, LinearConfig{Units: classes(opts, 10)}, opts), opts)
		},
	})
}
