package graphs

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Options configure one instance of a registered net.
type Options struct {
	// NumClasses is the size of the logits; 0 means the net's default.
	NumClasses int
	// Width multiplies every hidden width (channels, units); 0 means 1.
	Width float64
	// ImageSize is the square input resolution; 0 means the net's default. Convolutional nets take
	// any size; ViT sizes its position embedding from it.
	ImageSize int
	// Precision is the compute dtype: "" or "float32", or "bfloat16" (float32 master weights, norms and
	// logits; convolutions and matmuls in bfloat16).
	Precision string
	// DropoutRate before the classifier and DropPathRate (stochastic depth, the largest rate of a linear
	// ramp over blocks) override the reference's defaults when non-nil.
	DropoutRate, DropPathRate *float64
	// Padding overrides the padding phase of strided convolutions (PadDefault: the reference's).
	Padding Padding
	// GELU overrides the GELU form (GELUDefault: the reference's).
	GELU GELUForm
	// BNEpsilon and BNDecay override the nets' BatchNorm numerics when positive.
	BNEpsilon, BNDecay float64
	// BNMicroBatches is the gradient-accumulation factor k: the running statistics then update once
	// per micro-batch at decay d^(1/k), so k updates decay them as one update at d (the book's rule).
	BNMicroBatches int
	// SyncBN applies in an SPMD program over several devices (data parallelism; on one device it
	// changes nothing): BatchNorm all-reduces its batch moments, so it normalises over the global
	// batch. Without it each replica normalises over its own shard, and the updated running
	// statistics are averaged over the replicas so that every replica keeps the same.
	SyncBN bool
	// ZeroInitLast starts the γ of each residual block's last BatchNorm at 0 (timm's zero_init_last),
	// in the nets whose Spec says they honour it.
	ZeroInitLast bool
	// FP32Head computes the classifier in float32 under bfloat16 compute (the pooled features are
	// converted before it), in the nets whose Spec says they honour it.
	FP32Head bool
	// Seed makes the initial weights a pure function of (seed, variable name).
	Seed uint64
	// Stats, when set, receives the forward multiply-accumulate count of every layer built.
	Stats *Stats
}

// Dropout returns the dropout rate: the override, or the reference's def.
func (o Options) Dropout(def float64) float64 {
	if o.DropoutRate != nil {
		return *o.DropoutRate
	}
	return def
}

// DropPath returns the stochastic-depth rate: the override, or the reference's def.
func (o Options) DropPath(def float64) float64 {
	if o.DropPathRate != nil {
		return *o.DropPathRate
	}
	return def
}

// Stats collects what a forward pass costs; layers add to it while the graph is built.
type Stats struct {
	MACs int64
}

// Add counts macs multiply-accumulates (nothing when s is nil: the graph is not being measured).
func (s *Stats) Add(macs int64) {
	if s != nil {
		s.MACs += macs
	}
}

// BuildFn builds the forward graph: images [batch, height, width, channels] in [0,1]-normalised
// float32, to logits [batch, classes]. train says whether training-only behaviour applies.
type BuildFn func(ctx *context.Context, images *Node, train bool, opts Options) *Node

