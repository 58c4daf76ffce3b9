package graphs

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
)

// ReLU is max(x, 0), written as a select so that its gradient at exactly 0 is 0, as in PyTorch and
// XLA (GoMLX's Max would pass the gradient through at the tie).
func ReLU(x *Node) *Node {
	zeros := ZerosLike(x)
	return Where(GreaterThan(x, zeros), x, zeros)
}

// ReLU6 is min(max(x, 0), 6) with zero gradient outside (0, 6), as nn.ReLU6 (hardtanh's backward).
func ReLU6(x *Node) *Node {
	zeros := ZerosLike(x)
	six := AddScalar(zeros, 6)
	inside := LogicalAnd(GreaterThan(x, zeros), LessThan(x, six))
	return Where(inside, x, Where(GreaterOrEqual(x, six), six, zeros))
}

// Swish (SiLU) is x·sigmoid(x).
func Swish(x *Node) *Node { return Mul(x, Logistic(x)) }

// GELUForm selects the exact (erf) or the tanh-approximated GELU.
type GELUForm int

const (
	// GELUDefault means the net's reference choice (erf for every net here).
	GELUDefault GELUForm = iota
	// GELUErf is x·Φ(x) = x/2·(1+erf(x/√2)), nn.GELU().
	GELUErf
	// GELUTanh is x/2·(1+tanh(√(2/π)(x+0.044715x³))), nn.GELU(approximate="tanh").
	GELUTanh
)

// ParseGELU reads a config's GELU form ("", "erf", "tanh").
func ParseGELU(s string) (GELUForm, error) {
	switch s {
	case "", "default":
		return GELUDefault, nil
	case "erf", "exact":
		return GELUErf, nil
	case "tanh":
		return GELUTanh, nil
	}
	return GELUDefault, fmt.Errorf("unknown GELU form %q, expected erf or tanh", s)
}

// String names the form as configs spell it.
func (f GELUForm) String() string {
	switch f {
	case GELUErf:
		return "erf"
	case GELUTanh:
		return "tanh"
	}
	return "default"
}

// GELU applies the chosen form (GELUDefault is erf).
func GELU(x *Node, form GELUForm) *Node {
	if form == GELUTanh {
		inner := MulScalar(Add(x, MulScalar(Mul(Square(x), x), 0.044715)), math.Sqrt(2/math.Pi))
		return Mul(MulScalar(x, 0.5), OnePlus(Tanh(inner)))
	}
	return Mul(MulScalar(x, 0.5), OnePlus(Erf(MulScalar(x, 1/math.Sqrt2))))
}
