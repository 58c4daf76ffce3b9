package config

import (
	"slices"

	"github.com/trainer/trainer/data"
)

// Config is one run, resolved from a YAML recipe plus --set overrides. Every key, its default and its
// meaning are listed in Defaults and documented in docs/configs.md.
type Config struct {
	Name       string           `yaml:"name"`
	Backend    string           `yaml:"backend"`
	Replicas   int              `yaml:"replicas"` // data-parallel devices (docs/distributed.md)
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
	Guard      GuardConfig      `yaml:"guard"` // non-finite loss/gradient policy (docs/reliability.md)
}

// NetConfig picks a registered net, its size and the options every net takes.
type NetConfig struct {
	Name       string  `yaml:"name"`
	Width      float64 `yaml:"width"`
	NumClasses int     `yaml:"num_classes"`
	// ImageSize is the square input resolution; 0: the net's default.
	ImageSize int `yaml:"image_size"`
	// Precision is the compute dtype: float32 or bfloat16 (float32 master weights).
	Precision string `yaml:"precision"`
	// Dropout before the classifier and DropPath (stochastic depth, the last block's rate); −1: the
	// reference's default.
	Dropout  float64 `yaml:"dropout"`
	DropPath float64 `yaml:"drop_path"`
	// Padding of strided convolutions: "" (the reference's), symmetric or same (XLA/TF phase).
	Padding string `yaml:"padding"`
	// GELU form: "" (the reference's), erf or tanh.
	GELU string `yaml:"gelu"`
	// BNEpsilon and BNDecay override the net's BatchNorm numerics when > 0 (decay form: 0.9 is
	// PyTorch's momentum 0.1).
	BNEpsilon float64 `yaml:"bn_eps"`
	BNDecay   float64 `yaml:"bn_decay"`
}

// DataConfig names the dataset, how it is batched and, for image sources, augmented.
type DataConfig struct {
	// Source: mnist, fashion-mnist (idx files in Dir), imagefolder, shards, cifar10 or imagenette-bin.
	Source string `yaml:"source"`
	Dir    string `yaml:"dir"`
	// Train and Eval are the splits' paths for the image sources; empty: under Dir (DataPaths).
	Train         string `yaml:"train"`
	Eval          string `yaml:"eval"`
	BatchSize     int    `yaml:"batch_size"`
	EvalBatchSize int    `yaml:"eval_batch_size"`
	// Mean and Std normalise [0,1] pixels: one value for every channel or one per channel; empty:
	// the source's (MNIST's for mnist and fashion-mnist, CIFAR-10's, ImageNet's for the others).
	Mean []float64 `yaml:"mean"`
	Std  []float64 `yaml:"std"`
	// Workers decode in parallel (0: one per core); Prefetch batches are kept ready (0: 2).
	Workers  int `yaml:"workers"`
	Prefetch int `yaml:"prefetch"`
	// EvalCropPct: eval resizes the shorter side to image_size/eval_crop_pct, then center-crops.
	EvalCropPct float64 `yaml:"eval_crop_pct"`
	// EvalImageSize evaluates at another resolution than net.image_size (RSB-A3 trains at 160 and
	// evaluates at 224); 0: the training size. Convolutional nets only.
	EvalImageSize int           `yaml:"eval_image_size"`
	Augment       AugmentConfig `yaml:"augment"`
	// DeviceNormalize: true sends the batches to the device as uint8 pixels and normalises them in the
	// step and eval graphs (a quarter of the bytes, the same floats); false normalises on the host;
	// auto is true on xla backends and false on the pure-Go one (NormalizeOnDevice, docs/data.md).
	DeviceNormalize Switch `yaml:"device_normalize"`
}

// Switch is a key that takes auto, true or false (YAML booleans or strings).
type Switch string

