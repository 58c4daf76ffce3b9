package trainer

import (
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
)

// emaScope holds the shadows: /ema/model/... mirrors /model/..., so checkpoints carry them.
const emaScope = "/ema"

// averaged reports whether the EMA shadows v: every floating-point variable of the net, the trained
// weights and the BatchNorm running statistics alike.
func averaged(v *context.Variable) bool {
	return strings.HasPrefix(v.Scope(), "/"+modelScope) && v.DType().IsFloat()
}

// shadowOf is v's shadow variable (created zero; see updateEMA for its first value).
func shadowOf(ctx *context.Context, v *context.Variable) *context.Variable {
	s := ctx.InAbsPath(emaScope+v.Scope()).Checked(false).WithInitializer(initializers.Zero).
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
		if averaged(v) && v.InUseByGraph(g) {
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

// emaContext returns a context holding, under the model scope, the EMA shadows of s.ctx (the live
// variables where a shadow is missing), as fresh copies: the EMA eval pass runs on it.
func (s *session) emaContext() (*context.Context, error) {
	if s.emaCtx == nil {
		s.emaCtx = context.New()
	}
	var err error
	s.ctx.EnumerateVariables(func(v *context.Variable) {
		if err != nil || !strings.HasPrefix(v.Scope(), "/"+modelScope) {
			return
		}
		src := v
		if averaged(v) {
			if sh := s.ctx.GetVariableByScopeAndName(emaScope+v.Scope(), v.Name()); sh != nil {
				src = sh
			}
		}
		var value *tensors.Tensor
		value, err = src.Value()
		if err != nil {
			return
		}
		value, err = value.LocalClone()
		if err != nil {
			return
		}
		if dst := s.emaCtx.GetVariableByScopeAndName(v.Scope(), v.Name()); dst != nil {
			err = dst.SetValue(value)
			return
		}
		s.emaCtx.InAbsPath(v.Scope()).VariableWithValue(v.Name(), value).SetTrainable(v.Trainable)
	})
	return s.emaCtx, err
}
