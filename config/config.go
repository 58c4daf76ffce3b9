package config

// The schema: one struct per section, one field per key, named by its yaml tag. What each key means
// is in keyMeanings (keys.go) and its default in Defaults; docs/configs.md and docs/recipe-engine.md
// are generated from both. Comments here say only what a Go reader of the fields needs.

// Config is one run, resolved from a YAML recipe (and its bases) plus --set overrides.
type Config struct {
	Name       string           `yaml:"name"`
	Backend    string           `yaml:"backend"`
	Replicas   int              `yaml:"replicas"`
	Seed       int              `yaml:"seed"`
	Epochs     int              `yaml:"epochs"`
	Steps      int              `yaml:"steps"`
	RunDir     string           `yaml:"run_dir"`
	Net        NetConfig        `yaml:"net"`
	Data       DataConfig       `yaml:"data"`
	Optimizer  OptimizerConfig  `yaml:"optimizer"`
	Schedule   ScheduleConfig   `yaml:"schedule"`
	EMA        EMAConfig        `yaml:"ema"`
	Loss       LossConfig       `yaml:"loss"`
	Eval       EvalConfig       `yaml:"eval"`
	Checkpoint CheckpointConfig `yaml:"checkpoint"`
	Log        LogConfig        `yaml:"log"`
	Guard      GuardConfig      `yaml:"guard"`
	// DataParallel is how the step over Replicas > 1 devices is made.
	DataParallel DataParallelConfig `yaml:"data_parallel"`
}

// DataParallelConfig chooses the data-parallel step (docs/distributed.md): the explicit SPMD program
// (DataParallelSPMD) or XLA's partitioner (DataParallelAuto), and BatchNorm across replicas.
type DataParallelConfig struct {
	Mode   string `yaml:"mode"`
	SyncBN bool   `yaml:"sync_bn"`
}

// The values of data_parallel.mode.
const (
	DataParallelSPMD = "spmd"
	DataParallelAuto = "auto"
)

// NetConfig picks a registered net, its size and the options every net takes (recipe.NetOptions
// resolves them for graphs). Zero or −1 values keep the net's own choice.
type NetConfig struct {
	Name string `yaml:"name"`
	// Spec is a NetSpec, a list of layers (graphs/netspec), inline or read from SpecFile when the
	// recipe loads; omitted when empty, so the recipes without one keep their config hashes.
	Spec       []any   `yaml:"spec,omitempty"`
	SpecFile   string  `yaml:"spec_file,omitempty"`
	Width      float64 `yaml:"width"`
	NumClasses int     `yaml:"num_classes"`
	ImageSize  int     `yaml:"image_size"`
	Precision  string  `yaml:"precision"`
	Dropout    float64 `yaml:"dropout"`
	DropPath   float64 `yaml:"drop_path"`
	Padding    string  `yaml:"padding"`
	GELU       string  `yaml:"gelu"`
	BNEpsilon  float64 `yaml:"bn_eps"`
	BNDecay    float64 `yaml:"bn_decay"`
	// ZeroInitLast is omitted when false, so the recipes without it keep their config hashes.
	ZeroInitLast bool `yaml:"zero_init_last,omitempty"`
	// FP32Head is omitted when false, for the same reason.
	FP32Head bool `yaml:"fp32_head,omitempty"`
	// Pretrained is a state_dict file (safetensors or .pth) or an https URL a fresh run starts from.
	Pretrained       string `yaml:"pretrained"`
	PretrainedSHA256 string `yaml:"pretrained_sha256"`
}

// DataConfig names the dataset, how it is batched and, for image sources, augmented. DataPaths and
// recipe's Normalisation and NormalizeOnDevice resolve its empty and auto values.
type DataConfig struct {
	Source          string        `yaml:"source"`
	Dataset         string        `yaml:"dataset"`
	Dir             string        `yaml:"dir"`
	Train           string        `yaml:"train"`
	Eval            string        `yaml:"eval"`
	BatchSize       int           `yaml:"batch_size"`
	EvalBatchSize   int           `yaml:"eval_batch_size"`
	Mean            []float64     `yaml:"mean"`
	Std             []float64     `yaml:"std"`
	Workers         int           `yaml:"workers"`
	Prefetch        int           `yaml:"prefetch"`
	EvalCropPct     float64       `yaml:"eval_crop_pct"`
	EvalImageSize   int           `yaml:"eval_image_size"`
	Augment         AugmentConfig `yaml:"augment"`
	DeviceNormalize Switch        `yaml:"device_normalize"`
	OnBadRecord     string        `yaml:"on_bad_record"`
	MaxImagePixels  int           `yaml:"max_image_pixels"`
	FastDecode      bool          `yaml:"fast_decode,omitempty"`
}

