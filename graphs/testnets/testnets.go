// Package testnets registers the small nets the trainer's tests train (importing it registers them):
// a BatchNorm-and-dropout MLP for the recipe engine and a softmax regression for the step certificates.
package testnets

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// BNDropoutMLP is a small MNIST net with what the recipe engine must handle: BatchNorm statistics (for
// the EMA's second shadow and accumulation's BN compensation) and dropout (RNG state across a resume).
const BNDropoutMLP = "test_bn_dropout_mlp"

// Regression is a softmax regression on 2x2 grey images, RegressionClasses classes: fc/weight
// [RegressionIn, RegressionClasses] (decayed) and fc/bias (the default no-decay group).
const Regression = "test_verify_regression"

// The regression's input size (2x2x1 pixels) and classes.
const (
	RegressionIn      = 4
	RegressionClasses = 3
)

func init() {
	graphs.Register(graphs.Spec{
		Name: BNDropoutMLP, Description: "test only: fc1 16, BatchNorm, ReLU, dropout 0.25, fc2",
		InputShape: [3]int{28, 28, 1}, NumClasses: 10, Eval: graphs.MNISTEval,
		Build: func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			x = graphs.Flatten(graphs.ToCompute(x, opts))
			x = graphs.Linear(ctx.In("fc1"), x, graphs.LinearConfig{Units: 16, Init: graphs.InitTorchDefault}, opts)
			x = graphs.ReLU(graphs.BatchNorm(ctx.In("bn"), x, train, graphs.TorchBN, opts))
			x = graphs.Dropout(ctx, x, opts.Dropout(0.25), train)
			x = graphs.Linear(ctx.In("fc2"), x, graphs.LinearConfig{Units: 10, Init: graphs.InitTorchDefault}, opts)
			return graphs.FromCompute(x, opts)
		},
	})
	graphs.Register(graphs.Spec{
		Name: Regression, Description: "test only: softmax regression on 2x2x1 images, 3 classes",
		InputShape: [3]int{2, 2, 1}, NumClasses: RegressionClasses, Eval: graphs.MNISTEval,
		Build: func(ctx *context.Context, x *Node, _ bool, opts graphs.Options) *Node {
			x = graphs.Flatten(graphs.ToCompute(x, opts))
			fc := graphs.LinearConfig{Units: RegressionClasses, Init: graphs.InitNormal(0.5), BiasInit: graphs.InitNormal(0.5)}
			return graphs.FromCompute(graphs.Linear(ctx.In("fc"), x, fc, opts), opts)
		},
	})
}
