package trainstep

import (
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"

	"github.com/trainer/trainer/graphs"
)

// EMAScope holds the shadows: /ema/model/... mirrors /model/..., so checkpoints carry them and the
// EMA eval reads them from there.
const EMAScope = "/ema"

// Averaged reports whether the EMA shadows v: every floating-point variable of the net, the trained
// weights and the BatchNorm running statistics alike.
func Averaged(v *context.Variable) bool {
	return strings.HasPrefix(v.Scope(), "/"+graphs.ModelScope) && v.DType().IsFloat()
}

// shadowOf is v's shadow variable (created zero; see updateEMA for its first value).
func shadowOf(ctx *context.Context, v *context.Variable) *context.Variable {
	s := ctx.InAbsPath(EMAScope+v.Scope()).Checked(false).WithInitializer(initializers.Zero).
		VariableWithShape(v.Name(), v.Shape())
	s.SetTrainable(false)
	return s
}

// updateEMA sets every shadow to e' = d·e + (1−d)·θ', θ' being the variable's value after this step
// (updated weights, updated running statistics). With fresh > 0 the shadow's previous value is taken
// to be the variable as it was before the step, which is where TensorFlow's shadows start.
func updateEMA(ctx *context.Context, g *Graph, decay, fresh *Node) {
	var vars []*context.Variable
	ctx.EnumerateVariables(func(v *context.Variable) {
		if Averaged(v) && v.InUseByGraph(g) {
			vars = append(vars, v)
		}
	})
	isFresh := GreaterThan(fresh, ZerosLike(fresh))
	for _, v := range vars {
		shadow := shadowOf(ctx, v)
		dims := v.Shape().Dimensions
		before := g.GetParameterByName(v.ParameterName())
		e := Where(BroadcastToDims(isFresh, dims...), before, shadow.ValueGraph(g))
		d := ConvertDType(decay, v.DType())
		oneMinus := OneMinus(d)
		shadow.SetValueGraph(Add(Mul(d, e), Mul(oneMinus, v.ValueGraph(g))))
	}
}
