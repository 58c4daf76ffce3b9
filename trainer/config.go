package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/graphs"
)

// Config is one run, resolved from a YAML recipe plus --set overrides. Every key, its default and its
// meaning are listed in Defaults and documented in docs/configs.md.
type Config struct {
	Name       string           `yaml:"name"`
	Backend    string           `yaml:"backend"`
	Seed       int              `yaml:"seed"`
	Epochs     int              `yaml:"epochs"`
	Steps      int              `yaml:"steps"`
	RunDir     string           `yaml:"run_dir"`
	Net        NetConfig        `yaml:"net"`
	Data       DataConfig       `yaml:"data"`
	Optimizer  OptimizerConfig  `yaml:"optimizer"`
	Schedule   ScheduleConfig   `yaml:"schedule"`
	Eval       EvalConfig       `yaml:"eval"`
	Checkpoint CheckpointConfig `yaml:"checkpoint"`
	Log        LogConfig        `yaml:"log"`
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

// Options resolves the net options for graphs.
func (n NetConfig) Options(seed int) (graphs.Options, error) {
	padding, err := graphs.ParsePadding(n.Padding)
	if err != nil {
		return graphs.Options{}, fmt.Errorf("net.padding: %w", err)
	}
	gelu, err := graphs.ParseGELU(n.GELU)
	if err != nil {
		return graphs.Options{}, fmt.Errorf("net.gelu: %w", err)
	}
	opts := graphs.Options{
		NumClasses: n.NumClasses, Width: n.Width, ImageSize: n.ImageSize, Precision: n.Precision,
		Padding: padding, GELU: gelu, BNEpsilon: n.BNEpsilon, BNDecay: n.BNDecay, Seed: uint64(seed),
	}
	if n.Dropout >= 0 {
		rate := n.Dropout
		opts.DropoutRate = &rate
	}
	if n.DropPath >= 0 {
		rate := n.DropPath
		opts.DropPathRate = &rate
	}
	return opts, nil
}

// DataConfig names the dataset and how it is batched.
type DataConfig struct {
	Source        string  `yaml:"source"`
	Dir           string  `yaml:"dir"`
	BatchSize     int     `yaml:"batch_size"`
	EvalBatchSize int     `yaml:"eval_batch_size"`
	Mean          float64 `yaml:"mean"`
	Std           float64 `yaml:"std"`
}

// OptimizerConfig is the update law and its hyperparameters.
type OptimizerConfig struct {
	Name        string  `yaml:"name"`
	LR          float64 `yaml:"lr"`
	Momentum    float64 `yaml:"momentum"`
	Nesterov    bool    `yaml:"nesterov"`
	WeightDecay float64 `yaml:"weight_decay"`
}

// ScheduleConfig shapes the learning rate over the run.
type ScheduleConfig struct {
	Name         string  `yaml:"name"`
	WarmupEpochs float64 `yaml:"warmup_epochs"`
	MinLR        float64 `yaml:"min_lr"`
}

// EvalConfig says when to evaluate.
type EvalConfig struct {
	EveryEpochs int `yaml:"every_epochs"`
}

// CheckpointConfig says when to checkpoint and how many to keep.
type CheckpointConfig struct {
	EverySteps int `yaml:"every_steps"`
	Keep       int `yaml:"keep"`
}

// LogConfig says how often a train record goes to metrics.jsonl and the terminal.
type LogConfig struct {
	EverySteps int `yaml:"every_steps"`
}

// Defaults is the one place where every key's default lives.
func Defaults() Config {
	return Config{
		Name:    "",
		Backend: "go",
		Seed:    1,
		Epochs:  1,
		Steps:   0,
		RunDir:  "runs",
		Net: NetConfig{Name: "mnist_cnn", Width: 1, NumClasses: 0, Precision: "float32",
			Dropout: -1, DropPath: -1},
		Data: DataConfig{Source: "mnist", Dir: "", BatchSize: 128, EvalBatchSize: 1000,
			Mean: 0.1307, Std: 0.3081},
		Optimizer:  OptimizerConfig{Name: "sgd", LR: 0.1, Momentum: 0.9, Nesterov: false, WeightDecay: 0},
		Schedule:   ScheduleConfig{Name: "constant", WarmupEpochs: 0, MinLR: 0},
		Eval:       EvalConfig{EveryEpochs: 1},
		Checkpoint: CheckpointConfig{EverySteps: 500, Keep: 3},
		Log:        LogConfig{EverySteps: 20},
	}
}

// LoadConfig reads a YAML recipe through viper, applies "key=value" overrides, and returns the
// validated config; every problem is reported with the file (or --set), the key and what was expected.
func LoadConfig(path string, overrides []string) (Config, error) {
	v := viper.New()
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	fromSet := map[string]bool{}
	for _, o := range overrides {
		key, raw, ok := strings.Cut(o, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if !ok || key == "" {
			return Config{}, fmt.Errorf("--set %q: expected key=value, e.g. --set optimizer.lr=0.05", o)
		}
		var value any
		if err := yaml.Unmarshal([]byte(raw), &value); err != nil {
			return Config{}, fmt.Errorf("--set %s: cannot parse value %q: %v", key, raw, err)
		}
		v.Set(key, value)
		fromSet[key] = true
	}
	cfg := Defaults()
	source := func(key string) string {
		if fromSet[key] {
			return "--set " + key
		}
		return path + ": " + key
	}
	if err := decode(reflect.ValueOf(&cfg).Elem(), v.AllSettings(), "", source); err != nil {
		return Config{}, err
	}
	if cfg.Name == "" {
		cfg.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// decode copies settings into the struct dst, strictly: unknown keys and wrong types are errors.
func decode(dst reflect.Value, settings map[string]any, prefix string, source func(string) string) error {
	fields := map[string]reflect.Value{}
	var names []string
	for i := range dst.NumField() {
		tag := dst.Type().Field(i).Tag.Get("yaml")
		fields[tag] = dst.Field(i)
		names = append(names, tag)
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		key := prefix + k
		field, ok := fields[k]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown key; expected one of: %s", source(key), joinPrefixed(prefix, names)))
			continue
		}
		if err := setField(field, settings[k], key, source); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func joinPrefixed(prefix string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return strings.Join(out, ", ")
}

// setField converts one YAML value into the field's type without guessing: an int field takes only
// integral numbers, a string field only strings, and so on.
func setField(field reflect.Value, value any, key string, source func(string) string) error {
	bad := func(want string) error {
		return fmt.Errorf("%s: expected %s, got %T %v", source(key), want, value, value)
	}
	switch field.Kind() {
	case reflect.Struct:
		m, ok := value.(map[string]any)
		if !ok {
			return bad("a mapping of keys")
		}
		return decode(field, m, key+".", source)
	case reflect.String:
		s, ok := value.(string)
		if !ok {
			return bad("a string")
		}
		field.SetString(s)
	case reflect.Bool:
		b, ok := value.(bool)
		if !ok {
			return bad("true or false")
		}
		field.SetBool(b)
	case reflect.Int:
		switch n := value.(type) {
		case int:
			field.SetInt(int64(n))
		case int64:
			field.SetInt(n)
		case float64:
			if n != float64(int64(n)) {
				return bad("an integer")
			}
			field.SetInt(int64(n))
		default:
			return bad("an integer")
		}
	case reflect.Float64:
		switch n := value.(type) {
		case int:
			field.SetFloat(float64(n))
		case int64:
			field.SetFloat(float64(n))
		case float64:
			field.SetFloat(n)
		default:
			return bad("a number")
		}
	default:
		return fmt.Errorf("%s: field kind %s not supported by the config decoder", source(key), field.Kind())
	}
	return nil
}

// Validate checks ranges and names; each error names the key and what was expected.
func (c Config) Validate() error {
	var errs []error
	check := func(ok bool, key, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
		}
	}
	oneOf := func(value, key string, allowed ...string) {
		for _, a := range allowed {
			if value == a {
				return
			}
		}
		errs = append(errs, fmt.Errorf("%s: got %q, expected one of: %s", key, value, strings.Join(allowed, ", ")))
	}
	check(c.Name != "" && !strings.ContainsAny(c.Name, `/\`) && c.Name != "." && c.Name != "..",
		"name", "got %q, expected a plain name usable as a directory", c.Name)
	check(c.Backend != "", "backend", "expected a backend: go, xla:cpu, xla:cuda, xla:tpu or a plugin path")
	check(c.Seed >= 0, "seed", "got %d, expected >= 0", c.Seed)
	check(c.Epochs >= 0, "epochs", "got %d, expected >= 0", c.Epochs)
	check(c.Steps >= 0, "steps", "got %d, expected >= 0 (0: run whole epochs)", c.Steps)
	check(c.Epochs > 0 || c.Steps > 0, "epochs", "epochs and steps are both 0: nothing to train")
	check(c.RunDir != "", "run_dir", "expected a directory")
	if _, err := graphs.Get(c.Net.Name); err != nil {
		errs = append(errs, fmt.Errorf("net.name: %v", err))
	}
	check(c.Net.Width > 0 && c.Net.Width <= 16, "net.width", "got %g, expected in (0, 16]", c.Net.Width)
	check(c.Net.NumClasses >= 0, "net.num_classes", "got %d, expected >= 0 (0: the net's default)", c.Net.NumClasses)
	check(c.Net.ImageSize >= 0 && c.Net.ImageSize <= 4096, "net.image_size", "got %d, expected in [0, 4096] (0: the net's default)", c.Net.ImageSize)
	oneOf(c.Net.Precision, "net.precision", "float32", "bfloat16")
	check(c.Net.Dropout == -1 || (c.Net.Dropout >= 0 && c.Net.Dropout < 1), "net.dropout", "got %g, expected in [0, 1) or -1 (the net's default)", c.Net.Dropout)
	check(c.Net.DropPath == -1 || (c.Net.DropPath >= 0 && c.Net.DropPath < 1), "net.drop_path", "got %g, expected in [0, 1) or -1 (the net's default)", c.Net.DropPath)
	_, padErr := graphs.ParsePadding(c.Net.Padding)
	check(padErr == nil && c.Net.Padding != "valid", "net.padding", "got %q, expected symmetric or same (empty: the net's default)", c.Net.Padding)
	_, geluErr := graphs.ParseGELU(c.Net.GELU)
	check(geluErr == nil, "net.gelu", "got %q, expected erf or tanh (empty: the net's default)", c.Net.GELU)
	check(c.Net.BNEpsilon >= 0 && c.Net.BNEpsilon < 1, "net.bn_eps", "got %g, expected in [0, 1) (0: the net's default)", c.Net.BNEpsilon)
	check(c.Net.BNDecay >= 0 && c.Net.BNDecay < 1, "net.bn_decay", "got %g, expected in [0, 1) (0: the net's default)", c.Net.BNDecay)
	oneOf(c.Data.Source, "data.source", "mnist", "fashion-mnist")
	check(c.Data.BatchSize >= 1, "data.batch_size", "got %d, expected >= 1", c.Data.BatchSize)
	check(c.Data.EvalBatchSize >= 1, "data.eval_batch_size", "got %d, expected >= 1", c.Data.EvalBatchSize)
	check(c.Data.Std > 0, "data.std", "got %g, expected > 0", c.Data.Std)
	oneOf(c.Optimizer.Name, "optimizer.name", "sgd")
	check(c.Optimizer.LR > 0 && c.Optimizer.LR <= 100, "optimizer.lr", "got %g, expected in (0, 100]", c.Optimizer.LR)
	check(c.Optimizer.Momentum >= 0 && c.Optimizer.Momentum < 1, "optimizer.momentum", "got %g, expected in [0, 1)", c.Optimizer.Momentum)
	check(!c.Optimizer.Nesterov || c.Optimizer.Momentum > 0, "optimizer.nesterov", "Nesterov needs optimizer.momentum > 0")
	check(c.Optimizer.WeightDecay >= 0 && c.Optimizer.WeightDecay < 1, "optimizer.weight_decay", "got %g, expected in [0, 1)", c.Optimizer.WeightDecay)
	oneOf(c.Schedule.Name, "schedule.name", "constant", "cosine")
	check(c.Schedule.WarmupEpochs >= 0, "schedule.warmup_epochs", "got %g, expected >= 0", c.Schedule.WarmupEpochs)
	check(c.Schedule.MinLR >= 0 && c.Schedule.MinLR <= c.Optimizer.LR, "schedule.min_lr", "got %g, expected in [0, optimizer.lr]", c.Schedule.MinLR)
	check(c.Eval.EveryEpochs >= 0, "eval.every_epochs", "got %d, expected >= 0 (0: only at the end)", c.Eval.EveryEpochs)
	check(c.Checkpoint.EverySteps >= 0, "checkpoint.every_steps", "got %d, expected >= 0 (0: only at the end)", c.Checkpoint.EverySteps)
	check(c.Checkpoint.Keep >= 1, "checkpoint.keep", "got %d, expected >= 1", c.Checkpoint.Keep)
	check(c.Log.EverySteps >= 1, "log.every_steps", "got %d, expected >= 1", c.Log.EverySteps)
	return errors.Join(errs...)
}

// YAML renders the resolved config, as written to runs/<name>/config.yaml.
func (c Config) YAML() []byte {
	out, err := yaml.Marshal(c)
	if err != nil {
		panic(err) // a plain struct of scalars always marshals
	}
	return out
}

// Hash identifies the resolved config (used to tie checkpoints to the run that wrote them).
func (c Config) Hash() string {
	sum := sha256.Sum256(c.YAML())
	return hex.EncodeToString(sum[:8])
}

// Dir is the run directory, runs/<name>.
func (c Config) Dir() string { return filepath.Join(c.RunDir, c.Name) }
