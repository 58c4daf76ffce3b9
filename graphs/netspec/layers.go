package netspec

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// The primitives: each builds with the graphs layer of the same name, initialised as the registered
// nets initialise it, and counts parameters and MACs as graphs.Stats does.

func gelu(x *Node, form string) *Node {
	if form == "tanh" {
		return graphs.GELU(x, graphs.GELUTanh)
	}
	return graphs.GELU(x, graphs.GELUErf)
}

var paddings = []string{"symmetric", "same", "valid"}

func parsePadding(s string) graphs.Padding {
	p, err := graphs.ParsePadding(s)
	if err != nil {
		panic(err) // validated at load
	}
	return p
}

// convShape checks a k×k convolution at stride s (dilation d, padding mode) over image in with groups
// and returns the output's height and width.
func convShape(in []int, k, s, d int, padding string, kernelField string) (int, int, error) {
	eff := (k-1)*d + 1
	var hw [2]int
	for i := range 2 {
		pads := graphs.PadsFor(parsePadding(padding), in[i], k, s, d)
		n, err := window(kernelField, in[i], eff, s, pads[0], pads[1], fmt.Sprintf("padding %s, dilation %d", padding, d))
		if err != nil {
			return 0, 0, err
		}
		hw[i] = n
	}
	return hw[0], hw[1], nil
}

func registerConvKinds() {
	Register(Kind{
		Name: "conv", Doc: "2-D convolution (nn.Conv2d; PyTorch's default init)",
		Args: []Arg{
			WidthArg("filters", "output channels"),
			KernelArg("kernel", true, 0, "square kernel size"),
			KernelArg("stride", false, 1, "stride"),
			KernelArg("dilation", false, 1, "dilation"),
			{Name: "padding", Type: TypeChoice, Default: "symmetric", Choices: paddings, Doc: "`symmetric` (PyTorch: dilation·(kernel−1)/2 each side), `same` (XLA/TF SAME) or `valid` (none)"},
			{Name: "groups", Type: TypeInt, Default: 1, Min: 1, Max: MaxDim, Doc: "channel groups; equal to the input channels and filters for a depthwise conv"},
			{Name: "bias", Type: TypeBool, Default: true, Doc: "add a bias vector (false before a batchnorm)"},
		},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := NeedImage(in); err != nil {
				return nil, err
			}
			f, k, g := l.Int("filters"), l.Int("kernel"), l.Int("groups")
			if in[2]%g != 0 {
				return nil, ArgError("groups", "%d does not divide the %d input channels", g, in[2])
			}
			if f%g != 0 {
				return nil, ArgError("groups", "%d does not divide the %d filters", g, f)
			}
			h, w, err := convShape(in, k, l.Int("stride"), l.Int("dilation"), l.Str("padding"), "kernel")
			if err != nil {
				return nil, err
			}
			fanIn := k * k * in[2] / g
			l.Params = Product(fanIn, f)
			if l.Bool("bias") {
				l.Params += int64(f)
			}
			l.MACs = Product(h, w, f, fanIn)
			return []int{h, w, f}, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.Conv(ctx, x, graphs.ConvConfig{
				Filters: l.Int("filters"), Kernel: l.Int("kernel"), Stride: l.Int("stride"), Dilation: l.Int("dilation"),
				Groups: l.Int("groups"), Padding: parsePadding(l.Str("padding")), Bias: l.Bool("bias"),
			}, b.Opts)
		},
	})
	Register(Kind{
		Name: "batchnorm", Doc: "BatchNorm over the last axis (nn.BatchNorm2d/1d: γ 1, β 0; net.bn_eps and net.bn_decay override it)",
		Args: []Arg{epsArg(1e-5),
			{Name: "decay", Type: TypeFloat, Default: 0.9, Min: 0, Max: 1, Open: true, Doc: "running statistics' decay d (PyTorch's momentum 0.1 is 0.9)"}},
		Norms: []string{""},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			l.Params = 2 * int64(in[len(in)-1])
			return in, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.BatchNorm(ctx, x, b.Train, graphs.BNConfig{Epsilon: l.Float("eps"), Decay: l.Float("decay")}, b.Opts)
		},
	})
	Register(Kind{
		Name: "layernorm", Doc: "LayerNorm over the last axis (channels of an image, dim of tokens; γ 1, β 0)",
		Args:  []Arg{epsArg(1e-5)},
		Norms: []string{""},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			l.Params = 2 * int64(in[len(in)-1])
			return in, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.LayerNorm(ctx, x, l.Float("eps"), b.Opts)
		},
	})
	Register(Kind{
		Name: "maxpool", Doc: "max over kernel×kernel windows (nn.MaxPool2d; padded cells never win)",
		Args: []Arg{KernelArg("kernel", true, 0, "window size"), {Name: "stride", Type: TypeInt, Default: 0, Min: 1, Max: MaxKernel, DefaultDoc: "the kernel", Doc: "stride"},
			{Name: "padding", Type: TypeInt, Default: 0, Min: 0, Max: MaxKernel, Doc: "cells of padding on every side"}},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			return poolShape(l, in, l.Int("padding"))
		},
		Build: func(_ *Builder, _ *context.Context, l *Layer, x *Node) *Node {
			return graphs.MaxPool2D(x, l.Int("kernel"), poolStride(l), l.Int("padding"))
		},
	})
	Register(Kind{
		Name: "avgpool", Doc: "mean over kernel×kernel windows, no padding (nn.AvgPool2d)",
		Args: []Arg{KernelArg("kernel", true, 0, "window size"), {Name: "stride", Type: TypeInt, Default: 0, Min: 1, Max: MaxKernel, DefaultDoc: "the kernel", Doc: "stride"}},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			return poolShape(l, in, 0)
		},
		Build: func(_ *Builder, _ *context.Context, l *Layer, x *Node) *Node {
			return graphs.AvgPool2D(x, l.Int("kernel"), poolStride(l))
		},
	})
	Register(Kind{
		Name: "globalavgpool", Doc: "mean over height and width: [H, W, C] -> [C]",
		Infer: func(_ *Checker, _ *Layer, in []int) ([]int, error) {
			if err := NeedImage(in); err != nil {
				return nil, err
			}
			return []int{in[2]}, nil
		},
		Build: func(_ *Builder, _ *context.Context, _ *Layer, x *Node) *Node { return graphs.GlobalAvgPool(x) },
	})
	Register(Kind{
		Name: "flatten", Doc: "[H, W, C] (or [T, D]) -> [H·W·C]; fixes the input size (what follows is sized by it)",
		Args: []Arg{{Name: "order", Type: TypeChoice, Default: "hwc", Choices: []string{"hwc", "chw"},
			Doc: "`hwc` (NHWC memory order) or `chw` (channel-major, as PyTorch flattens NCHW)"}},
		Infer: func(p *Checker, l *Layer, in []int) ([]int, error) {
			if len(in) < 2 {
				return nil, fmt.Errorf("expected an image or tokens, got %s: already flat", shapeString(in))
			}
			if l.Str("order") == "chw" && len(in) != 3 {
				return nil, ArgError("order", "chw needs an image input, got %s", shapeString(in))
			}
			p.FixInputSize()
			return []int{int(Elements(in))}, nil
		},
		Build: func(_ *Builder, _ *context.Context, l *Layer, x *Node) *Node {
			if l.Str("order") == "chw" {
				x = TransposeAllAxes(x, 0, 3, 1, 2)
			}
			return graphs.Flatten(x)
		},
	})
}