// AugmentConfig is the training augmentation of the image sources (off by default).
type AugmentConfig struct {
	// RandomResizedCropScale [min, max] turns RandomResizedCrop on (torchvision: [0.08, 1]); empty: off,
	// training then resizes and center-crops as eval does.
	RandomResizedCropScale []float64 `yaml:"random_resized_crop_scale"`
	RandomResizedCropRatio []float64 `yaml:"random_resized_crop_ratio"`
	// Interpolation of every resize: bilinear or bicubic.
	Interpolation string `yaml:"interpolation"`
	// HFlip is the probability of a horizontal flip.
	HFlip float64 `yaml:"hflip"`
	// MixupAlpha and CutmixAlpha are the α of timm's batch-level mixup and cutmix (0: off); either on
	// gives the step soft targets with loss.label_smoothing folded in. MixupProb is the probability
	// that a batch is mixed, MixupSwitchProb that of cutmix rather than mixup when both are on.
	MixupAlpha      float64 `yaml:"mixup_alpha"`
	CutmixAlpha     float64 `yaml:"cutmix_alpha"`
	MixupProb       float64 `yaml:"mixup_prob"`
	MixupSwitchProb float64 `yaml:"mixup_switch_prob"`
	// RandomErasing is the probability of timm's random erasing of one box (0: off), filled as
	// RandomErasingMode says: pixel (normal noise per value), rand (per channel) or const (zeros).
	RandomErasing     float64 `yaml:"random_erasing"`
	RandomErasingMode string  `yaml:"random_erasing_mode"`
	// RandAugment is timm's RandAugment config string, e.g. rand-m9-mstd0.5-inc1 (empty: off), run
	// after the crop and flip, before normalisation.
	RandAugment string `yaml:"rand_augment"`
	// AutoAugment is torchvision's AutoAugment policy (imagenet; empty: off), run where RandAugment
	// runs; exclusive with it. AutoAugmentInterpolation samples its geometric ops nearest (the
	// transform's default) or bilinear (torchvision's references/classification/train.py).
	AutoAugment              string `yaml:"auto_augment"`
	AutoAugmentInterpolation string `yaml:"auto_augment_interpolation"`
	// RepeatedAug k > 1 shows each training image k times per epoch, each copy augmented on its own and
	// dealt to another replica (timm's repeated augmentation, DeiT's recipe); an epoch keeps N images.
	RepeatedAug int `yaml:"repeated_aug"`
}

// OptimizerConfig is the update law, its hyperparameters and what happens to the gradient before it
// (clipping, accumulation). Hyperparameters at −1 take the chosen optimizer's default (Resolved); one
// that the optimizer does not have must stay at −1 (false for the flags), so a recipe cannot carry a
// setting that silently does nothing.
type OptimizerConfig struct {
	Name string  `yaml:"name"`
	LR   float64 `yaml:"lr"`
	// LRBaseBatch, when > 0, makes LR a rate per LRBaseBatch images: the peak is
	// LR × global batch / LRBaseBatch, the global batch being data.batch_size × AccumulateSteps.
	LRBaseBatch int     `yaml:"lr_base_batch"`
	Momentum    float64 `yaml:"momentum"`
	Nesterov    bool    `yaml:"nesterov"`
	Beta1       float64 `yaml:"beta1"`
	Beta2       float64 `yaml:"beta2"`
	Epsilon     float64 `yaml:"eps"`
	Rho         float64 `yaml:"rho"`
	LROutside   bool    `yaml:"lr_outside"`
	WeightDecay float64 `yaml:"weight_decay"`
	// ClipGradNorm scales the gradient by min(1, c/(‖g‖+1e−6)), one norm over every parameter; 0: off.
	ClipGradNorm float64 `yaml:"clip_grad_norm"`
	// AccumulateSteps k: each optimizer step averages the gradients of k micro-batches of data.batch_size.
	AccumulateSteps int `yaml:"accumulate_steps"`
}

// ScheduleConfig shapes the learning rate over the run; every position is counted in optimizer steps
// (an accumulation of k micro-batches is one step), epochs being fractions of steps per epoch.
type ScheduleConfig struct {
	Name string `yaml:"name"`
	// Linear warmup from WarmupStartLR to the peak over WarmupEpochs or WarmupSteps (at most one set).
	WarmupEpochs  float64 `yaml:"warmup_epochs"`
	WarmupSteps   int     `yaml:"warmup_steps"`
	WarmupStartLR float64 `yaml:"warmup_start_lr"`
	// MinLR is the cosine's floor.
	MinLR float64 `yaml:"min_lr"`
	// DecayRate and DecayEpochs: step multiplies by the rate every DecayEpochs; exponential is
	// rate^(epoch/DecayEpochs) (floored exponent with Staircase); multistep multiplies by the rate at
	// each of Milestones (epochs).
	DecayRate   float64   `yaml:"decay_rate"`
	DecayEpochs float64   `yaml:"decay_epochs"`
	Staircase   bool      `yaml:"staircase"`
	Milestones  []float64 `yaml:"milestones"`
}

