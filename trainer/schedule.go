package trainer

import "math"

// LearningRate is the host-side schedule: the rate for optimizer step `step` (0-based) of a run of
// `total` steps with `perEpoch` steps per epoch. It is a pure function, so a resumed run and a
// plotted schedule see exactly the rates the uninterrupted run used.
func LearningRate(c Config, step, total, perEpoch int) float64 {
	base := c.Optimizer.LR
	warmup := int(math.Round(c.Schedule.WarmupEpochs * float64(perEpoch)))
	if warmup > 0 && step < warmup {
		return base * float64(step+1) / float64(warmup)
	}
	switch c.Schedule.Name {
	case "cosine":
		span := total - warmup
		if span <= 0 {
			return base
		}
		progress := float64(step-warmup) / float64(span)
		return c.Schedule.MinLR + (base-c.Schedule.MinLR)*0.5*(1+math.Cos(math.Pi*progress))
	default:
		return base
	}
}
