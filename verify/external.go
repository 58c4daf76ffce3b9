package verify

import (
	"sync"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify/reference"
)

// Op checks defined outside the package (the bestiary's layers, bestiary/checks) are written with the
// same parts as the package's own and registered by RegisterOpCases.

// Gen draws the values of one operand of an op check.
type Gen = gen

// Operand is one input of an op check: a graph input (Input), a variable the op reads from its
// context (Param), or a variable that is not differentiated (State).
type Operand = operand

// Name is the operand's name (a variable's name inside its scope).
func (o operand) Name() string { return o.name }

// Scope is a variable operand's scope below the check's root; "" for graph inputs.
func (o operand) Scope() string { return o.scope }

// Input is a graph input of the given shape.
func Input(name string, g Gen, dims ...int) Operand { return input(name, g, dims...) }

// Param is a differentiated variable scope/name of the given shape.
func Param(scope, name string, g Gen, dims ...int) Operand { return param(scope, name, g, dims...) }

// State is a variable that is not differentiated (running statistics).
func State(scope, name string, g Gen, dims ...int) Operand { return state(scope, name, g, dims...) }

// Normal draws N(0, std²).
func Normal(std float64) Gen { return normal(std) }

// Uniform draws U(lo, hi).
func Uniform(lo, hi float64) Gen { return uniform(lo, hi) }

// Distinct draws a shuffled grid with spacing 0.01 around 0: no two values within 0.01 of each other.
func Distinct() Gen { return distinct() }

// FromHost copies a float64 tensor into a reference tensor.
func FromHost(t *tensors.Tensor) reference.Tensor { return fromHost(t) }

// DimsString writes a shape as the checks' Shapes column does ("2x3x4", "scalar").
func DimsString(dims []int) string { return dimsString(dims) }

// OpCase checks one op or layer against its float64 reference: the forward of the float64 graph
// against Ref, the gradients of every operand but State against central differences of Ref, and the
// float32 graph against the float64 one.
type OpCase struct {
	Name           string
	Inputs, Params []Operand
	// Build builds the op with the params already in ctx (ctx is unchecked, so layers find them).
	Build func(ctx *context.Context, in []*Node, opts graphs.Options) *Node
	// Ref computes the op from the operand values (same order as inputs, then params).
	Ref func(in, params []reference.Tensor) reference.Tensor
	// Smooth ops take Richardson-extrapolated differences; piecewise-linear and bilinear ones plain
	// central differences, which are exact for them.
	Smooth bool
	// Step is the finite-difference step (0: the package's default).
	Step float64
	// F32Tol overrides the float32 tolerance; negative skips the float32 comparison.
	F32Tol float64
	// After adds results read from the float64 run's context (running statistics).
	After func(ctx *context.Context, in, params []reference.Tensor) []Result
}

func (c OpCase) opCase() opCase {
	return opCase{name: c.Name, inputs: c.Inputs, params: c.Params, build: c.Build, ref: c.Ref,
		smooth: c.Smooth, step: c.Step, f32Tol: c.F32Tol, after: c.After}
}

var (
	registeredMu sync.Mutex
	registered   []func() OpCase
)

// RegisterOpCases adds op checks defined outside the package. OpChecks lists them after the package's
// own op cases, in the order registered; each is built when OpChecks is called.
func RegisterOpCases(cases ...func() OpCase) {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	registered = append(registered, cases...)
}

// registeredCases builds the registered op checks, in the order registered.
func registeredCases() []opCase {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	cases := make([]opCase, len(registered))
	for i, c := range registered {
		cases[i] = c().opCase()
	}
	return cases
}
