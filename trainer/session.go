package trainer

import (
	"fmt"
	"io"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/trainstep"
)

// session is everything a run or an eval holds open: the config, its net, the backend and the
// variables.
type session struct {
	cfg     config.Config
	net     trainstep.Net
	backend backends.Backend
	// backendConfig is the configuration the backend was opened with: cfg.Backend, or for replicas on
	// the pure-Go backend, its config with one device per replica (backend.ForReplicas).
	backendConfig string
	ctx           *context.Context
	// loaded is set once variables come from a checkpoint: the net must then reuse them, not create them.
	loaded bool
	// pretrained is set once net.pretrained created the variables (pretrained.go): the net reuses them
	// and creates the ones it skipped (a re-initialised classifier).
	pretrained bool
	// evalExec is the compiled eval forward pass, built at the first eval.
	evalExec *context.Exec
	// emaCtx holds copies of the EMA shadows under the model scope; emaEvalExec scores them.
	emaCtx      *context.Context
	emaEvalExec *context.Exec
	// emaFresh is set when the shadows must start from the weights at the first step: a new run, or a
	// checkpoint written without EMA.
	emaFresh bool
}

func newSession(cfg config.Config) (*session, error) {
	// The net is resolved once, before the backend opens, so that a recipe naming a bad net opens none.
	net, err := trainstep.NetOf(cfg)
	if err != nil {
		return nil, err
	}
	config, err := backend.ForReplicas(cfg.Backend, cfg.Replicas)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", cfg.Backend, err)
	}
	b, err := backend.Open(config)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", config, err)
	}
	s := sessionWith(cfg, net, b)
	s.backendConfig = config
	return s, nil
}

// sessionOn is newSession on a backend already open.
func sessionOn(cfg config.Config, backend backends.Backend) (*session, error) {
	net, err := trainstep.NetOf(cfg)
	if err != nil {
		return nil, err
	}
	return sessionWith(cfg, net, backend), nil
}

// sessionWith is sessionOn with the net already resolved.
func sessionWith(cfg config.Config, net trainstep.Net, backend backends.Backend) *session {
	return &session{cfg: cfg, net: net, backend: backend, backendConfig: cfg.Backend, ctx: trainstep.NewContext(cfg),
		emaFresh: true}
}

// printDevices says, for a data-parallel run, how its step is made and on which devices it runs
// (replica r on device r).
func (s *session) printDevices(out io.Writer) {
	r := s.cfg.Replicas
	if r <= 1 {
		return
	}
	how := s.cfg.DataParallel.Mode
	if how == config.DataParallelSPMD {
		how += map[bool]string{true: ", sync BN", false: ", BN per replica"}[s.cfg.DataParallel.SyncBN]
	}
	opened := s.backendConfig
	if opened != s.cfg.Backend {
		opened += " (one device per replica)"
	}
	fmt.Fprintf(out, "data parallel (%s): %d replicas of %d on %s\n", how, r, s.cfg.ReplicaBatch(), opened)
	for d := range r {
		fmt.Fprintf(out, "  replica %d: %s\n", d, s.backend.DeviceDescription(backends.DeviceNum(d)))
	}
}

// newStep builds the session's train step (trainstep.New: over cfg.Replicas devices, which the
// backend must have).
func (s *session) newStep() (*trainstep.Step, error) {
	return trainstep.New(s.backend, s.ctx, s.cfg, s)
}

// Forward implements trainstep.Model: the session's net, reusing its variables once they come from
// a checkpoint, or from pretrained weights (then creating those the weights did not hold).
func (s *session) Forward(ctx *context.Context, images *Node, train bool) *Node {
	if s.loaded {
		ctx = ctx.Reuse()
	} else if s.pretrained {
		ctx = ctx.Checked(false)
	}
	return s.net.Forward(ctx, images, train)
}

// StateDictKey implements trainstep.StateDictNamer: optimizer.freeze and lr_mult name the net's keys.
func (s *session) StateDictKey(scope, name string) (string, bool) {
	return s.net.StateDictKey(scope, name)
}

// ExcludedFromWeightDecay implements trainstep.Model.
func (s *session) ExcludedFromWeightDecay(scope, name string) bool {
	return s.net.ExcludedFromWeightDecay(scope, name)
}

// loader opens a split and checks it fits the net's input (trainer/data.go).
func (s *session) loader(split string, batch int, train bool) (*data.Loader, error) {
	return s.openLoader(split, batch, train)
}

func (s *session) numClasses() int {
	if s.cfg.Net.NumClasses > 0 {
		return s.cfg.Net.NumClasses
	}
	return s.net.Spec.NumClasses
}
