package verify

// The GoMLX batchnorm layer pulls in pkg/ml/train, which needs github.com/google/uuid (hence its
// indirect require in go.mod).

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers/batchnorm"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify/reference"
)

// gomlxBatchNormTrapCase documents a GoMLX v0.26 bug: layers/batchnorm with UseBackendInference(false)
// stops the gradient at the batch statistics, so its input gradient is wrong. The check passes while
// the bug is there; graphs.BatchNorm (batchnorm_train) is what the nets use.
func gomlxBatchNormTrapCase() opCase {
	const c, eps = 5, 1e-5
	return opCase{
		name:   "gomlx_batchnorm_trap",
		inputs: []operand{input("x", normal(1), 4, 3, 3, c)},
		params: []operand{
			param("bn/batch_normalization", "scale", uniform(0.5, 1.5), c),
			param("bn/batch_normalization", "offset", normal(0.3), c),
		},
		smooth: true,
		f32Tol: -1,
		build: func(ctx *context.Context, in []*Node, _ graphs.Options) *Node {
			ctx.SetTraining(in[0].Graph(), true)
			return batchnorm.New(ctx.In("bn"), in[0], -1).Epsilon(eps).Momentum(0.9).UseBackendInference(false).Done()
		},
		ref: func(in, p []reference.Tensor) reference.Tensor {
			y, _, _ := reference.BatchNormTrain(in[0], p[0].Data, p[1].Data, eps)
			return y
		},
		expectGradFailure: "GoMLX v0.26 layers/batchnorm with UseBackendInference(false) puts the batch statistics " +
			"behind StopGradient, so d/dx is wrong; graphs.BatchNorm (batchnorm_train) is right",
	}
}
