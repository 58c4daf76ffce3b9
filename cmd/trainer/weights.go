package main

import (
	"bufio"
	stdcontext "context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/internal/bounded"
	"github.com/trainer/trainer/internal/echo"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/trainer"
	"github.com/trainer/trainer/weights"
)

// Weight interchange with PyTorch (docs/weights.md): export a checkpoint as a safetensors state_dict,
// import one as a checkpoint, and classify images with either.

// netShape holds --size, --width and --num-classes, the flags export, import and predict share: they fix
// the shapes of a net's variables when it is named rather than given by a config.
type netShape struct {
	Size       int     // --size
	Width      float64 // --width
	NumClasses int     // --num-classes
	// given names the flags set on the command line (not a flag; filled at parse time by noteGiven):
	// with a config, only those override its net section.
	given map[string]bool
}

// addNetShapeFlags binds --size, --width and --num-classes to n.
func addNetShapeFlags(fs *pflag.FlagSet, n *netShape) {
	fs.IntVar(&n.Size, "size", 0, "input size `S` (net.image_size; 0: the net's default; ViT sizes its position embedding from it)")
	fs.Float64Var(&n.Width, "width", 1, "width multiplier `W` of the net (net.width)")
	fs.IntVar(&n.NumClasses, "num-classes", 0, "number `N` of classes (net.num_classes; 0: the net's default)")
}

// givenFlags names the flags of fs set on the command line.
func givenFlags(fs *pflag.FlagSet) map[string]bool {
	given := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { given[f.Name] = true })
	return given
}

// resolveNet reads CONFIG_OR_NET: a registered net's name (shaped by the flags), or a YAML recipe whose
// net section gives the net and its options (flags given explicitly override it).
func (n netShape) resolveNet(arg string) (graphs.Spec, graphs.Options, string, error) {
	set := func(name string) bool { return n.given[name] }
	spec, err := graphs.Get(arg)
	var opts graphs.Options
	configHash := ""
	if err != nil {
		if _, statErr := os.Stat(arg); statErr != nil {
			return spec, opts, "", fmt.Errorf("%q is neither a registered net nor a config file: %v", arg, err)
		}
		cfg, err := recipe.Load(arg, nil)
		if err != nil {
			return spec, opts, "", err
		}
		if opts, err = recipe.NetOptions(cfg.Net, cfg.Seed); err != nil {
			return spec, opts, "", err
		}
		if spec, err = recipe.Net(cfg.Net); err != nil {
			return spec, opts, "", err
		}
		configHash = cfg.Hash()
	}
	if set("width") || configHash == "" {
		opts.Width = n.Width
	}
	if set("num-classes") || configHash == "" {
		opts.NumClasses = n.NumClasses
	}
	if set("size") || configHash == "" {
		opts.ImageSize = n.Size
	}
	// A recipe's bounds (net.width, net.num_classes, net.image_size); NaN and +Inf fail the width's.
	if !(opts.Width > 0 && opts.Width <= 16) || opts.NumClasses < 0 || opts.ImageSize < 0 || opts.ImageSize > config.MaxImageSize {
		return spec, opts, "", fmt.Errorf("--width %g, --num-classes %d, --size %d: expected a width in (0, 16], a size of at most %d and no negative values",
			opts.Width, opts.NumClasses, opts.ImageSize, config.MaxImageSize)
	}
	// Checkpoints and state_dicts hold float32 master weights whatever the compute precision.
	opts.Precision = ""
	return spec, opts, configHash, nil
}

// shapeHint adds to a fit error the flags that change variable shapes.
func shapeHint(err error) error {
	var fit *weights.FitError
	if errors.As(err, &fit) && len(fit.Mismatched) > 0 {
		return fmt.Errorf("%w\n(shapes depend on --width, --num-classes and --size)", err)
	}
	return err
}

// template lists the variables the net declares.
func template(spec graphs.Spec, opts graphs.Options) ([]weights.Variable, error) {
	b, err := backend.Open("go")
	if err != nil {
		return nil, err
	}
	return weights.Template(b, spec, opts)
}

