package gomlxfix

import (
	"sort"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26 registers no gradient for Rsqrt, which the norms use: d rsqrt(x) = −½·rsqrt(x)³.
func rsqrtVJP(node *Node, v []*Node, _ shapes.Shape) []*Node {
	y := node
	return []*Node{Mul(v[0], MulScalar(Mul(Square(y), y), -0.5))}
}

// GoMLX v0.26's Dot and DotGeneral gradients multiply the cotangent by the broadcast other operand
// (a batch×M×N×K tensor) and then reduce it; on the pure-Go backend that made the MNIST-CNN step ~10x
// slower. These replacements (registered by Install, gomlx_internals.go) express each gradient as one
// DotGeneral plus a transpose, and use stock, GoMLX's own, where they don't apply.

// dotVJP is Dot's gradient for two matrices.
func dotVJP(stock VJP) VJP {
	return func(node *Node, v []*Node, out shapes.Shape) []*Node {
		lhs, rhs := node.Inputs()[0], node.Inputs()[1]
		if lhs.Rank() != 2 || rhs.Rank() != 2 {
			return stock(node, v, out)
		}
		// out[i,k] = Σj a[i,j] b[j,k]:  da = v·bᵀ, db = aᵀ·v.
		return []*Node{
			DotGeneral(v[0], []int{1}, nil, rhs, []int{1}, nil),
			DotGeneral(lhs, []int{0}, nil, v[0], []int{0}, nil),
		}
	}
}

// dotGeneralVJP is DotGeneral's gradient.
func dotGeneralVJP(stock VJP) VJP {
	return func(node *Node, v []*Node, out shapes.Shape) []*Node {
		axes, ok := dotGeneralAxes(node)
		if !ok {
			return stock(node, v, out)
		}
		return dotGeneralGradients(node.Inputs()[0], node.Inputs()[1], axes, v[0])
	}
}

// dotAxes are the axis roles of one DotGeneral.
type dotAxes struct {
	lhsContracting, lhsBatch, rhsContracting, rhsBatch []int
}

// crossAxes lists, in order, the axes of a rank-r operand that are neither contracted nor batch.
func crossAxes(rank int, contracting, batch []int) []int {
	used := make([]bool, rank)
	for _, a := range contracting {
		used[a] = true
	}
	for _, a := range batch {
		used[a] = true
	}
	var cross []int
	for a := range rank {
		if !used[a] {
			cross = append(cross, a)
		}
	}
	return cross
}

// seqInts returns [start, start+1, ..., start+n-1].
func seqInts(start, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = start + i
	}
	return s
}

// dotGeneralGradients returns the gradients of out = DotGeneral(lhs, rhs) given the cotangent v,
// whose axes are [batch..., lhsCross..., rhsCross...].
func dotGeneralGradients(lhs, rhs *Node, ax dotAxes, v *Node) []*Node {
	nb := len(ax.lhsBatch)
	lhsCross := crossAxes(lhs.Rank(), ax.lhsContracting, ax.lhsBatch)
	rhsCross := crossAxes(rhs.Rank(), ax.rhsContracting, ax.rhsBatch)
	vBatch := seqInts(0, nb)
	vLhsCross := seqInts(nb, len(lhsCross))
	vRhsCross := seqInts(nb+len(lhsCross), len(rhsCross))

	// dlhs: contract v's rhs-cross axes with rhs's cross axes -> [batch, lhsCross, rhs's contracting
	// axes in ascending order], each of which stands for its lhs partner.
	dl := DotGeneral(v, vRhsCross, vBatch, rhs, rhsCross, ax.rhsBatch)
	dl = transposeBack(dl, lhs.Rank(), ax.lhsBatch, lhsCross, byPartnerOrder(ax.lhsContracting, ax.rhsContracting))

	// drhs: contract v's lhs-cross axes with lhs's cross axes -> [batch, rhsCross, lhsContracting...].
	dr := DotGeneral(v, vLhsCross, vBatch, lhs, lhsCross, ax.lhsBatch)
	dr = transposeBack(dr, rhs.Rank(), ax.rhsBatch, rhsCross, byPartnerOrder(ax.rhsContracting, ax.lhsContracting))
	return []*Node{dl, dr}
}

// byPartnerOrder lists own axes ordered by their partners' axis numbers (own[i] pairs partner[i]):
// the order in which a DotGeneral leaves the partner's uncontracted axes.
func byPartnerOrder(own, partner []int) []int {
	idx := make([]int, len(own))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return partner[idx[a]] < partner[idx[b]] })
	ordered := make([]int, len(own))
	for i, j := range idx {
		ordered[i] = own[j]
	}
	return ordered
}

// transposeBack permutes x, laid out as [batch, cross, contracting], to the operand's own axis order.
func transposeBack(x *Node, rank int, batch, cross, contracting []int) *Node {
	perm := make([]int, rank)
	pos := 0
	for _, group := range [][]int{batch, cross, contracting} {
		for _, axis := range group {
			perm[axis] = pos
			pos++
		}
	}
	for i, p := range perm {
		if i != p {
			return TransposeAllAxes(x, perm...)
		}
	}
	return x
}
