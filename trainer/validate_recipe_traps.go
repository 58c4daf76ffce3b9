package trainer

import (
	"errors"
	"fmt"
	"slices"

	"github.com/trainer/trainer/graphs"
)

// validateRecipeTraps refuses recipes that load and run but do not do what they say, the traps the seed
// project's notes record. validateRecipe already refuses optimizer and schedule keys foreign to the
// chosen optimizer or schedule; this adds the checks that relate keys across sections.
//
// Some traps cannot be written in this config:
//   - the run length and the schedule length disagreeing: there is one length, `epochs` (or `steps`,
//     which replaces it), and the loop computes the schedule's total from that same number
//     (LearningRate's total), so a cosine always ends where the run ends. What can still disagree are
//     schedule positions given in epochs (warmup, step decay, milestones): CheckScheduleLength checks
//     them against the run's optimizer steps once the split is open, as the epochs of a `steps` run
//     depend on the split's size;
//   - a global batch not divisible by replicas × accumulation: the global batch is defined as
//     data.batch_size × optimizer.accumulate_steps (data.batch_size is the micro-batch), so it always
//     divides by the accumulation; validateReplicas checks it divides by the replicas.
func (c Config) validateRecipeTraps() []error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
		}
	}
	s := c.Schedule
	if c.Steps > 0 {
		check(s.WarmupSteps < c.Steps, "schedule.warmup_steps",
			"%d warmup steps in a run of %d steps (steps): the peak lr would never be reached; expected fewer than steps",
			s.WarmupSteps, c.Steps)
	}

	// Settings of one section that only act with another one on: a value other than the default
	// where it cannot act is a recipe that silently does less than it says.
	check(s.WarmupStartLR == 0 || s.WarmupEpochs > 0 || s.WarmupSteps > 0, "schedule.warmup_start_lr",
		"got %g without a warmup (schedule.warmup_epochs or warmup_steps): it has no effect", s.WarmupStartLR)
	check(c.EMA.Warmup || c.EMA.Decay > 0, "ema.warmup", "false without an EMA (ema.decay 0): it has no effect")
	check(c.Loss.BCEDivisor == "elements" || c.Loss.Name == "bce", "loss.bce_divisor",
		"got %q with loss.name %s: only bce has a divisor", c.Loss.BCEDivisor, c.Loss.Name)
	a := c.Data.Augment
	def := Defaults().Data.Augment
	check(len(a.RandomResizedCropScale) > 0 || slices.Equal(a.RandomResizedCropRatio, def.RandomResizedCropRatio),
		"data.augment.random_resized_crop_ratio", "got %v without random_resized_crop_scale (RandomResizedCrop is off): it has no effect",
		a.RandomResizedCropRatio)
	check(a.Mixing() || a.MixupProb == def.MixupProb, "data.augment.mixup_prob",
		"got %g with mixup_alpha and cutmix_alpha both 0: it has no effect", a.MixupProb)
	check((a.MixupAlpha > 0 && a.CutmixAlpha > 0) || a.MixupSwitchProb == def.MixupSwitchProb, "data.augment.mixup_switch_prob",
		"got %g, but it chooses between mixup and cutmix and only one of mixup_alpha, cutmix_alpha is > 0: it has no effect", a.MixupSwitchProb)
	check(a.RandomErasing > 0 || a.RandomErasingMode == def.RandomErasingMode, "data.augment.random_erasing_mode",
		"got %q with random_erasing 0: it has no effect", a.RandomErasingMode)
	if size := c.Data.EvalImageSize; size != 0 {
		check(size >= 8 && size <= 4096, "data.eval_image_size", "got %d, expected in [8, 4096] (0: the training size)", size)
		check(c.Data.Source != "mnist" && c.Data.Source != "fashion-mnist", "data.eval_image_size",
			"got %d with data.source %s: the idx sources are stored at one size", size, c.Data.Source)
		if spec, err := graphs.Get(c.Net.Name); err == nil {
			check(!spec.FixedInputSize, "data.eval_image_size",
				"got %d, but net %s only takes the resolution it is built for (net.image_size)", size, c.Net.Name)
		}
	}
	return errs
}

// CheckScheduleLength checks the schedule's positions given in epochs against the run's length, known
// once the training split is open: total optimizer steps, perEpoch optimizer steps per epoch. It
// refuses a warmup as long as the run, a step or staircase decay period as long as the run (the lr
// would never decay) and a multistep milestone at or past the end (a schedule written for more epochs
// than the run has). Run and ScheduleLength call it before building anything.
func (c Config) CheckScheduleLength(total int, perEpoch float64) error {
	s := c.Schedule
	epochs := float64(total) / perEpoch
	length := fmt.Sprintf("the run is %d optimizer steps (%.4g epochs of %.4g steps)", total, epochs, perEpoch)
	var errs []error
	if w := WarmupSteps(s, perEpoch); w > 0 && w >= total {
		key := "schedule.warmup_epochs"
		if s.WarmupSteps > 0 {
			key = "schedule.warmup_steps"
		}
		errs = append(errs, fmt.Errorf("%s: the warmup is %d optimizer steps, %s: the peak lr would never be reached; "+
			"expected a warmup shorter than the run", key, w, length))
	}
	if (s.Name == "step" || (s.Name == "exponential" && s.Staircase)) && s.DecayEpochs >= epochs-1e-9 {
		errs = append(errs, fmt.Errorf("schedule.decay_epochs: the %s schedule decays every %g epochs, %s: the lr would never decay; "+
			"expected decay_epochs below the run's epochs", s.Name, s.DecayEpochs, length))
	}
	if s.Name == "multistep" && len(s.Milestones) > 0 {
		if last := slices.Max(s.Milestones); last >= epochs-1e-9 {
			errs = append(errs, fmt.Errorf("schedule.milestones: a milestone at epoch %g, %s: it would never be reached; "+
				"expected every milestone below the run's epochs", last, length))
		}
	}
	return errors.Join(errs...)
}
