package gomlxfix

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// convCase is one convolution whose gradients are checked.
type convCase struct {
	h, w, in, out, k, stride, dilation, groups int
	pads                                       [][2]int
}

func (c convCase) String() string {
	return fmt.Sprintf("%dx%dx%d->%d k%d s%d d%d g%d pad%v", c.h, c.w, c.in, c.out, c.k, c.stride, c.dilation, c.groups, c.pads)
}

// convLossGrads returns L = Σ sin(iota)·conv(x, k) and its autodiff gradients w.r.t. x and k.
func convLossGrads(t *testing.T, c convCase, x, k *tensors.Tensor) (loss float64, dx, dk []float64) {
	t.Helper()
	exec := MustNewExec(testBackend(), func(x, k *Node) []*Node {
		y := Convolve(x, k).StridePerAxis(c.stride, c.stride).DilationPerAxis(c.dilation, c.dilation).
			PaddingPerDim(c.pads).ChannelGroupCount(c.groups).Done()
		weights := Sin(MulScalar(AddScalar(IotaFull(y.Graph(), y.Shape()), 1), 0.37))
		loss := ReduceAllSum(Mul(y, weights))
		grads := Gradient(loss, x, k)
		return []*Node{loss, grads[0], grads[1]}
	})
	outs := exec.MustExec(x, k)
	return tensors.ToScalar[float64](outs[0]), tensors.MustCopyFlatData[float64](outs[1]), tensors.MustCopyFlatData[float64](outs[2])
}

// TestConvGradientsMatchFiniteDifferences checks the replacement convolution VJP on the cases the
// nets use, including the ones GoMLX v0.26 gets wrong (even kernels) or builds slowly (groups). The
// loss is linear in each operand, so a central difference with step 1 is exact up to rounding.
func TestConvGradientsMatchFiniteDifferences(t *testing.T) {
	cases := []convCase{
		{h: 6, w: 6, in: 3, out: 4, k: 3, stride: 1, dilation: 1, groups: 1, pads: [][2]int{{1, 1}, {1, 1}}},
		{h: 6, w: 6, in: 3, out: 4, k: 3, stride: 2, dilation: 1, groups: 1, pads: [][2]int{{1, 1}, {1, 1}}},
		{h: 6, w: 6, in: 3, out: 4, k: 3, stride: 2, dilation: 1, groups: 1, pads: [][2]int{{0, 1}, {0, 1}}}, // SAME
		{h: 7, w: 5, in: 2, out: 3, k: 3, stride: 2, dilation: 1, groups: 1, pads: [][2]int{{0, 0}, {0, 0}}},
		{h: 8, w: 8, in: 2, out: 3, k: 2, stride: 2, dilation: 1, groups: 1, pads: [][2]int{{0, 0}, {0, 0}}},
		{h: 8, w: 8, in: 3, out: 2, k: 4, stride: 4, dilation: 1, groups: 1, pads: [][2]int{{0, 0}, {0, 0}}},
		{h: 9, w: 9, in: 2, out: 2, k: 4, stride: 1, dilation: 1, groups: 1, pads: [][2]int{{1, 2}, {2, 1}}},
		{h: 9, w: 9, in: 3, out: 4, k: 7, stride: 2, dilation: 1, groups: 1, pads: [][2]int{{3, 3}, {3, 3}}},
		{h: 5, w: 5, in: 3, out: 4, k: 1, stride: 1, dilation: 1, groups: 1, pads: [][2]int{{0, 0}, {0, 0}}},
		{h: 7, w: 7, in: 2, out: 2, k: 3, stride: 1, dilation: 2, groups: 1, pads: [][2]int{{2, 2}, {2, 2}}},
		{h: 6, w: 6, in: 4, out: 4, k: 3, stride: 1, dilation: 1, groups: 4, pads: [][2]int{{1, 1}, {1, 1}}},
		{h: 8, w: 8, in: 4, out: 4, k: 5, stride: 2, dilation: 1, groups: 4, pads: [][2]int{{1, 2}, {1, 2}}}, // SAME
		{h: 8, w: 8, in: 3, out: 3, k: 7, stride: 1, dilation: 1, groups: 3, pads: [][2]int{{3, 3}, {3, 3}}},
		{h: 6, w: 6, in: 4, out: 6, k: 3, stride: 2, dilation: 1, groups: 2, pads: [][2]int{{1, 1}, {1, 1}}},
		{h: 6, w: 6, in: 2, out: 4, k: 3, stride: 1, dilation: 1, groups: 2, pads: [][2]int{{1, 1}, {1, 1}}},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			x := randomTensor(rng, 2, c.h, c.w, c.in)
			k := randomTensor(rng, c.k, c.k, c.in/c.groups, c.out)
			_, dx, dk := convLossGrads(t, c, x, k)
			for which, tensor := range []*tensors.Tensor{x, k} {
				grad := [][]float64{dx, dk}[which]
				flat := tensors.MustCopyFlatData[float64](tensor)
				for i := range flat {
					probe := func(delta float64) float64 {
						moved := append([]float64(nil), flat...)
						moved[i] += delta
						m := tensors.FromFlatDataAndDimensions(moved, tensor.Shape().Dimensions...)
						if which == 0 {
							l, _, _ := convLossGrads(t, c, m, k)
							return l
						}
						l, _, _ := convLossGrads(t, c, x, m)
						return l
					}
					if which == 0 && i%7 != 0 {
						continue // a sample of the input coordinates keeps the test fast
					}
					fd := (probe(1) - probe(-1)) / 2
					if math.Abs(fd-grad[i]) > 1e-9*max(1, math.Abs(fd)) {
						t.Fatalf("%s gradient[%d] = %.12g, finite difference %.12g", []string{"input", "kernel"}[which], i, grad[i], fd)
					}
				}
			}
		})
	}
}