// DefaultMaxImagePixels is data.max_image_pixels' default, Pillow's MAX_IMAGE_PIXELS (data's own
// default, which a recipe test holds equal).
const DefaultMaxImagePixels = 89_478_485

// data.on_bad_record values: what a record that fails its checksum, does not decode or is above
// data.max_image_pixels does to the run.
const (
	BadRecordStop = "stop" // end the run with an error naming the file and record
	BadRecordSkip = "skip" // train without it, counting it
)

// Switch is a key that takes auto, true or false (YAML booleans or strings).
type Switch string

// AugmentConfig is the training augmentation of the image sources (off by default; mixup and cutmix
// work on every source).
type AugmentConfig struct {
	RandomResizedCropScale   []float64 `yaml:"random_resized_crop_scale"`
	RandomResizedCropRatio   []float64 `yaml:"random_resized_crop_ratio"`
	Interpolation            string    `yaml:"interpolation"`
	HFlip                    float64   `yaml:"hflip"`
	MixupAlpha               float64   `yaml:"mixup_alpha"`
	CutmixAlpha              float64   `yaml:"cutmix_alpha"`
	MixupProb                float64   `yaml:"mixup_prob"`
	MixupSwitchProb          float64   `yaml:"mixup_switch_prob"`
	RandomErasing            float64   `yaml:"random_erasing"`
	RandomErasingMode        string    `yaml:"random_erasing_mode"`
	RandAugment              string    `yaml:"rand_augment"`
	AutoAugment              string    `yaml:"auto_augment"`
	AutoAugmentInterpolation string    `yaml:"auto_augment_interpolation"`
	RepeatedAug              int       `yaml:"repeated_aug"`
	// RandAugmentInterpolation is omitted when empty (bilinear), so recipes without it keep their hashes.
	RandAugmentInterpolation string `yaml:"rand_augment_interpolation,omitempty"`
}

// OptimizerConfig is the update law, its hyperparameters and what happens to the gradient before it
// (clipping, accumulation). Hyperparameters at −1 take the chosen optimizer's default (Resolved); one
// that the optimizer does not have must stay at −1 (false for the flags), so a recipe cannot carry a
// setting that silently does nothing.
type OptimizerConfig struct {
	Name            string  `yaml:"name"`
	LR              float64 `yaml:"lr"`
	LRBaseBatch     int     `yaml:"lr_base_batch"`
	Momentum        float64 `yaml:"momentum"`
	Nesterov        bool    `yaml:"nesterov"`
	Beta1           float64 `yaml:"beta1"`
	Beta2           float64 `yaml:"beta2"`
	Epsilon         float64 `yaml:"eps"`
	Rho             float64 `yaml:"rho"`
	LROutside       bool    `yaml:"lr_outside"`
	WeightDecay     float64 `yaml:"weight_decay"`
	ClipGradNorm    float64 `yaml:"clip_grad_norm"`
	AccumulateSteps int     `yaml:"accumulate_steps"`
	// Freeze and LRMult's keys are glob patterns over the net's state_dict keys (trainstep/params.go).
	Freeze []string           `yaml:"freeze"`
	LRMult map[string]float64 `yaml:"lr_mult"`
}

// ScheduleConfig shapes the learning rate over the run; every position is counted in optimizer steps
// (an accumulation of k micro-batches is one step), epochs being fractions of steps per epoch.
type ScheduleConfig struct {
	Name          string    `yaml:"name"`
	WarmupEpochs  float64   `yaml:"warmup_epochs"`
	WarmupSteps   int       `yaml:"warmup_steps"`
	WarmupStartLR float64   `yaml:"warmup_start_lr"`
	MinLR         float64   `yaml:"min_lr"`
	DecayRate     float64   `yaml:"decay_rate"`
	DecayEpochs   float64   `yaml:"decay_epochs"`
	Staircase     bool      `yaml:"staircase"`
	Milestones    []float64 `yaml:"milestones"`
}

// EMAConfig is the exponential moving average of the weights and BatchNorm statistics (Decay 0: none).
type EMAConfig struct {
	Decay  float64 `yaml:"decay"`
	Warmup bool    `yaml:"warmup"`
}

