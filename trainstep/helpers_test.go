package trainstep

import (
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
	_ "github.com/trainer/trainer/graphs/testnets" // the test nets
	"github.com/trainer/trainer/recipe"
)

// testStep validates cfg, opens its backend and builds its step over a fresh context.
func testStep(t testing.TB, cfg config.Config) (*context.Context, *Step) {
	t.Helper()
	if err := recipe.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	b, err := backend.Open(cfg.Backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	ctx := NewContext(cfg)
	return ctx, testStepOn(t, b, ctx, cfg, nil)
}

// primedStep is testStep for cfg's net with its variables created first, by an eval forward pass on
// images, so their values before the first step are known.
func primedStep(t testing.TB, cfg config.Config, images *tensors.Tensor) (*context.Context, *Step) {
	t.Helper()
	if err := recipe.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	b, err := backend.Open(cfg.Backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	net, err := NetOf(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := NewContext(cfg)
	return ctx, testStepOn(t, b, ctx, cfg, primed(t, b, ctx, net, images))
}

// testStepOn builds cfg's step on backend over ctx, for cfg's net or, when model is not nil, model.
func testStepOn(t testing.TB, backend backends.Backend, ctx *context.Context, cfg config.Config, model Model) *Step {
	t.Helper()
	if model == nil {
		net, err := NetOf(cfg)
		if err != nil {
			t.Fatal(err)
		}
		model = net
	}
	step, err := New(backend, ctx, cfg, model)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(step.Finalize)
	return step
}

// reusing is a Model whose variables were created before the step (primed): the step reuses them.
type reusing struct{ Model }

func (r reusing) Forward(ctx *context.Context, images *Node, train bool) *Node {
	return r.Model.Forward(ctx.Reuse(), images, train)
}

// primed creates model's variables in ctx with one eval forward pass on images, so their values
// before the first step are known, and returns the model the step must then be built for.
func primed(t testing.TB, backend backends.Backend, ctx *context.Context, model Model, images *tensors.Tensor) Model {
	t.Helper()
	prime := context.MustNewExec(backend, ctx, func(ctx *context.Context, x *Node) *Node {
		return model.Forward(ctx.In(graphs.ModelScope), x, false)
	})
	prime.MustExec(images)
	prime.Finalize()
	return reusing{model}
}
