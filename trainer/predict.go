package trainer

import (
	"fmt"
	"math"
	"sort"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/weights"
)

// Predict's pipeline, beside the evaluator: each image file through the net's eval preprocessing (its
// registry entry's, as timm's pretrained cfg), the eval forward in fixed-size chunks, and the most
// probable classes.

// PredictOverrides replace parts of the net's eval preprocessing; zero values keep the net's.
type PredictOverrides struct {
	CropPct   float64
	Mean, Std []float64
}

// PredictTransform is the eval transform predict applies for spec shaped by opts: the net's eval
// preprocessing (spec.Eval) at its input size, with what o sets in its place; maxPixels refuses
// larger images from their headers (0: data.DefaultMaxImagePixels).
func PredictTransform(spec graphs.Spec, opts graphs.Options, o PredictOverrides, maxPixels int64) (data.EvalTransform, error) {
	in := weights.InputShape(spec, opts)
	size, channels := in[1], in[3]
	if err := spec.Eval.Check(channels); err != nil {
		return data.EvalTransform{}, fmt.Errorf("net %s: %w", spec.Name, err)
	}
	interp, err := data.ParseInterp(spec.Eval.Interpolation)
	if err != nil {
		return data.EvalTransform{}, fmt.Errorf("net %s: eval preprocessing: %w", spec.Name, err)
	}
	tr := data.EvalTransform{Size: size, CropPct: spec.Eval.CropPct, Mean: spec.Eval.Mean, Std: spec.Eval.Std,
		Interp: interp, MaxPixels: maxPixels}
	if o.CropPct != 0 {
		tr.CropPct = o.CropPct
	}
	if o.Mean != nil {
		tr.Mean = o.Mean
	}
	if o.Std != nil {
		tr.Std = o.Std
	}
	if len(tr.Mean) != channels || len(tr.Std) != channels {
		return tr, fmt.Errorf("mean/std: %d and %d values for a net with %d input channels", len(tr.Mean), len(tr.Std), channels)
	}
	return tr, nil
}

// Predictor classifies image files with a net's variables.
type Predictor struct {
	Backend backends.Backend
	// Variables hold the net's weights under the model scope.
	Variables *context.Context
	Spec      graphs.Spec
	Options   graphs.Options
	// Transform makes each image the net's input (PredictTransform).
	Transform data.EvalTransform
	// Top is how many classes each Prediction keeps.
	Top int
}

// Prediction is one image's most probable classes, most probable first.
type Prediction struct {
	Path    string
	Classes []ClassProb
}

// ClassProb is a class index and its softmax probability.
type ClassProb struct {
	Index int
	P     float64
}

// predictBatch is how many images one forward takes: one compiled shape for every chunk but the last.
const predictBatch = 16

// Predict classifies images in order, calling emit with each one's prediction as its chunk is done; it
// stops at the first image that fails to load and at emit's first error.
func (p Predictor) Predict(images []string, emit func(Prediction) error) error {
	ev, err := weights.NewEvaluator(p.Backend, p.Variables, p.Spec, p.Options, true)
	if err != nil {
		return err
	}
	defer ev.Finalize()
	size, channels := p.Transform.Size, len(p.Transform.Mean)
	for start := 0; start < len(images); start += predictBatch {
		chunk := images[start:min(start+predictBatch, len(images))]
		var pixels []float32
		for _, path := range chunk {
			x, err := p.Transform.LoadFile(path)
			if err != nil {
				return err
			}
			pixels = append(pixels, x...)
		}
		rows, err := ev.Logits(pixels, len(chunk), size, size, channels)
		if err != nil {
			return err
		}
		for i, path := range chunk {
			if err := emit(Prediction{Path: path, Classes: TopK(Probabilities(rows[i]), p.Top)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Probabilities is the softmax of a row of logits.
func Probabilities(logits []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, v)
	}
	out := make([]float64, len(logits))
	var sum float64
	for i, v := range logits {
		out[i] = math.Exp(v - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// TopK returns the k most probable classes, most probable first (ties: lower index first).
func TopK(p []float64, k int) []ClassProb {
	all := make([]ClassProb, len(p))
	for i, v := range p {
		all[i] = ClassProb{i, v}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].P > all[j].P })
	return all[:min(max(k, 0), len(all))]
}