// EMAConfig is the exponential moving average of the weights (and of the BatchNorm statistics).
type EMAConfig struct {
	// Decay is the EMA's decay; 0: no EMA.
	Decay float64 `yaml:"decay"`
	// Warmup caps the decay at (1+t)/(10+t) for optimizer step t, as TensorFlow's num_updates does.
	Warmup bool `yaml:"warmup"`
}

// LossConfig is the training loss.
type LossConfig struct {
	// Name: softmax_ce (softmax cross-entropy) or bce (binary cross-entropy with logits, per class).
	Name           string  `yaml:"name"`
	LabelSmoothing float64 `yaml:"label_smoothing"`
	// BCEDivisor: elements divides the summed BCE by batch × classes (timm, RSB-A3); batch by batch.
	BCEDivisor string `yaml:"bce_divisor"`
	// BCETargetThreshold, when > 0, binarises the (smoothed) targets as target > threshold (timm).
	BCETargetThreshold float64 `yaml:"bce_target_threshold"`
}

// EvalConfig says when to evaluate.
type EvalConfig struct {
	EveryEpochs int `yaml:"every_epochs"`
}

// CheckpointConfig says when to checkpoint and how many to keep.
type CheckpointConfig struct {
	EverySteps int `yaml:"every_steps"`
	Keep       int `yaml:"keep"`
	// Best keeps checkpoints/best.tckpt at the best eval score of this metric: auto (ema_top1 when
	// EMA is on, else top1), top1, ema_top1 or none.
	Best string `yaml:"best"`
}

// LogConfig says how often a train record goes to metrics.jsonl and the terminal.
type LogConfig struct {
	EverySteps int `yaml:"every_steps"`
}

// GuardConfig is the non-finite guard's policy.
type GuardConfig struct {
	// NonFinite: stop, skip or reduce_lr (see the Guard* constants); empty means stop.
	NonFinite string `yaml:"nonfinite"`
}

// guard.nonfinite values: what a non-finite loss or gradient norm does to the run.
const (
	GuardStop     = "stop"      // end the run with an error naming the step, the tensor and the last good checkpoint
	GuardSkip     = "skip"      // do not apply the step's update
	GuardReduceLR = "reduce_lr" // skip, and halve the lr for the rest of the run
)

// The names each choice key accepts, in the order its error message lists them; validation and the
// messages both read these lists. Net names come from the graphs registry, data sources from data's.
var (
	Optimizers    = []string{"sgd", "adamw", "lamb", "rmsprop_tf"}
	Schedules     = []string{"constant", "cosine", "step", "multistep", "exponential"}
	Losses        = []string{"softmax_ce", "bce"}
	BCEDivisors   = []string{"elements", "batch"}
	BestMetrics   = []string{"auto", "top1", "ema_top1", "none"}
	GuardPolicies = []string{GuardStop, GuardSkip, GuardReduceLR}
	Precisions    = []string{"float32", "bfloat16"}
	ErasingModes  = []string{"pixel", "rand", "const"}
	// AutoAugmentInterpolations are the samplings of auto_augment's geometric ops (empty: nearest).
	AutoAugmentInterpolations = []string{"nearest", "bilinear"}
	// Switches are the values of a Switch key.
	Switches = []string{"auto", "true", "false"}
)

// DataSources are the names data.source accepts: the idx sources data.Open reads, then the image
// sources data.OpenSource reads.
func DataSources() []string { return slices.Concat(data.Sources, data.SourceKinds) }

// Defaults is the one place where every key's default lives.
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
			Augment: AugmentConfig{RandomResizedCropRatio: []float64{3.0 / 4, 4.0 / 3}, Interpolation: "bilinear",
				MixupProb: 1, MixupSwitchProb: 0.5, RandomErasingMode: "pixel"}},
		Optimizer: OptimizerConfig{Name: "sgd", LR: 0.1, Momentum: -1, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1,
			AccumulateSteps: 1},
		Schedule:   ScheduleConfig{Name: "constant"},
		EMA:        EMAConfig{Decay: 0, Warmup: true},
		Loss:       LossConfig{Name: "softmax_ce", BCEDivisor: "elements"},
		Eval:       EvalConfig{EveryEpochs: 1},
		Checkpoint: CheckpointConfig{EverySteps: 500, Keep: 3, Best: "auto"},
		Log:        LogConfig{EverySteps: 20},
		Guard:      GuardConfig{NonFinite: GuardStop},
	}
}
