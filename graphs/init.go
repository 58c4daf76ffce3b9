package graphs

import (
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Init draws one element of a new parameter. fanIn and fanOut are PyTorch's: for a conv kernel
// [kh, kw, in/groups, out], fanIn = kh·kw·in/groups and fanOut = kh·kw·out/groups.
type Init func(rng *rand.Rand, fanIn, fanOut int) float64

// InitTorchDefault is nn.Linear's and nn.Conv2d's default for weights and biases:
// kaiming_uniform(a=√5), which is U(−1/√fanIn, 1/√fanIn).
func InitTorchDefault(rng *rand.Rand, fanIn, _ int) float64 {
	bound := 1 / math.Sqrt(float64(fanIn))
	return (2*rng.Float64() - 1) * bound
}

// InitKaimingNormalFanOut is kaiming_normal(mode="fan_out", nonlinearity="relu"): N(0, 2/fanOut),
// what torchvision's ResNet, MobileNetV2 and EfficientNet use for convolutions.
func InitKaimingNormalFanOut(rng *rand.Rand, _, fanOut int) float64 {
	return rng.NormFloat64() * math.Sqrt(2/float64(fanOut))
}

// InitKaimingNormalFanIn is kaiming_normal() with its defaults (mode="fan_in", nonlinearity
// "leaky_relu" at slope 0, i.e. ReLU's gain): N(0, 2/fanIn), torchvision DenseNet's convolutions.
func InitKaimingNormalFanIn(rng *rand.Rand, fanIn, _ int) float64 {
	return rng.NormFloat64() * math.Sqrt(2/float64(fanIn))
}

// InitNormal returns N(0, std²).
func InitNormal(std float64) Init {
	return func(rng *rand.Rand, _, _ int) float64 { return rng.NormFloat64() * std }
}

// InitTruncNormal returns N(0, std²) truncated to [−2, 2] absolute (timm's trunc_normal_ defaults,
// which for std 0.02 never truncates in practice but is what the reference calls).
func InitTruncNormal(std float64) Init {
	return func(rng *rand.Rand, _, _ int) float64 {
		for {
			v := rng.NormFloat64() * std
			if v >= -2 && v <= 2 {
				return v
			}
		}
	}
}

// InitUniform returns U(−bound, bound).
func InitUniform(bound float64) Init {
	return func(rng *rand.Rand, _, _ int) float64 { return (2*rng.Float64() - 1) * bound }
}

// InitConst fills with c (zeros, ones, a layer-scale value).
func InitConst(c float64) Init {
	return func(*rand.Rand, int, int) float64 { return c }
}

// InitXavierUniform is U(±√(6/(fanIn+fanOut))), torchvision ViT's and timm's choice for Linear layers.
func InitXavierUniform(rng *rand.Rand, fanIn, fanOut int) float64 {
	bound := math.Sqrt(6 / float64(fanIn+fanOut))
	return (2*rng.Float64() - 1) * bound
}

// hostInitializer fills a variable on the host from a generator seeded by (seed, scope/name): the same
// seed gives the same weights on every backend, at any build order, and a resumed run rebuilds nothing.
func hostInitializer(seed uint64, scope, name string, init Init, fanIn, fanOut int) context.VariableInitializer {
	return func(g *Graph, shape shapes.Shape) *Node {
		h := fnv.New64a()
		_, _ = h.Write([]byte(scope + "/" + name))
		rng := rand.New(rand.NewPCG(seed, h.Sum64()))
		values := make([]float32, shape.Size())
		for i := range values {
			values[i] = float32(init(rng, fanIn, fanOut))
		}
		return ConvertDType(Const(g, tensors.FromFlatDataAndDimensions(values, shape.Dimensions...)), shape.DType)
	}
}

// Param creates (or reuses) the variable (float32, or float64 under Precision "float64") ctx.Scope()/name with the given shape, initialised on
// the host by init, and returns its value in g. Parameters are named after the reference's state_dict
// (weight, bias, running_mean, ...): see TorchName.
func Param(ctx *context.Context, g *Graph, opts Options, name string, init Init, fanIn, fanOut int, dims ...int) *Node {
	v := ctx.WithInitializer(hostInitializer(opts.Seed, ctx.Scope(), name, init, fanIn, fanOut)).
		VariableWithShape(name, shapes.Make(opts.ParamDType(), dims...))
	return v.ValueGraph(g)
}

// ParamDType is the dtype of the master weights: float64 when Precision is "float64" (the
// verification checks), float32 otherwise (bfloat16 compute keeps float32 masters).
func (o Options) ParamDType() dtypes.DType {
	if o.Precision == "float64" {
		return dtypes.Float64
	}
	return dtypes.Float32
}

// ComputeDType is the dtype activations are computed in.
func (o Options) ComputeDType() dtypes.DType {
	switch o.Precision {
	case "bfloat16":
		return dtypes.BFloat16
	case "float64":
		return dtypes.Float64
	}
	return dtypes.Float32
}

// ToCompute converts the net's input to the compute dtype; FromCompute converts logits back to the
// master dtype. Nets call them first and last.
func ToCompute(x *Node, opts Options) *Node {
	if x.DType() == opts.ComputeDType() {
		return x
	}
	return ConvertDType(x, opts.ComputeDType())
}

// FromCompute converts logits to the master dtype (float32, or float64 in verification).
func FromCompute(x *Node, opts Options) *Node {
	if x.DType() == opts.ParamDType() {
		return x
	}
	return ConvertDType(x, opts.ParamDType())
}

// HalfPrecision reports whether norms must upcast x to float32 for their statistics.
func HalfPrecision(x *Node) bool {
	return x.DType() == dtypes.BFloat16 || x.DType() == dtypes.Float16
}

// AsDType converts a (float32) parameter to the compute dtype of x, for bfloat16 compute with float32
// master weights.
func AsDType(w *Node, like *Node) *Node {
	if w.DType() == like.DType() {
		return w
	}
	return ConvertDType(w, like.DType())
}
