package trainstep

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/recipe"
)

// Model is what the step trains: a forward pass over variables under the model scope, and which of
// them weight decay skips. The registered nets (Net) and verify's regression models implement it.
type Model interface {
	// Forward returns the logits [batch, classes] of images; ctx is already in graphs.ModelScope.
	Forward(ctx *context.Context, images *Node, train bool) *Node
	// ExcludedFromWeightDecay reports whether the variable scope/name is in the no-decay group.
	ExcludedFromWeightDecay(scope, name string) bool
}

// Net is a registered net with its options, as a Model.
type Net struct {
	Spec    graphs.Spec
	Options graphs.Options
}

// Forward implements Model.
func (n Net) Forward(ctx *context.Context, images *Node, train bool) *Node {
	return n.Spec.Build(ctx, images, train, n.Options)
}

// ExcludedFromWeightDecay implements Model.
func (n Net) ExcludedFromWeightDecay(scope, name string) bool {
	return n.Spec.ExcludedFromWeightDecay(scope, name)
}

// StateDictKey implements StateDictNamer: the reference's key of a variable.
func (n Net) StateDictKey(scope, name string) (string, bool) { return n.Spec.StateDictKey(scope, name) }

// NetOf returns cfg's registered net with cfg's options; BatchNorm's running statistics are
// compensated for gradient accumulation (graphs.Options.BNMicroBatches), and in a data-parallel
// SPMD step its moments are the global batch's under data_parallel.sync_bn (graphs.Options.SyncBN).
func NetOf(cfg config.Config) (Net, error) {
	spec, err := recipe.Net(cfg.Net)
	if err != nil {
		return Net{}, err
	}
	opts, err := recipe.NetOptions(cfg.Net, cfg.Seed)
	if err != nil {
		return Net{}, err
	}
	opts.BNMicroBatches = max(cfg.Optimizer.AccumulateSteps, 1)
	opts.SyncBN = cfg.DataParallel.SyncBN
	return Net{Spec: spec, Options: opts}, nil
}

// NewContext is the variable context a run of cfg trains in. The graph RNG (dropout and drop-path
// masks) starts from the run's seed; its state is a variable, so checkpoints carry it and a resumed
// run draws the same masks.
func NewContext(cfg config.Config) *context.Context {
	ctx := context.New()
	ctx.SetParam(context.ParamInitialSeed, int64(cfg.Seed))
	return ctx
}