// Spec is one registered net.
type Spec struct {
	Name        string
	Description string
	// InputShape is the default (height, width, channels) of one example.
	InputShape [3]int
	// NumClasses is the default number of classes.
	NumClasses int
	Build      BuildFn
	// NoWeightDecay reports whether a variable (by its scope and name) is in the no-decay group
	// (biases, norms, embeddings). Nil means: biases only.
	NoWeightDecay func(scope, name string) bool
	// FixedInputSize says the net only takes the resolution it was built for (opts.ImageSize or
	// InputShape): ViT's position embedding. Convolutional nets take any size.
	FixedInputSize bool
	// ZeroInitLast says the net honours Options.ZeroInitLast (its blocks end in a BatchNorm before the
	// residual add: the ResNets).
	ZeroInitLast bool
	// FP32Head says the net honours Options.FP32Head.
	FP32Head bool
	// Reference names the implementation the net reproduces (e.g. "torchvision resnet50") and whose
	// state_dict names TorchName produces.
	Reference string
	// TorchName, when set, maps a variable to its reference state_dict key where the default rule
	// (DefaultTorchName) does not apply; ok false means the variable has no counterpart.
	TorchName func(scope, name string) (key string, ok bool)
	// TorchShape, when set, gives the reference's shape of a variable whose layout is not one of the
	// rules weight import/export applies by name (conv and Linear weights transposed, the rest as is),
	// e.g. ConvNeXt's layer_scale [C] stored as [C, 1, 1]; nil (or a nil result) keeps the shape.
	TorchShape func(scope, name string, dims []int) []int
	// TorchBuffers, when set, gives the constant integer buffers of the reference's state_dict that have
	// no variable here (Swin's relative_position_index), by key, from the keys the net's variables map
	// to: weight export writes them and import checks and skips them, so that strict loading works both
	// ways.
	TorchBuffers func(keys []string) map[string]TorchBuffer
	// TorchLegacyKey, when set, maps a key of the reference's older checkpoints to its state_dict key
	// (torchvision's densenet files say "denselayer1.norm.1" where its modules say "denselayer1.norm1");
	// weight import applies it to every key of a file, as the reference's own loader does.
	TorchLegacyKey func(key string) string
	// Revision counts the changes to the net's layout that leave its variables' names and shapes as
	// they were but change what they mean (mnist_cnn's fc1 reading features in another order): a
	// checkpoint records it, and one of another revision is refused instead of loading and answering
	// wrong. RevisionNote says what the newest change was.
	Revision     int
	RevisionNote string
	// TorchIgnoredKey, when set, says which keys of the reference's checkpoints belong to parts the net
	// leaves out on purpose (googlenet's auxiliary heads): weight import skips them instead of refusing
	// the file.
	TorchIgnoredKey func(key string) bool
	// Eval is how an image is made into the net's input at eval time (what timm's pretrained cfg
	// says): predict applies it, and recipes that leave data.mean/std empty normalise as it does.
	Eval EvalPreprocessing
}

// EvalPreprocessing is a net's eval preprocessing, the reference's Resize(⌊size/CropPct⌋, Interpolation)
// + CenterCrop(size) + Normalize(Mean, Std) on [0,1] pixels; size is the net's input.
type EvalPreprocessing struct {
	// Mean and Std normalise each channel; their length is the net's input channels.
	Mean, Std []float64
	// CropPct is the fraction of the resized shorter side that the center crop keeps, in (0, 1].
	CropPct float64
	// Interpolation is the resize filter: "bilinear" or "bicubic".
	Interpolation string
}

// The eval preprocessing of the registered nets: torchvision's ImageNet eval (resize 256, crop 224,
// ImageNet's channel statistics) for RGB nets, and for the grey 28×28 nets MNIST's statistics with no
// crop (the images are the net's size already).
var (
	ImageNetEval = EvalPreprocessing{Mean: []float64{0.485, 0.456, 0.406}, Std: []float64{0.229, 0.224, 0.225},
		CropPct: 0.875, Interpolation: "bilinear"}
	MNISTEval = EvalPreprocessing{Mean: []float64{0.1307}, Std: []float64{0.3081}, CropPct: 1, Interpolation: "bilinear"}
)

// DefaultEval is the eval preprocessing of a net described rather than registered (a NetSpec), by its
// input channels: MNISTEval for grey input, ImageNetEval otherwise.
func DefaultEval(channels int) EvalPreprocessing {
	if channels == 1 {
		return MNISTEval
	}
	return ImageNetEval
}

// Check says what is wrong with p for a net of channels input channels, or nil.
func (p EvalPreprocessing) Check(channels int) error {
	if len(p.Mean) != channels || len(p.Std) != channels {
		return fmt.Errorf("eval preprocessing: %d means and %d stds for %d input channels", len(p.Mean), len(p.Std), channels)
	}
	for i, s := range p.Std {
		if !(s > 0) || math.IsInf(s, 0) || math.IsNaN(p.Mean[i]) || math.IsInf(p.Mean[i], 0) {
			return fmt.Errorf("eval preprocessing: mean %v, std %v: expected finite means and positive finite stds", p.Mean, p.Std)
		}
	}
	if !(p.CropPct > 0 && p.CropPct <= 1) {
		return fmt.Errorf("eval preprocessing: crop fraction %g, expected in (0, 1]", p.CropPct)
	}
	if p.Interpolation != "bilinear" && p.Interpolation != "bicubic" {
		return fmt.Errorf("eval preprocessing: interpolation %q, expected bilinear or bicubic", p.Interpolation)
	}
	return nil
}