// LossConfig is the training loss.
type LossConfig struct {
	Name               string  `yaml:"name"`
	LabelSmoothing     float64 `yaml:"label_smoothing"`
	BCEDivisor         string  `yaml:"bce_divisor"`
	BCETargetThreshold float64 `yaml:"bce_target_threshold"`
}

// EvalConfig says when to evaluate.
type EvalConfig struct {
	EveryEpochs int `yaml:"every_epochs"`
}

// CheckpointConfig says when to checkpoint, how many to keep, and which metric picks the best one
// (BestMetric resolves auto).
type CheckpointConfig struct {
	EverySteps int    `yaml:"every_steps"`
	Keep       int    `yaml:"keep"`
	Best       string `yaml:"best"`
}

// LogConfig says how often a train record goes to metrics.jsonl and the terminal, and whether the run
// also writes TensorBoard event files.
type LogConfig struct {
	EverySteps  int  `yaml:"every_steps"`
	TensorBoard bool `yaml:"tensorboard"`
}

// GuardConfig is the non-finite guard's policy: one of GuardPolicies; empty means GuardStop.
type GuardConfig struct {
	NonFinite string `yaml:"nonfinite"`
}

// guard.nonfinite values: what a non-finite loss or gradient norm does to the run.
const (
	GuardStop     = "stop"      // end the run with an error naming the step, the tensor and the last good checkpoint
	GuardSkip     = "skip"      // do not apply the step's update
	GuardReduceLR = "reduce_lr" // skip, and halve the lr for the rest of the run
)

// The names each choice key accepts, in the order its error message lists them; validation and the
// messages both read these lists. Net names come from the graphs registry, data sources from data's
// (recipe checks both).
var (
	Optimizers    = []string{"sgd", "adamw", "lamb", "rmsprop_tf"}
	Schedules     = []string{"constant", "cosine", "step", "multistep", "exponential"}
	Losses        = []string{"softmax_ce", "bce"}
	BCEDivisors   = []string{"elements", "batch"}
	BestMetrics   = []string{"auto", "top1", "ema_top1", "none"}
	GuardPolicies = []string{GuardStop, GuardSkip, GuardReduceLR}
	Precisions    = []string{"float32", "bfloat16"}
	ErasingModes  = []string{"pixel", "rand", "const"}
	// DataParallelModes are the values of data_parallel.mode.
	DataParallelModes = []string{DataParallelSPMD, DataParallelAuto}
	// AutoAugmentInterpolations are the samplings of auto_augment's geometric ops (empty: nearest).
	AutoAugmentInterpolations = []string{"nearest", "bilinear"}
	// Switches are the values of a Switch key.
	Switches = []string{"auto", "true", "false"}
	// BadRecordPolicies are the values of data.on_bad_record.
	BadRecordPolicies = []string{BadRecordStop, BadRecordSkip}
)

// Defaults is the one place where every key's default lives (Keys and the generated docs read it).
func Defaults() Config {
	return Config{
		Name:     "",
		Backend:  "go",
		Replicas: 1,
		Seed:     1,
		Epochs:   1,
		Steps:    0,
		RunDir:   "runs",
		Net: NetConfig{Name: "mnist_cnn", Width: 1, NumClasses: 0, Precision: "float32",
			Dropout: -1, DropPath: -1},
		Data: DataConfig{Source: "mnist", Dir: "", BatchSize: 128, EvalBatchSize: 1000, EvalCropPct: 0.875, DeviceNormalize: "auto",
			OnBadRecord: BadRecordStop, MaxImagePixels: DefaultMaxImagePixels,
			Augment: AugmentConfig{RandomResizedCropRatio: []float64{3.0 / 4, 4.0 / 3}, Interpolation: "bilinear",
				MixupProb: 1, MixupSwitchProb: 0.5, RandomErasingMode: "pixel"}},
		Optimizer: OptimizerConfig{Name: "sgd", LR: 0.1, Momentum: -1, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1,
			AccumulateSteps: 1},
		Schedule:   ScheduleConfig{Name: "constant"},
		EMA:        EMAConfig{Decay: 0, Warmup: true},
		Loss:       LossConfig{Name: "softmax_ce", BCEDivisor: "elements"},
		Eval:       EvalConfig{EveryEpochs: 1},
		Checkpoint: CheckpointConfig{EverySteps: 500, Keep: 3, Best: "auto"},
		Log:        LogConfig{EverySteps: 20, TensorBoard: true},
		Guard:      GuardConfig{NonFinite: GuardStop},
		// The explicit per-device program, BatchNorm over the global batch.
		DataParallel: DataParallelConfig{Mode: DataParallelSPMD, SyncBN: true},
	}
}