// checkpointVariables loads a checkpoint of spec and returns its model variables (template paths only).
func checkpointVariables(path string, spec graphs.Spec, vars []weights.Variable) (*checkpoint.Checkpoint, map[string]*tensors.Tensor, error) {
	ckpt, err := checkpoint.Load(path)
	if err != nil {
		return nil, nil, err
	}
	if ckpt.Header.Net != "" && ckpt.Header.Net != spec.Name {
		return nil, nil, fmt.Errorf("checkpoint %s holds net %q, not %q", path, ckpt.Header.Net, spec.Name)
	}
	if err := spec.CheckRevision(path, ckpt.Header.NetRevision); err != nil {
		return nil, nil, err
	}
	if err := weights.CheckVariables(spec, vars, ckpt.Tensors, path); err != nil {
		return nil, nil, shapeHint(err)
	}
	model := make(map[string]*tensors.Tensor, len(vars))
	for _, v := range vars {
		model[v.Path()] = ckpt.Tensors[v.Path()]
	}
	return ckpt, model, nil
}

// newExportCommand declares `trainer export` and its flags.
func newExportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export CONFIG_OR_NET",
		Short: "Write a checkpoint's weights as a PyTorch state_dict",
		Long: `Writes the weights of a checkpoint of CONFIG_OR_NET (a recipe, or a registered net shaped by the
flags) as a safetensors state_dict with the reference's names (docs/weights.md).`,
		Args: cobra.ExactArgs(1),
	}
	var f exportFlags
	fs := cmd.Flags()
	fs.StringVar(&f.Checkpoint, "checkpoint", "", "the checkpoint `CKPT` to export")
	fs.StringVar(&f.Out, "out", "", "write the state_dict to `FILE.safetensors`")
	addNetShapeFlags(fs, &f.netShape)
	_ = cmd.MarkFlagRequired("checkpoint")
	_ = cmd.MarkFlagRequired("out")
	cmd.RunE = func(cmd *cobra.Command, positional []string) error {
		f.given = givenFlags(fs)
		return exportMain(f, positional, cmd.OutOrStdout())
	}
	return cmd
}

// exportFlags are `trainer export`'s flags, one field per flag; netShape holds --size, --width and
// --num-classes, the group import and predict share.
type exportFlags struct {
	Checkpoint string // --checkpoint
	Out        string // --out
	netShape          // --size, --width, --num-classes
}

// exportMain is `trainer export` with its parsed flags.
func exportMain(f exportFlags, positional []string, stdout io.Writer) error {
	spec, opts, _, err := f.resolveNet(positional[0])
	if err != nil {
		return err
	}
	vars, err := template(spec, opts)
	if err != nil {
		return err
	}
	ckpt, model, err := checkpointVariables(f.Checkpoint, spec, vars)
	if err != nil {
		return err
	}
	meta := map[string]string{
		"step": strconv.Itoa(ckpt.Header.Step), "epoch": strconv.Itoa(ckpt.Header.Epoch),
		"trainer_version": trainer.Version, "source": filepath.Base(f.Checkpoint),
	}
	if ckpt.Header.ConfigHash != "" {
		meta["config_hash"] = ckpt.Header.ConfigHash
	}
	if err := weights.SaveVariables(f.Out, spec, model, meta); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d variables of %s (step %d) as a PyTorch state_dict\n",
		f.Out, len(model), spec.Name, ckpt.Header.Step)
	return nil
}

