package graphs

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// The seed's small nets for 28x28 grey images (MNIST, Fashion-MNIST).
func init() {
	mnist := [3]int{28, 28, 1}
	Register(Spec{
		Name:        "linear",
		Description: "softmax regression: flatten, one dense layer",
		InputShape:  mnist, NumClasses: 10,
		Build: func(ctx *context.Context, x *Node, _ bool, opts Options) *Node {
			return Dense(ctx.In("logits"), Flatten(x), classes(opts, 10), opts)
		},
	})
	Register(Spec{
		Name:        "mlp",
		Description: "two ReLU hidden layers (512, 256) and a dense head",
		InputShape:  mnist, NumClasses: 10,
		Build: func(ctx *context.Context, x *Node, _ bool, opts Options) *Node {
			x = Flatten(x)
			x = ReLU(Dense(ctx.In("hidden1"), x, scaled(512, opts.Width), opts))
			x = ReLU(Dense(ctx.In("hidden2"), x, scaled(256, opts.Width), opts))
			return Dense(ctx.In("logits"), x, classes(opts, 10), opts)
		},
	})
	Register(Spec{
		Name:        "mnist_cnn",
		Description: "conv3x3(32), conv3x3(64), max-pool 2, dense 128, dense head (PyTorch's MNIST example)",
		InputShape:  mnist, NumClasses: 10,
		Build: func(ctx *context.Context, x *Node, _ bool, opts Options) *Node {
			x = ReLU(Conv2D(ctx.In("conv1"), x, scaled(32, opts.Width), 3, 1, 0, opts))
			x = ReLU(Conv2D(ctx.In("conv2"), x, scaled(64, opts.Width), 3, 1, 0, opts))
			x = Flatten(MaxPool2D(x, 2))
			x = ReLU(Dense(ctx.In("fc1"), x, scaled(128, opts.Width), opts))
			return Dense(ctx.In("logits"), x, classes(opts, 10), opts)
		},
	})
}
