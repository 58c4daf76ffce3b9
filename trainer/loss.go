package trainer

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
)

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
