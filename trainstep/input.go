package trainstep

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/recipe"
)

// NormalizeInput is the net's input for a batch as the loader hands it over: float32 images are
// already normalised; uint8 pixels (data.device_normalize) are normalised here first, with the
// loader's own table for d's mean and std.
func NormalizeInput(d config.DataConfig, images *Node) *Node {
	if images.DType() != dtypes.Uint8 {
		return images
	}
	mean, std := recipe.Normalisation(d)
	table, err := data.NormalizeTable(mean, std, images.Shape().Dimensions[images.Rank()-1])
	if err != nil {
		panic(fmt.Errorf("data.mean, data.std: %w", err))
	}
	return NormalizePixels(images, table)
}

// NormalizePixels maps uint8 pixels x [..., c] to table[x*c + channel] in float32: the loader's
// own normalisation table (data.NormalizeTable), looked up rather than recomputed so the floats
// are the host's bit for bit on every backend (XLA may rewrite a division by a constant as a
// multiplication by its reciprocal, which rounds differently).
func NormalizePixels(x *Node, table []float32) *Node {
	g := x.Graph()
	dims := x.Shape().Dimensions
	c := dims[len(dims)-1]
	if len(table) != 256*c {
		panic(fmt.Sprintf("NormalizePixels: a table of %d values for %d channels, want %d", len(table), c, 256*c))
	}
	idx := ConvertDType(x, dtypes.Int32)
	if c > 1 {
		idx = Add(MulScalar(idx, float64(c)), Iota(g, shapes.Make(dtypes.Int32, dims...), len(dims)-1))
	}
	// Flat indices [n, 1]: GoMLX v0.26's shape inference checks Gather's index axis against the
	// operand's rank, so a [b, h, w, c, 1] index into the rank-1 table is refused.
	n := x.Shape().Size()
	return Reshape(Gather(Const(g, table), Reshape(idx, n, 1)), dims...)
}

// Batch is the form of a training batch of cfg as the loader hands it to the step: images
// [n, h, w, c] in float32, or uint8 pixels under data.device_normalize; integer labels [n], or soft
// targets [n, classes] when the loader mixes (mixup, cutmix).
type Batch struct {
	Height, Width, Channels int
	Classes                 int
	Pixels                  dtypes.DType
	SoftTargets             bool
}

// BatchOf returns the training batch's form for cfg and its net.
func BatchOf(cfg config.Config, net Net) Batch {
	shape := net.Spec.InputShape
	if size := cfg.Net.ImageSize; size > 0 {
		shape[0], shape[1] = size, size
	}
	b := Batch{Height: shape[0], Width: shape[1], Channels: shape[2], Classes: cfg.Net.NumClasses,
		Pixels: dtypes.Float32, SoftTargets: cfg.Data.Augment.Mixing()}
	if b.Classes == 0 {
		b.Classes = net.Spec.NumClasses
	}
	if recipe.NormalizeOnDevice(cfg, true) {
		b.Pixels = dtypes.Uint8 // the batch crosses as uint8 and the step normalises it
	}
	return b
}

// Images is the shape of n images.
func (b Batch) Images(n int) shapes.Shape {
	return shapes.Make(b.Pixels, n, b.Height, b.Width, b.Channels)
}

// Labels is the shape of n labels or soft targets.
func (b Batch) Labels(n int) shapes.Shape {
	if b.SoftTargets {
		return shapes.Make(dtypes.Float32, n, b.Classes)
	}
	return shapes.Make(dtypes.Int32, n)
}
