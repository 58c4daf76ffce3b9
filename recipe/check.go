package recipe

import (
	"path"
	"slices"
	"strings"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/netspec"
	"github.com/trainer/trainer/internal/echo"
	"github.com/trainer/trainer/weights"
)

// Load reads the recipe at path with its bases and overrides (config.LoadChecked) and validates it
// by config's rules and the world's.
func Load(path string, overrides []string) (config.Config, error) {
	return config.LoadChecked(path, overrides, World{})
}

// LoadNotes is Load, also returning the notes on what composing the recipe's layers changed that no
// layer wrote (config.LoadNotes): the commands that train print them.
func LoadNotes(path string, overrides []string) (config.Config, []string, error) {
	return config.LoadCheckedNotes(path, overrides, World{})
}

// Validate checks cfg by config's rules and the world's.
func Validate(cfg config.Config) error { return ValidateWithDevices(cfg, 0) }

// ValidateWithDevices is Validate for a backend known to have devices devices (0: unknown, or for the
// pure-Go backend its devices=R when given, else as many as replicas).
func ValidateWithDevices(cfg config.Config, devices int) error {
	return cfg.ValidateIn(World{}, devices)
}

// DataSources are the names data.source accepts: the idx sources data.Open reads, then the image
// sources data.OpenSource reads.
func DataSources() []string { return slices.Concat(data.Sources, data.SourceKinds) }

// World is the config.Checker of the rules that need the net registry, NetSpecs, data sources and
// datasets, weights URLs and backend names.
type World struct{}

// CheckSpec implements config.Checker: the spec read from path, at the net section's sizes.
func (World) CheckSpec(path string, n config.NetConfig) error {
	_, err := netspec.Load(path, n.Spec, netspec.Sizes{ImageSize: n.ImageSize, NumClasses: n.NumClasses})
	return err
}

// Check implements config.Checker.
func (World) Check(c config.Config, devices int) []error {
	var r config.Rules
	checkNet(&r, c.Net)
	checkData(&r, c)
	checkBatchValues(&r, c)
	checkReplicas(&r, c)
	return r.Errors()
}

// checkNet checks that net.name is registered or net.spec builds, net.padding and net.gelu parse,
// and an https net.pretrained is a URL the downloader takes.
func checkNet(r *config.Rules, n config.NetConfig) {
	if n.HasSpec() {
		if _, err := netspec.Load("", n.Spec, netspec.Sizes{ImageSize: n.ImageSize, NumClasses: n.NumClasses}); err != nil && n.SpecFile == "" {
			r.Check(false, "net.spec", "%v", err)
		}
	} else if spec, err := graphs.Get(n.Name); err != nil {
		r.Check(false, "net.name", "unknown net %s; registered nets: %s", echo.Quote(n.Name), strings.Join(graphs.Names(), ", "))
	} else {
		r.Check(!n.ZeroInitLast || spec.ZeroInitLast, "net.zero_init_last", "true for %s, whose blocks do not end in a BatchNorm before the residual add; expected false (it applies to the ResNets)", n.Name)
		r.Check(!n.FP32Head || spec.FP32Head, "net.fp32_head", "true for %s, which does not implement it; expected false (it applies to the ResNets)", n.Name)
	}
	_, padErr := graphs.ParsePadding(n.Padding)
	r.Check(padErr == nil && n.Padding != "valid", "net.padding", "got %s, expected symmetric or same (empty: the net's default)", echo.Quote(n.Padding))
	_, geluErr := graphs.ParseGELU(n.GELU)
	r.Check(geluErr == nil, "net.gelu", "got %s, expected erf or tanh (empty: the net's default)", echo.Quote(n.GELU))
	if !weights.IsURL(n.Pretrained) {
		return
	}
	u, err := weights.CheckURL(n.Pretrained)
	if err != nil {
		r.Check(false, "net.pretrained", "%v", err)
		return
	}
	r.Check(n.PretrainedSHA256 != "" || weights.HashPrefix(path.Base(u.Path)) != "", "net.pretrained",
		"%s: its file name carries no hash prefix (as torchvision's resnet50-0676ba61.pth does): set net.pretrained_sha256", echo.Cut(n.Pretrained))
}

