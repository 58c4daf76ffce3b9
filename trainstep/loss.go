package trainstep

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.

	"github.com/trainer/trainer/config"
)

// Loss is the configured loss of logits [batch, classes] against integer labels [batch], or
// against soft targets [batch, classes] (mixup/cutmix, smoothing already folded in by the loader):
// SoftCrossEntropy, or BCE on the soft targets binarised at the threshold as timm does.
func Loss(l config.LossConfig, logits, labels *Node) *Node {
	soft := labels.Rank() == 2
	if l.Name != "bce" {
		if soft {
			return SoftCrossEntropy(logits, labels)
		}
		return SoftmaxCrossEntropy(logits, labels, l.LabelSmoothing)
	}
	classes := logits.Shape().Dimensions[logits.Rank()-1]
	var targets *Node
	if soft {
		targets = ConvertDType(labels, logits.DType())
		if l.BCETargetThreshold > 0 {
			targets = ConvertDType(GreaterThan(targets, Scalar(labels.Graph(), targets.DType(), l.BCETargetThreshold)), targets.DType())
		}
	} else {
		targets = BCETargets(labels, classes, l.LabelSmoothing, l.BCETargetThreshold, logits.DType())
	}
	loss := BCEWithLogits(logits, targets)
	if l.BCEDivisor == "batch" {
		loss = MulScalar(loss, float64(classes)) // BCEWithLogits divides by batch × classes
	}
	return loss
}

// BCETargets are timm's BinaryCrossEntropy targets for integer labels: off = ε/K everywhere and
// on = 1 − ε + ε/K at the label; with threshold > 0 they are binarised as target > threshold.
func BCETargets(labels *Node, classes int, smoothing, threshold float64, dtype dtypes.DType) *Node {
	off := smoothing / float64(classes)
	onehot := OneHot(labels, classes, dtype)
	targets := AddScalar(MulScalar(onehot, 1-smoothing), off)
	if threshold > 0 {
		targets = ConvertDType(GreaterThan(targets, Scalar(labels.Graph(), dtype, threshold)), dtype)
	}
	return targets
}

// SoftmaxCrossEntropy is the batch mean of the label-smoothed cross-entropy of logits [batch, classes]
// against integer labels [batch]: (1−ε)·(−log p[label]) + ε·mean over classes of (−log p), which is
// PyTorch's cross_entropy(label_smoothing=ε) and timm's LabelSmoothingCrossEntropy. ε = 0 is the plain
// cross-entropy.
func SoftmaxCrossEntropy(logits, labels *Node, smoothing float64) *Node {
	logp := LogSoftmax(logits, -1)
	classes := logits.Shape().Dimensions[logits.Rank()-1]
	onehot := OneHot(labels, classes, logp.DType())
	nll := Neg(ReduceSum(Mul(onehot, logp), -1))
	if smoothing == 0 {
		return ReduceAllMean(nll)
	}
	uniform := Neg(ReduceMean(logp, -1))
	return ReduceAllMean(Add(MulScalar(nll, 1-smoothing), MulScalar(uniform, smoothing)))
}

// SoftCrossEntropy is the batch mean of −Σ_c t[c]·log p[c] for soft targets t [batch, classes]
// (mixup and cutmix mix one-hot rows; smoothing is applied to the targets before mixing).
func SoftCrossEntropy(logits, targets *Node) *Node {
	logp := LogSoftmax(logits, -1)
	return Neg(ReduceAllMean(ReduceSum(Mul(ConvertDType(targets, logp.DType()), logp), -1)))
}

// BCEWithLogits is the mean over every element of the binary cross-entropy of sigmoid(logits) against
// targets in [0, 1] (timm's BinaryCrossEntropy on one-hot or mixed targets, as in the RSB recipes):
// softplus(x) − x·t, with softplus(x) = max(x, 0) + log(1 + e^−|x|).
//
// Both pieces are written with Where on x > 0 rather than Abs and Max, whose gradients at 0 are not
// softplus'(0) = 1/2: this way d/dx = [x>0] + σ(−|x|)·(x>0 ? −1 : 1), which is σ(x) everywhere, 0 included.
func BCEWithLogits(logits, targets *Node) *Node {
	zeros := ZerosLike(logits)
	positive := GreaterThan(logits, zeros)
	relu := Where(positive, logits, zeros)
	negAbs := Where(positive, Neg(logits), logits)
	softplus := Add(relu, Log1p(Exp(negAbs)))
	return ReduceAllMean(Sub(softplus, Mul(logits, ConvertDType(targets, logits.DType()))))
}