// newImportCommand declares `trainer import` and its flags.
func newImportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import CONFIG_OR_NET FILE_OR_URL",
		Short: "Turn a PyTorch state_dict into a checkpoint",
		Long: `Reads a state_dict with the reference's names (torchvision's, timm's, or one export wrote) into a
checkpoint of CONFIG_OR_NET that eval scores and run --resume-from fine-tunes (docs/weights.md). FILE_OR_URL
is a .safetensors file, a PyTorch .pth (torch.save's zip or legacy format; its pickle is checked, never
run), or an https URL downloaded once into the cache ($XDG_CACHE_HOME/trainer/weights) and checked
against the hash prefix in its file name or --sha256.`,
		Args: cobra.ExactArgs(2),
	}
	var f importFlags
	fs := cmd.Flags()
	fs.StringVar(&f.Out, "out", "", "write the checkpoint to `CKPT`")
	fs.StringVar(&f.SHA256, "sha256", "", "the SHA-256 `HEX` the file or download must have (URLs without a hash prefix need it)")
	addNetShapeFlags(fs, &f.netShape)
	_ = cmd.MarkFlagRequired("out")
	cmd.RunE = func(cmd *cobra.Command, positional []string) error {
		f.given = givenFlags(fs)
		return importMain(cmd.Context(), f, positional, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// importFlags are `trainer import`'s flags, one field per flag; netShape holds --size, --width and
// --num-classes.
type importFlags struct {
	Out      string // --out
	SHA256   string // --sha256
	netShape        // --size, --width, --num-classes
}

// importMain is `trainer import` with its parsed flags; a download's progress goes to stderr.
func importMain(ctx stdcontext.Context, f importFlags, positional []string, stdout, stderr io.Writer) error {
	spec, opts, configHash, err := f.resolveNet(positional[0])
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = stdcontext.Background()
	}
	path, err := weights.Resolve(ctx, positional[1], weights.FetchOptions{SHA256: f.SHA256, Progress: stderr})
	if err != nil {
		return err
	}
	model, n, err := loadStateDict(spec, opts, path)
	if err != nil {
		return err
	}
	header := checkpoint.Header{TrainerVersion: trainer.Version, ConfigHash: configHash, Net: spec.Name, NetRevision: spec.Revision}
	if err := checkpoint.SaveFile(f.Out, model, header); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d variables of %s from %s (step 0: `%[5]s eval` scores it, `%[5]s run --resume-from` fine-tunes it)\n",
		f.Out, n, spec.Name, path, selfCommand())
	return nil
}

// loadStateDict creates the net's variables from a state_dict (safetensors or .pth) in a fresh context.
func loadStateDict(spec graphs.Spec, opts graphs.Options, path string) (*context.Context, int, error) {
	f, err := weights.ReadStateDict(path)
	if err != nil {
		return nil, 0, err
	}
	vars, err := template(spec, opts)
	if err != nil {
		return nil, 0, err
	}
	values, err := weights.FromStateDict(spec, vars, f)
	if err != nil {
		return nil, 0, shapeHint(err)
	}
	ctx := context.New()
	return ctx, len(values), weights.SetVariables(ctx, vars, values)
}

// isStateDictFile tells a state_dict (by its extension: .safetensors, or PyTorch's .pth, .pt, .bin)
// from a trainer checkpoint.
func isStateDictFile(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".safetensors", ".pth", ".pt", ".bin":
		return true
	}
	return false
}

// floatList parses "a,b,c".
func floatList(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%q is not a list of finite numbers", s)
		}
		out = append(out, v)
	}
	return out, nil
}

// readClassNames reads one class name per line (a trailing empty line is ignored).
func readClassNames(path string) ([]string, error) {
	f, _, err := bounded.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		names = append(names, strings.TrimSpace(sc.Text()))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("class names file %s is empty", path)
	}
	return names, nil
}

// newPredictCommand declares `trainer predict` and its flags.
func newPredictCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "predict [flags] IMAGE...",
		Short: "Print the top classes of images",
		Long: `Prints the most probable classes of each IMAGE under the given weights, with the reference's eval
preprocessing (resize, center crop, normalise; docs/weights.md).`,
		Args: cobra.MinimumNArgs(1),
	}
	var f predictFlags
	fs := cmd.Flags()
	fs.StringVar(&f.Net, "net", "", "registered net `NAME` or config file")
	fs.StringVar(&f.Weights, "weights", "", "weights `FILE`: a state_dict (.safetensors, or PyTorch's .pth) or a trainer checkpoint")
	fs.StringVar(&f.Classes, "classes", "", "text `FILE` of class names, one per line (sets --num-classes)")
	addNetShapeFlags(fs, &f.netShape)
	fs.Float64Var(&f.CropPct, "crop-pct", 0, "center-crop fraction `F` of the resized image (0: 0.875 for RGB nets, 1 for grey ones)")
	fs.StringVar(&f.Mean, "mean", "", "per-channel mean `M[,M]` (default ImageNet's for RGB nets, MNIST's for grey ones)")
	fs.StringVar(&f.Std, "std", "", "per-channel std `S[,S]` (default as --mean)")
	fs.IntVar(&f.Top, "top", 5, "how many classes `K` to print per image")
	fs.StringVar(&f.Backend, "backend", "go", "backend `B`: go, xla:cpu, xla:cuda, or a plugin path")
	fs.Int64Var(&f.MaxImagePixels, "max-image-pixels", data.DefaultMaxImagePixels, "refuse, from its header, an image of more than `N` pixels (width × height)")
	_ = cmd.MarkFlagRequired("net")
	_ = cmd.MarkFlagRequired("weights")
	cmd.RunE = func(cmd *cobra.Command, images []string) error {
		f.given = givenFlags(fs)
		return predictMain(f, images, cmd.OutOrStdout())
	}
	return cmd
}

