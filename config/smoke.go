package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Smoke mode runs any recipe for a few steps on a tiny generated ImageFolder, on the pure-Go backend,
// so that every config in configs/ can be exercised end to end (train, eval, checkpoint, resume) in
// seconds. It is a set of --set overrides applied on top of the recipe (SmokeOverrides); everything
// else (optimizer, schedule shape, EMA, loss, augmentation, net options) stays the recipe's own.
// docs/recipes.md lists the overrides.
const (
	SmokeWidth     = 0.0625 // net.width: 1/16 of every hidden width
	SmokeImageSize = 32     // net.image_size, for nets whose default input is larger
	SmokeBatch     = 4      // data.batch_size and data.eval_batch_size
	SmokeSteps     = 3      // optimizer steps; a checkpoint is written after SmokeCheckpointStep
	// SmokeCheckpointStep is checkpoint.every_steps: a run leaves a checkpoint mid-run to resume from.
	SmokeCheckpointStep = 2
	// SmokeMaxAccumulate caps optimizer.accumulate_steps, keeping the accumulation path but not its cost.
	SmokeMaxAccumulate = 2
)

// Smoke data: two classes, SmokeTrainPerClass and SmokeEvalPerClass images each (trainer.WriteSmokeData
// writes them); the overrides fit the schedule to that many images.
const (
	SmokeClasses       = 2
	SmokeTrainPerClass = 4
	SmokeEvalPerClass  = 3
)

// SmokeKeys are the keys SmokeOverrides may set: the documented override set (docs/recipes.md).
var SmokeKeys = []string{
	"name", "backend", "replicas", "steps", "net.width", "net.image_size", "net.num_classes", "net.pretrained",
	"net.pretrained_sha256", "data.eval_image_size",
	"data.source", "data.dir", "data.train", "data.eval", "data.batch_size", "data.eval_batch_size",
	"data.workers", "data.mean", "data.std", "optimizer.accumulate_steps",
	"schedule.warmup_epochs", "schedule.warmup_steps", "schedule.min_lr", "schedule.warmup_start_lr",
	"schedule.decay_epochs", "schedule.milestones",
	"eval.every_epochs", "checkpoint.every_steps", "checkpoint.keep", "log.every_steps",
}

// SmokeOverrides returns the --set overrides that turn the loaded recipe cfg into its smoke run on the
// ImageFolder at dataDir (see trainer.WriteSmokeData). Apply them before the user's own --set keys, so those
// still win (LoadSmoke does).
func SmokeOverrides(cfg Config, dataDir string) ([]string, error) {
	spec, err := cfg.Net.Net()
	if err != nil {
		return nil, err
	}
	width := "net.width=" + strconv.FormatFloat(SmokeWidth, 'g', -1, 64)
	if cfg.Net.HasSpec() {
		width = "net.width=1" // a spec's widths are as written
	}
	set := []string{
		"name=" + cfg.Name + "_smoke", // never writes into the real run's directory
		"backend=go",
		"steps=" + strconv.Itoa(SmokeSteps),
		width,
		"net.num_classes=" + strconv.Itoa(SmokeClasses), // the head fits the generated data (a run refuses a mismatch)
		"data.source=imagefolder",
		"data.dir=" + strconv.Quote(dataDir),
		`data.train=""`,
		`data.eval=""`,
		"data.batch_size=" + strconv.Itoa(SmokeBatch),
		"data.eval_batch_size=" + strconv.Itoa(SmokeBatch),
		"data.workers=2",
		"eval.every_epochs=0", // one eval, at the end
		"checkpoint.every_steps=" + strconv.Itoa(SmokeCheckpointStep),
		"checkpoint.keep=2",
		"log.every_steps=1",
	}
	if cfg.Net.Pretrained != "" {
		// Pretrained weights fit the full-width net, not the smoke run's, and may need a download.
		set = append(set, `net.pretrained=""`, `net.pretrained_sha256=""`)
	}
	// The recipe's normalisation stays: its source's statistics become explicit, as imagefolder's own
	// (ImageNet's, three channels) would not fit the MNIST nets.
	mean, std := cfg.Data.Normalisation()
	set = append(set, "data.mean="+floatList(mean), "data.std="+floatList(std))
	if cfg.Replicas > 1 {
		// The smoke run is one device's (SmokeBatch need not split over the recipe's replicas);
		// --set replicas=R runs it on R in-process devices.
		set = append(set, "replicas=1")
	}
	size := cfg.Net.ImageSize
	if size == 0 {
		size = spec.InputShape[0]
	}
	if size > SmokeImageSize {
		set = append(set, "net.image_size="+strconv.Itoa(SmokeImageSize))
	}
	if e := cfg.Data.EvalImageSize; e > 0 {
		// Evaluate at the same ratio to the (smoke) training size as the recipe does.
		set = append(set, "data.eval_image_size="+strconv.Itoa(max(8, e*min(size, SmokeImageSize)/size)))
	}
	k := min(max(cfg.Optimizer.AccumulateSteps, 1), SmokeMaxAccumulate)
	set = append(set, "optimizer.accumulate_steps="+strconv.Itoa(k))
	// A recipe's warmup is epochs long; the smoke run warms up over one step so the schedule still has
	// a warmup and a decay part.
	if cfg.Schedule.WarmupEpochs > 0 || cfg.Schedule.WarmupSteps > 0 {
		set = append(set, "schedule.warmup_epochs=0", "schedule.warmup_steps=1")
	}
	// Decay periods and milestones in epochs must fall inside the smoke run (CheckScheduleLength).
	smokeEpochs := float64(SmokeSteps*k) / float64(SmokeClasses*SmokeTrainPerClass/SmokeBatch)
	s := cfg.Schedule
	if (s.Name == "step" || (s.Name == "exponential" && s.Staircase)) && s.DecayEpochs >= smokeEpochs {
		set = append(set, "schedule.decay_epochs=1")
	}
	if s.Name == "multistep" && len(s.Milestones) > 0 && slices.Max(s.Milestones) >= smokeEpochs {
		set = append(set, "schedule.milestones=[1]")
	}
	// lr_base_batch scales the peak with the (now tiny) batch; floors above the new peak would be refused.
	smoke := cfg
	smoke.Data.BatchSize, smoke.Optimizer.AccumulateSteps = SmokeBatch, k
	if peak := smoke.PeakLR(); cfg.Schedule.MinLR > peak {
		set = append(set, "schedule.min_lr=0")
	}
	if peak := smoke.PeakLR(); cfg.Schedule.WarmupStartLR > peak {
		set = append(set, "schedule.warmup_start_lr=0")
	}
	return set, nil
}

// LoadSmoke loads the recipe at path with the user's overrides, then reloads it with the smoke
// overrides first and the user's after them. It returns the config and the smoke overrides applied.
func LoadSmoke(path string, overrides []string, dataDir string) (Config, []string, error) {
	cfg, err := Load(path, overrides)
	if err != nil {
		return Config{}, nil, err
	}
	smoke, err := SmokeOverrides(cfg, dataDir)
	if err != nil {
		return Config{}, nil, err
	}
	cfg, err = Load(path, append(append([]string{}, smoke...), overrides...))
	if err != nil {
		return Config{}, nil, fmt.Errorf("smoke mode: %w", err)
	}
	return cfg, smoke, nil
}

// floatList renders values as a YAML flow list.
func floatList(values []float32) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = strconv.FormatFloat(float64(v), 'g', -1, 32)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