func poolStride(l *Layer) int {
	if s := l.Int("stride"); s > 0 {
		return s
	}
	return l.Int("kernel")
}

func poolShape(l *Layer, in []int, pad int) ([]int, error) {
	if err := NeedImage(in); err != nil {
		return nil, err
	}
	k, s := l.Int("kernel"), poolStride(l)
	if pad > k/2 {
		return nil, ArgError("padding", "%d is more than half the %d-wide window; expected at most %d", pad, k, k/2)
	}
	h, err := window("kernel", in[0], k, s, pad, pad, "pool")
	if err != nil {
		return nil, err
	}
	w, err := window("kernel", in[1], k, s, pad, pad, "pool")
	if err != nil {
		return nil, err
	}
	return []int{h, w, in[2]}, nil
}

func registerDenseKinds() {
	Register(Kind{
		Name: "dense", Doc: "fully connected over the last axis (nn.Linear; PyTorch's default init)",
		Args: []Arg{
			{Name: "units", Type: TypeUnits, Required: true, Min: 1, Max: MaxDim, Doc: "output width, or `classes` for the logits"},
			{Name: "bias", Type: TypeBool, Default: true, Doc: "add a bias vector"},
		},
		Infer: func(p *Checker, l *Layer, in []int) ([]int, error) {
			if len(in) == 3 {
				return nil, fmt.Errorf("expected a vector or tokens, got the image %s: add globalavgpool or flatten before it", shapeString(in))
			}
			units, width := p.Units(l.Int("units")), in[len(in)-1]
			l.Params = Product(width, units)
			if l.Bool("bias") {
				l.Params += int64(units)
			}
			l.MACs = Product(append(in[:len(in)-1:len(in)-1], width, units)...)
			return append(in[:len(in)-1:len(in)-1], units), nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.Linear(ctx, x, graphs.LinearConfig{Units: b.Units(l.Int("units")), NoBias: !l.Bool("bias")}, b.Opts)
		},
	})
	Register(Kind{
		Name: "dropout", Doc: "zeroes each element with probability rate in training (nn.Dropout)",
		Args:  []Arg{{Name: "rate", Type: TypeFloat, Required: true, Min: 0, Max: 1, Open: true, Doc: "drop probability"}},
		Infer: func(_ *Checker, _ *Layer, in []int) ([]int, error) { return in, nil },
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.Dropout(ctx, x, l.Float("rate"), b.Train)
		},
	})
}
