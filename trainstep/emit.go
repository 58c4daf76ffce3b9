package trainstep

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/pjrt"
)

// Emit returns the StableHLO text of cfg's train step (forward, loss, backward, accumulation,
// clipping, optimizer, EMA, guard: the step a run compiles) at the global batch data.batch_size over
// cfg.Replicas devices, without any device or PJRT plugin (pjrt.EmitBackend).
func Emit(cfg config.Config) (string, error) {
	net, err := NetOf(cfg)
	if err != nil {
		return "", err
	}
	backend, err := pjrt.NewEmitBackend(max(cfg.Replicas, 1))
	if err != nil {
		return "", err
	}
	defer backend.Finalize()
	step, err := New(backend, NewContext(cfg), cfg, net)
	if err != nil {
		return "", err
	}
	batch := BatchOf(cfg, net)
	r, n := max(cfg.Replicas, 1), cfg.ReplicaBatch()
	images, labels := make([]*tensors.Tensor, r), make([]*tensors.Tensor, r)
	for i := range r {
		images[i] = tensors.FromShape(batch.Images(n))
		labels[i] = tensors.FromShape(batch.Labels(n))
	}
	sc := Scalars{LR: cfg.PeakLR(), Update: 1, Apply: true, EMADecay: cfg.EMA.Decay}
	_, err = step.Execute(images, labels, sc)
	if !errors.Is(err, pjrt.ErrEmitted) {
		if err == nil {
			err = errors.New("the emit backend ran the step")
		}
		return "", fmt.Errorf("emitting the train step of %s: %w", cfg.Net.Label(), err)
	}
	mods := backend.Modules()
	if len(mods) != 1 {
		return "", fmt.Errorf("emitting the train step of %s: %d modules, expected 1", cfg.Net.Label(), len(mods))
	}
	return mods[0].Text, nil
}
