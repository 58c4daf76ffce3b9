package schedule

import (
	"fmt"
	"math"

	"github.com/trainer/trainer/config"
)

// LearningRate is the host-side schedule: the rate for optimizer step `step` (0-based) of a run of
// `total` optimizer steps with `perEpoch` optimizer steps per epoch (fractional under accumulation).
// It is a pure function, so a resumed run and a plotted schedule see exactly the rates the
// uninterrupted run used.
//
// Warmup (step < W, W = RunWarmup: the recipe's, or a tenth of a run not longer than it):
// start + (peak − start)·(step+1)/W, so its last step reaches the peak. After it:
// constant; cosine from the peak at W to min_lr at `total`; step: peak·rate^⌊epoch/decay_epochs⌋;
// multistep: peak·rate^(milestones ≤ epoch); exponential: peak·rate^(epoch/decay_epochs), the exponent
// floored with staircase. The decays count epochs from the start of the run (epoch = step/perEpoch),
// as TensorFlow's exponential_decay does under a warmup.
func LearningRate(c config.Config, step, total int, perEpoch float64) float64 {
	peak := c.PeakLR()
	s := c.Schedule
	warmup := s.RunWarmup(perEpoch, total)
	if step < warmup {
		return s.WarmupStartLR + (peak-s.WarmupStartLR)*float64(step+1)/float64(warmup)
	}
	epoch := float64(step) / perEpoch
	switch s.Name {
	case "cosine":
		span := total - warmup
		if span <= 0 {
			return peak
		}
		progress := min(float64(step-warmup)/float64(span), 1)
		return s.MinLR + (peak-s.MinLR)*0.5*(1+math.Cos(math.Pi*progress))
	case "step":
		return peak * math.Pow(s.DecayRate, math.Floor(epochRatio(epoch, s.DecayEpochs)))
	case "exponential":
		exponent := epochRatio(epoch, s.DecayEpochs)
		if s.Staircase {
			exponent = math.Floor(exponent)
		}
		return peak * math.Pow(s.DecayRate, exponent)
	case "multistep":
		passed := 0
		for _, m := range s.Milestones {
			if epoch >= m-1e-9 {
				passed++
			}
		}
		return peak * math.Pow(s.DecayRate, float64(passed))
	default:
		return peak
	}
}

// epochRatio is epoch/every, rounded to the nearest integer when within 1e-9 of one, so a staircase
// edge that perEpoch's floating point puts a hair below k counts as k.
func epochRatio(epoch, every float64) float64 {
	r := epoch / every
	if k := math.Round(r); math.Abs(r-k) < 1e-9 {
		return k
	}
	return r
}

// EMADecay is the decay of the weights' moving average at optimizer step t (0-based: t = 0 is the
// first update): min(decay, (1+t)/(10+t)) with the warmup, decay without it.
func EMADecay(c config.EMAConfig, t int) float64 {
	if !c.Warmup {
		return c.Decay
	}
	return min(c.Decay, float64(1+t)/float64(10+t))
}

// Length is the run's length in optimizer steps and its optimizer steps per epoch, given the training
// split's micro-batches per epoch: each optimizer step takes optimizer.accumulate_steps micro-batches,
// so perEpoch is fractional under accumulation; steps, when set, replaces epochs. The product of
// epochs and batches is checked before it is formed: a length beyond config.MaxSteps (epochs=1e8 of
// 100 batches, or an epochs value whose product wraps past the int range) is an error naming both.
func Length(c config.Config, batchesPerEpoch int) (total int, perEpoch float64, err error) {
	k := max(c.Optimizer.AccumulateSteps, 1)
	perEpoch = float64(batchesPerEpoch) / float64(k)
	if c.Steps > 0 {
		if c.Steps > config.MaxSteps {
			return 0, 0, fmt.Errorf("steps: got %d, expected at most %d", c.Steps, config.MaxSteps)
		}
		return c.Steps, perEpoch, nil
	}
	// epochs·batches/k <= MaxSteps exactly when epochs·batches < (MaxSteps+1)·k, and neither side
	// overflows while epochs <= ((MaxSteps+1)·k−1)/batches.
	if c.Epochs < 0 || batchesPerEpoch < 0 || (batchesPerEpoch > 0 && c.Epochs > ((config.MaxSteps+1)*k-1)/batchesPerEpoch) {
		return 0, 0, fmt.Errorf("epochs: %d epochs of %d batches (accumulate_steps %d) is more than %d optimizer steps, the most a run may have",
			c.Epochs, batchesPerEpoch, k, config.MaxSteps)
	}
	return c.Epochs * batchesPerEpoch / k, perEpoch, nil
}