// checkData checks the data section against the sources, datasets and augmentations data knows, and
// the keys the idx sources (stored at one size, without a per-example transform) do not take.
func checkData(r *config.Rules, c config.Config) {
	d := c.Data
	r.OneOf(d.Source, "data.source", DataSources())
	if ds := d.Dataset; ds != "" {
		r.OneOf(ds, "data.dataset", data.DatasetNames())
		fixed := idx(d) || d.Source == "cifar10" // the source is the dataset
		r.Check(!fixed || ds == d.Source, "data.dataset", "got %s with data.source %s, which holds %s: leave it empty or set %s",
			echo.Quote(ds), d.Source, d.Source, d.Source)
	}
	a := d.Augment
	_, err := data.ParseInterp(a.Interpolation)
	r.Check(err == nil, "data.augment.interpolation", "got %s, expected bilinear or bicubic", echo.Quote(a.Interpolation))
	if a.RandAugment != "" {
		_, err := data.ParseRandAugment(a.RandAugment)
		r.Check(err == nil, "data.augment.rand_augment", "%v (empty: off)", err)
	}
	_, raErr := data.ParseRAInterpolation(a.RandAugmentInterpolation)
	r.Check(raErr == nil, "data.augment.rand_augment_interpolation", "got %s, expected bilinear, bicubic or random (empty: bilinear)",
		echo.Quote(a.RandAugmentInterpolation))
	if a.AutoAugment != "" {
		_, err := data.ParseAutoAugment(a.AutoAugment)
		r.Check(err == nil, "data.augment.auto_augment", "%v (empty: off)", err)
	}
	// Mixup and cutmix work on decoded batches, so every source takes them; the per-example
	// augmentations need the image sources' transform.
	augmented := len(a.RandomResizedCropScale) > 0 || a.HFlip > 0 || a.RandomErasing > 0 || a.RandAugment != "" || a.AutoAugment != ""
	r.Check(!augmented || !idx(d), "data.augment", "per-example augmentation (crop, flip, erasing, rand_augment, auto_augment) applies to the image sources, not %s", d.Source)
	if size := d.EvalImageSize; size != 0 {
		r.Check(!idx(d), "data.eval_image_size",
			"got %d with data.source %s: the idx sources are stored at one size", size, d.Source)
		if spec, err := Net(c.Net); err == nil {
			r.Check(!spec.FixedInputSize, "data.eval_image_size",
				"got %d, but net %s only takes the resolution it is built for (net.image_size)", size, c.Net.Label())
		}
	}
}

// checkBatchValues bounds the training and evaluation batches' pixel values at the net's input
// (config.MaxBatchValues), which each key's own bound leaves a thousand times too large.
func checkBatchValues(r *config.Rules, c config.Config) {
	spec, err := Net(c.Net)
	if err != nil || c.Data.BatchSize < 1 || c.Data.BatchSize > config.MaxBatchSize || c.Data.EvalBatchSize < 1 ||
		c.Data.EvalBatchSize > config.MaxBatchSize || c.Net.ImageSize > config.MaxImageSize || c.Data.EvalImageSize > config.MaxImageSize {
		return // reported by their own checks
	}
	for _, b := range []struct {
		key   string
		batch int
		train bool
	}{{"data.batch_size", c.Data.BatchSize, true}, {"data.eval_batch_size", c.Data.EvalBatchSize, false}} {
		input := ImageSize(c, spec.InputShape, b.train)
		v := config.BatchValues(b.batch, input)
		r.Check(v <= config.MaxBatchValues, b.key, "got %d at %s's input of %d×%d×%d: %d pixel values a batch, expected at most %d (8 GiB as float32): a smaller batch or image size",
			b.batch, c.Net.Label(), input[0], input[1], input[2], v, int64(config.MaxBatchValues))
	}
}

// idx reports whether the source is one of the idx sources (MNIST's files), stored at one size with
// no per-example transform.
func idx(d config.DataConfig) bool { return slices.Contains(data.Sources, d.Source) }

// checkReplicas checks replicas and data_parallel against the backend's name: the pure-Go backend
// opens with as many devices as replicas unless its config names fewer (backend.ForReplicas), and it has
// no automatic partitioner.
func checkReplicas(r *config.Rules, c config.Config) {
	if c.Replicas <= 1 {
		return
	}
	spec, err := backend.ParseConfig(c.Backend)
	if err != nil || spec.Backend != "go" {
		return
	}
	r.Check(!spec.DevicesGiven || spec.Devices >= c.Replicas, "replicas",
		"got %d, but backend %s has %d device(s): use backend go (opened with as many devices as replicas) or go:devices=%d",
		c.Replicas, echo.Quote(c.Backend), spec.Devices, c.Replicas)
	r.Check(c.DataParallel.Mode != config.DataParallelAuto, "data_parallel.mode",
		"auto needs XLA's automatic partitioner, which backend %q (pure Go) lacks: use spmd", c.Backend)
}
