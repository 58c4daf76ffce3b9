// Package emit writes out the StableHLO program of a recipe's train step, built on the stand-in xla
// backend of package pjrtplugin: it sits apart from package trainstep so that the step never imports
// the PJRT plugin code.
package emit

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/backend/pjrtplugin"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/trainstep"
)

// TrainStep returns the StableHLO text of cfg's train step (forward, loss, backward, accumulation,
// clipping, optimizer, EMA, guard: the step a run compiles) at the global batch data.batch_size over
// cfg.Replicas devices, without any device or PJRT plugin (pjrtplugin.EmitBackend).
func TrainStep(cfg config.Config) (string, error) {
	net, err := trainstep.NetOf(cfg)
	if err != nil {
		return "", err
	}
	stub, err := pjrtplugin.NewEmitBackend(max(cfg.Replicas, 1))
	if err != nil {
		return "", err
	}
	defer stub.Finalize()
	step, err := trainstep.New(stub, trainstep.NewContext(cfg), cfg, net)
	if err != nil {
		return "", err
	}
	batch := trainstep.BatchOf(cfg, net)
	r, n := max(cfg.Replicas, 1), cfg.ReplicaBatch()
	images, labels := make([]*tensors.Tensor, r), make([]*tensors.Tensor, r)
	for i := range r {
		images[i] = tensors.FromShape(batch.Images(n))
		labels[i] = tensors.FromShape(batch.Labels(n))
	}
	sc := trainstep.Scalars{LR: cfg.PeakLR(), Update: 1, Apply: true, EMADecay: cfg.EMA.Decay}
	_, err = step.Execute(images, labels, sc)
	if !errors.Is(err, pjrtplugin.ErrEmitted) {
		if err == nil {
			err = errors.New("the emit backend ran the step")
		}
		return "", fmt.Errorf("emitting the train step of %s: %w", cfg.Net.Label(), err)
	}
	mods := stub.Modules()
	if len(mods) != 1 {
		return "", fmt.Errorf("emitting the train step of %s: %d modules, expected 1", cfg.Net.Label(), len(mods))
	}
	return mods[0].Text, nil
}