// CheckRevision refuses a checkpoint (at path, of net revision rev) written for another revision of
// the net: its tensors would load without a complaint and compute something else.
func (s Spec) CheckRevision(path string, rev int) error {
	if rev == s.Revision {
		return nil
	}
	return fmt.Errorf("checkpoint %s was written for revision %d of net %s, this trainer builds revision %d (%s): "+
		"its weights would load and answer wrong; train it again, or re-import it from the state_dict it came from",
		path, rev, s.Name, s.Revision, s.RevisionNote)
}

// TorchBuffer is one constant int64 buffer of a reference state_dict.
type TorchBuffer struct {
	Shape  []int
	Values []int64
}

// StateDictKey maps a variable of the model scope to the reference's state_dict key.
func (s Spec) StateDictKey(scope, name string) (string, bool) {
	if s.TorchName != nil {
		return s.TorchName(scope, name)
	}
	return DefaultTorchName(scope, name)
}

// DefaultTorchName joins the variable's scope below the model scope with dots:
// ("/model/layer1/0/conv1", "weight") -> "layer1.0.conv1.weight". Nets name their scopes after the
// reference's module paths so that this is the whole mapping.
func DefaultTorchName(scope, name string) (string, bool) {
	parts := strings.Split(strings.Trim(scope, "/"), "/")
	if len(parts) == 0 || parts[0] != ModelScope {
		return "", false
	}
	return strings.Join(append(parts[1:], name), "."), true
}

// ModelScope is the top scope under which the trainer builds nets.
const ModelScope = "model"

// ExcludedFromWeightDecay applies the spec's no-decay rule, defaulting to "biases".
func (s Spec) ExcludedFromWeightDecay(scope, name string) bool {
	if s.NoWeightDecay != nil {
		return s.NoWeightDecay(scope, name)
	}
	return name == "bias"
}

var registry = map[string]Spec{}

// Register adds a net; it panics on a duplicate name, which is a programming error.
func Register(spec Spec) {
	if _, dup := registry[spec.Name]; dup {
		panic(fmt.Sprintf("graphs: net %q registered twice", spec.Name))
	}
	registry[spec.Name] = spec
}

// Get returns the named net, or an error listing the registered names.
func Get(name string) (Spec, error) {
	spec, ok := registry[name]
	if !ok {
		return Spec{}, fmt.Errorf("unknown net %q; registered nets: %s", name, strings.Join(Names(), ", "))
	}
	return spec, nil
}

// Names lists the registered nets in alphabetical order.
func Names() []string {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Summary is what `trainer nets` shows of one net.
type Summary struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	InputShape  [3]int `json:"input_shape"`
	NumClasses  int    `json:"num_classes"`
	Parameters  int    `json:"parameters"`
	// Buffers counts the non-trainable state (BatchNorm running statistics).
	Buffers int `json:"buffers"`
	// ForwardFLOPs counts one example's forward pass, two FLOPs per multiply-accumulate.
	ForwardFLOPs int64 `json:"forward_flops"`
}

// Summarize builds the net's graph once (nothing runs) to count its parameters and forward FLOPs.
func Summarize(backend backends.Backend, spec Spec, opts Options) (sum Summary, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("building net %q: %v", spec.Name, r)
		}
	}()
	var stats Stats
	opts.Stats = &stats
	ctx := context.New()
	g := NewGraph(backend, "summary_"+spec.Name)
	defer g.Finalize()
	h, w, c := spec.InputShape[0], spec.InputShape[1], spec.InputShape[2]
	if opts.ImageSize > 0 {
		h, w = opts.ImageSize, opts.ImageSize
	}
	images := Parameter(g, "images", shapes.Make(opts.ParamDType(), 1, h, w, c))
	spec.Build(ctx, images, false, opts)
	// Parameters are the trainable variables, as PyTorch counts them; BatchNorm running statistics
	// (and the RNG state) are buffers.
	var params, buffers int
	ctx.EnumerateVariables(func(v *context.Variable) {
		if v.Trainable {
			params += v.Shape().Size()
		} else {
			buffers += v.Shape().Size()
		}
	})
	classes := opts.NumClasses
	if classes == 0 {
		classes = spec.NumClasses
	}
	return Summary{
		Name: spec.Name, Description: spec.Description, InputShape: [3]int{h, w, c}, NumClasses: classes,
		Parameters: params, Buffers: buffers, ForwardFLOPs: 2 * stats.MACs,
	}, nil
}