// predictFlags are `trainer predict`'s flags, one field per flag; netShape holds --size, --width and
// --num-classes.
type predictFlags struct {
	Net            string  // --net
	Weights        string  // --weights
	Classes        string  // --classes
	netShape               // --size, --width, --num-classes
	CropPct        float64 // --crop-pct
	Mean           string  // --mean
	Std            string  // --std
	Top            int     // --top
	Backend        string  // --backend
	MaxImagePixels int64   // --max-image-pixels
}

// predictMain is `trainer predict` with its parsed flags.
func predictMain(f predictFlags, images []string, stdout io.Writer) error {
	if f.MaxImagePixels < 1 {
		return fmt.Errorf("--max-image-pixels %d, expected >= 1", f.MaxImagePixels)
	}
	// data.eval_crop_pct's range; NaN fails it too (it reached the resampler as a panic).
	if !(f.CropPct >= 0 && f.CropPct <= 1) {
		return fmt.Errorf("--crop-pct %g, expected in (0, 1] (0: 0.875 for RGB nets, 1 for grey ones)", f.CropPct)
	}
	var names []string
	var err error
	if f.Classes != "" {
		if names, err = readClassNames(f.Classes); err != nil {
			return err
		}
		if !f.given["num-classes"] {
			f.NumClasses = len(names)
		}
	}
	spec, opts, _, err := f.resolveNet(f.Net)
	if err != nil {
		return err
	}
	classes := opts.NumClasses
	if classes == 0 {
		classes = spec.NumClasses
	}
	if names != nil && len(names) != classes {
		return fmt.Errorf("%s has %d class names, the net has %d classes", f.Classes, len(names), classes)
	}
	over := trainer.PredictOverrides{CropPct: f.CropPct}
	if f.Mean != "" {
		if over.Mean, err = floatList(f.Mean); err != nil {
			return fmt.Errorf("--mean: %w", err)
		}
	}
	if f.Std != "" {
		if over.Std, err = floatList(f.Std); err != nil {
			return fmt.Errorf("--std: %w", err)
		}
	}
	tr, err := trainer.PredictTransform(spec, opts, over, f.MaxImagePixels)
	if err != nil {
		return err
	}

	var ctx *context.Context
	if isStateDictFile(f.Weights) {
		if ctx, _, err = loadStateDict(spec, opts, f.Weights); err != nil {
			return err
		}
	} else {
		vars, err := template(spec, opts)
		if err != nil {
			return err
		}
		_, model, err := checkpointVariables(f.Weights, spec, vars)
		if err != nil {
			return err
		}
		ctx = context.New()
		if err := weights.SetVariables(ctx, vars, model); err != nil {
			return err
		}
	}
	b, err := backend.Open(f.Backend)
	if err != nil {
		return err
	}
	p := trainer.Predictor{Backend: b, Variables: ctx, Spec: spec, Options: opts, Transform: tr, Top: f.Top}
	return p.Predict(images, func(pred trainer.Prediction) error {
		fmt.Fprintln(stdout, echo.Terminal(pred.Path))
		for rank, c := range pred.Classes {
			name := "class " + strconv.Itoa(c.Index)
			if names != nil {
				name = echo.Terminal(names[c.Index]) // from a file the user was given
			}
			fmt.Fprintf(stdout, "  %d  %7.3f%%  %s\n", rank+1, 100*c.P, name)
		}
		return nil
	})
}
