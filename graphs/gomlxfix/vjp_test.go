package gomlxfix

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

func randomTensor(rng *rand.Rand, dims ...int) *tensors.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return tensors.FromFlatDataAndDimensions(v, dims...)
}

// gradsWith computes d/d(lhs,rhs) of Σ w·DotGeneral(lhs, rhs) with the given VJP registered.
func gradsWith(t *testing.T, vjp VJP, kind NodeType, build func(l, r *Node) *Node, lhs, rhs *tensors.Tensor) [][]float64 {
	t.Helper()
	saved := VJPRegistration[kind]
	VJPRegistration[kind] = vjp
	defer func() { VJPRegistration[kind] = saved }()
	exec := MustNewExec(testBackend(), func(l, r *Node) []*Node {
		out := build(l, r)
		weights := MulScalar(AddScalar(IotaFull(out.Graph(), out.Shape()), 1), 0.01)
		loss := ReduceAllSum(Mul(out, Sin(weights)))
		return Gradient(loss, l, r)
	})
	outs := exec.MustExec(lhs, rhs)
	return [][]float64{tensors.MustCopyFlatData[float64](outs[0]), tensors.MustCopyFlatData[float64](outs[1])}
}

func TestDotGeneralGradientMatchesStock(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []struct {
		name           string
		lhsDims        []int
		rhsDims        []int
		lc, lb, rc, rb []int
	}{
		{"matmul", []int{3, 4}, []int{4, 5}, []int{1}, nil, []int{0}, nil},
		{"transposed rhs", []int{3, 4}, []int{5, 4}, []int{1}, nil, []int{1}, nil},
		{"batched", []int{2, 3, 4}, []int{2, 4, 5}, []int{2}, []int{0}, []int{1}, []int{0}},
		{"two contracting, swapped order", []int{3, 4, 6}, []int{6, 5, 4}, []int{1, 2}, nil, []int{2, 0}, nil},
		{"batch in the middle", []int{3, 2, 4}, []int{4, 2, 5, 3}, []int{2}, []int{1}, []int{0}, []int{1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lhs, rhs := randomTensor(rng, c.lhsDims...), randomTensor(rng, c.rhsDims...)
			build := func(l, r *Node) *Node { return DotGeneral(l, c.lc, c.lb, r, c.rc, c.rb) }
			ours := gradsWith(t, VJPRegistration[NodeTypeDotGeneral], NodeTypeDotGeneral, build, lhs, rhs)
			stock := gradsWith(t, stockDotGeneralVJP, NodeTypeDotGeneral, build, lhs, rhs)
			assertClose(t, ours, stock)
		})
	}
	t.Run("Dot", func(t *testing.T) {
		lhs, rhs := randomTensor(rng, 3, 4), randomTensor(rng, 4, 5)
		build := func(l, r *Node) *Node { return Dot(l, r) }
		ours := gradsWith(t, VJPRegistration[NodeTypeDot], NodeTypeDot, build, lhs, rhs)
		stock := gradsWith(t, stockDotVJP, NodeTypeDot, build, lhs, rhs)
		assertClose(t, ours, stock)
	})
}

func assertClose(t *testing.T, got, want [][]float64) {
	t.Helper()
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("gradient %d: %d values, want %d", i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			if math.Abs(got[i][j]-want[i][j]) > 1e-12*(1+math.Abs(want[i][j])) {
				t.Fatalf("gradient %d[%d] = %.15g, stock VJP gives %.15g", i, j, got[i][j], want[i][j])
			}
		}
	}
}
