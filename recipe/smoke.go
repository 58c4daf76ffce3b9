package recipe

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/trainer/trainer/config"
)

// Smoke mode's overrides need the net (its input size) and the source's normalisation; the override
// set itself and its constants are config's (config.SmokeKeys).

// SmokeOverrides returns the --set overrides that turn the loaded recipe cfg into its smoke run on the
// ImageFolder at dataDir (see trainer.WriteSmokeData). Apply them before the user's own --set keys, so those
// still win (LoadSmoke does).
func SmokeOverrides(cfg config.Config, dataDir string) ([]string, error) {
	spec, err := Net(cfg.Net)
	if err != nil {
		return nil, err
	}
	width := "net.width=" + strconv.FormatFloat(config.SmokeWidth, 'g', -1, 64)
	if cfg.Net.HasSpec() {
		width = "net.width=1" // a spec's widths are as written
	}
	set := []string{
		"name=" + cfg.Name + "_smoke", // never writes into the real run's directory
		"backend=go",
		"steps=" + strconv.Itoa(config.SmokeSteps),
		width,
		"net.num_classes=" + strconv.Itoa(config.SmokeClasses), // the head fits the generated data (a run refuses a mismatch)
		"data.source=imagefolder",
		"data.dir=" + strconv.Quote(dataDir),
		`data.train=""`,
		`data.eval=""`,
		"data.batch_size=" + strconv.Itoa(config.SmokeBatch),
		"data.eval_batch_size=" + strconv.Itoa(config.SmokeBatch),
		"data.workers=2",
		"eval.every_epochs=0", // one eval, at the end
		"checkpoint.every_steps=" + strconv.Itoa(config.SmokeCheckpointStep),
		"checkpoint.keep=2",
		"log.every_steps=1",
	}
	if cfg.Net.Pretrained != "" {
		// Pretrained weights fit the full-width net, not the smoke run's, and may need a download.
		set = append(set, `net.pretrained=""`, `net.pretrained_sha256=""`)
	}
	// The recipe's normalisation stays: its source's statistics become explicit, as imagefolder's own
	// (ImageNet's, three channels) would not fit the MNIST nets.
	mean, std := Normalisation(cfg.Data)
	set = append(set, "data.mean="+floatList(mean), "data.std="+floatList(std))
	if cfg.Replicas > 1 {
		// The smoke run is one device's (config.SmokeBatch need not split over the recipe's replicas);
		// --set replicas=R runs it on R in-process devices.
		set = append(set, "replicas=1")
	}
	size := cfg.Net.ImageSize
	if size == 0 {
		size = spec.InputShape[0]
	}
	if size > config.SmokeImageSize {
		set = append(set, "net.image_size="+strconv.Itoa(config.SmokeImageSize))
	}
	if e := cfg.Data.EvalImageSize; e > 0 {
		// Evaluate at the same ratio to the (smoke) training size as the recipe does.
		set = append(set, "data.eval_image_size="+strconv.Itoa(max(8, e*min(size, config.SmokeImageSize)/size)))
	}
	k := min(max(cfg.Optimizer.AccumulateSteps, 1), config.SmokeMaxAccumulate)
	set = append(set, "optimizer.accumulate_steps="+strconv.Itoa(k))
	// A recipe's warmup is epochs long; the smoke run warms up over one step so the schedule still has
	// a warmup and a decay part.
	if cfg.Schedule.WarmupEpochs > 0 || cfg.Schedule.WarmupSteps > 0 {
		set = append(set, "schedule.warmup_epochs=0", "schedule.warmup_steps=1")
	}
	// Decay periods and milestones in epochs must fall inside the smoke run (CheckScheduleLength).
	smokeEpochs := float64(config.SmokeSteps*k) / float64(config.SmokeClasses*config.SmokeTrainPerClass/config.SmokeBatch)
	s := cfg.Schedule
	if (s.Name == "step" || (s.Name == "exponential" && s.Staircase)) && s.DecayEpochs >= smokeEpochs {
		set = append(set, "schedule.decay_epochs=1")
	}
	if s.Name == "multistep" && len(s.Milestones) > 0 && slices.Max(s.Milestones) >= smokeEpochs {
		set = append(set, "schedule.milestones=[1]")
	}
	// lr_base_batch scales the peak with the (now tiny) batch; floors above the new peak would be refused.
	smoke := cfg
	smoke.Data.BatchSize, smoke.Optimizer.AccumulateSteps = config.SmokeBatch, k
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
func LoadSmoke(path string, overrides []string, dataDir string) (config.Config, []string, error) {
	cfg, err := Load(path, overrides)
	if err != nil {
		return config.Config{}, nil, err
	}
	smoke, err := SmokeOverrides(cfg, dataDir)
	if err != nil {
		return config.Config{}, nil, err
	}
	cfg, err = Load(path, append(append([]string{}, smoke...), overrides...))
	if err != nil {
		return config.Config{}, nil, fmt.Errorf("smoke mode: %w", err)
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
