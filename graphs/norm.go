package graphs

import (
	"math"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// BNConfig is a BatchNorm's numerics.
type BNConfig struct {
	// Epsilon inside the root (PyTorch 1e-5; the TF-origin mobile nets 1e-3).
	Epsilon float64
	// Decay is the running statistics' decay d: running' = d·running + (1−d)·batch. PyTorch's
	// momentum 0.1 is d = 0.9; TF/Keras' momentum 0.99 is d = 0.99.
	Decay float64
	// BiasedVariance keeps the batch's biased variance in running_var (Keras); PyTorch stores the
	// unbiased one (×m/(m−1)).
	BiasedVariance bool
	// ZeroGamma starts γ at 0 instead of 1: a residual branch ending in this BatchNorm then starts as
	// nothing, and its block as its shortcut (timm's zero_init_last, torchvision's zero_init_residual).
	ZeroGamma bool
}

// TorchBN is PyTorch's nn.BatchNorm2d default (eps 1e-5, momentum 0.1).
var TorchBN = BNConfig{Epsilon: 1e-5, Decay: 0.9}

// resolve applies the per-run overrides of Options.
func (c BNConfig) resolve(opts Options) BNConfig {
	if opts.BNEpsilon > 0 {
		c.Epsilon = opts.BNEpsilon
	}
	if opts.BNDecay > 0 {
		c.Decay = opts.BNDecay
	}
	if k := opts.BNMicroBatches; k > 1 {
		c.Decay = math.Pow(c.Decay, 1/float64(k))
	}
	return c
}

// BatchNorm normalises NHWC (or [batch, features]) activations per channel (the last axis). In training
// it uses the batch's statistics over every other axis (m = N·H·W values per channel) and updates the
// running statistics; in eval it uses the running ones. Variables: weight (γ), bias (β), running_mean,
// running_var.
//
// The batch statistics are ordinary graph values, so the gradient flows through them (the coupled
// BatchNorm backward); GoMLX v0.26's batchnorm layer puts them behind StopGradient, which is wrong.
// In a data-parallel SPMD program opts.SyncBN says whether the statistics are the global batch's.
func BatchNorm(ctx *context.Context, x *Node, train bool, c BNConfig, opts Options) *Node {
	c = c.resolve(opts)
	g := x.Graph()
	ch := x.Shape().Dimensions[x.Rank()-1]
	gammaInit := InitConst(1)
	if c.ZeroGamma {
		gammaInit = InitConst(0)
	}
	gamma := Param(ctx, g, opts, "weight", gammaInit, 0, 0, ch)
	beta := Param(ctx, g, opts, "bias", InitConst(0), 0, 0, ch)
	meanVar := ctx.WithInitializer(hostInitializer(0, "", "", InitConst(0), 0, 0)).
		VariableWithShape("running_mean", gamma.Shape()).SetTrainable(false)
	varVar := ctx.WithInitializer(hostInitializer(0, "", "", InitConst(1), 0, 0)).
		VariableWithShape("running_var", gamma.Shape()).SetTrainable(false)

	// Statistics and normalisation in the master dtype even under bfloat16 compute.
	dtype := x.DType()
	xf := x
	if HalfPrecision(x) {
		xf = ConvertDType(x, gamma.DType())
	}
	axes := make([]int, x.Rank()-1)
	for i := range axes {
		axes[i] = i
	}
	var mean, variance, centered *Node // mean and variance: [C]
	if train {
		m := float64(x.Shape().Size() / ch)
		replicas := spmdReplicas(g)
		if replicas > 1 && opts.SyncBN {
			// The moments of the global batch: each replica's sums, all-reduced, over the global count.
			// The gradient flows through the all-reduces (allReduceVJP).
			m *= float64(replicas)
			mean = DivScalar(allReduceSum(ReduceSum(xf, axes...)), m)
			centered = Sub(xf, AsChannels(mean, x.Rank()))
			variance = DivScalar(allReduceSum(ReduceSum(Square(centered), axes...)), m)
		} else {
			mean = ReduceMean(xf, axes...)
			centered = Sub(xf, AsChannels(mean, x.Rank()))
			variance = ReduceMean(Square(centered), axes...)
		}
		stored := variance
		if !c.BiasedVariance && m > 1 {
			stored = MulScalar(variance, m/(m-1))
		}
		d := c.Decay
		running := Add(MulScalar(StopGradient(meanVar.ValueGraph(g)), d), MulScalar(StopGradient(mean), 1-d))
		runningVar := Add(MulScalar(StopGradient(varVar.ValueGraph(g)), d), MulScalar(StopGradient(stored), 1-d))
		if replicas > 1 && !opts.SyncBN {
			// Shard statistics differ by replica: keep their mean, the same on every replica.
			running = DivScalar(allReduceSum(running), float64(replicas))
			runningVar = DivScalar(allReduceSum(runningVar), float64(replicas))
		}
		meanVar.SetValueGraph(running)
		varVar.SetValueGraph(runningVar)
	} else {
		mean = meanVar.ValueGraph(g)
		variance = varVar.ValueGraph(g)
		centered = Sub(xf, AsChannels(mean, x.Rank()))
	}
	scale := Mul(Rsqrt(AddScalar(variance, c.Epsilon)), gamma)
	y := Add(Mul(centered, AsChannels(scale, x.Rank())), AsChannels(beta, x.Rank()))
	if y.DType() != dtype {
		y = ConvertDType(y, dtype)
	}
	return y
}

// spmdReplicas is the number of devices of g when it is an SPMD program (each device runs it on its
// shard of the batch), else 1.
func spmdReplicas(g *Graph) int {
	if g.DistributedStrategy() != distributed.SPMD {
		return 1
	}
	return g.NumDevices()
}

// allReduceSum sums x over every device of an SPMD program.
func allReduceSum(x *Node) *Node {
	return x.Graph().Distributed().AllReduceOne(x, backends.ReduceOpSum)
}

// LayerNorm normalises over the last axis (ViT's tokens; ConvNeXt's channels, which in NHWC are the
// last axis too, so its "channels-first" LayerNorm2d is this same op). Variables: weight, bias.
func LayerNorm(ctx *context.Context, x *Node, epsilon float64, opts Options) *Node {
	g := x.Graph()
	ch := x.Shape().Dimensions[x.Rank()-1]
	gamma := Param(ctx, g, opts, "weight", InitConst(1), 0, 0, ch)
	beta := Param(ctx, g, opts, "bias", InitConst(0), 0, 0, ch)
	dtype := x.DType()
	xf := x
	if HalfPrecision(x) {
		xf = ConvertDType(x, gamma.DType())
	}
	last := x.Rank() - 1
	mean := ReduceAndKeep(xf, ReduceMean, last)
	centered := Sub(xf, mean)
	variance := ReduceAndKeep(Square(centered), ReduceMean, last)
	y := Add(Mul(Mul(centered, Rsqrt(AddScalar(variance, epsilon))), AsChannels(gamma, x.Rank())), AsChannels(beta, x.Rank()))
	if y.DType() != dtype {
		y = ConvertDType(y, dtype)
	}
	return y
}

// AsChannels reshapes a per-channel vector [C] to [1, ..., 1, C] so it broadcasts over a rank-r tensor.
func AsChannels(v *Node, rank int) *Node {
	dims := make([]int, rank)
	for i := range dims {
		dims[i] = 1
	}
	dims[rank-1] = v.Shape().Dimensions[0]
	return Reshape(v, dims...)
}
