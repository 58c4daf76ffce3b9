package kernels

import (
	"sync"
	"sync/atomic"
)

// BinOp is a binary arithmetic operation of the element-wise executors; the row kernels
// (binaryRowVec) handle BinAdd through BinDiv.
type BinOp int

const (
	BinAdd BinOp = iota
	BinSub
	BinMul
	BinDiv
	BinMax
	BinMin
)

// FuseKind numbers the bool-valued instructions of a fused element-wise program, above every
// arithmetic op's number; CompareRow and LogicalRow take the comparison and logical kinds.
type FuseKind int

const (
	FuseWhere     FuseKind = 100 + iota // cond ? a : b
	FuseGreater                         // a > b (bool); this and what follows are bool-valued.
	FuseLess                            // a < b
	FuseGreaterEq                       // a >= b
	FuseLessEq                          // a <= b
	FuseAnd                             // a && b (bool operands)
	FuseOr                              // a || b
	FuseNot                             // !a
)

// String names the kind as GoMLX names its op: the arithmetic ops below FuseWhere are BinOp values.
func (k FuseKind) String() string {
	if k >= FuseWhere {
		return [...]string{"Where", "GreaterThan", "LessThan", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Not"}[k-FuseWhere]
	}
	return [...]string{"Add", "Sub", "Mul", "Div", "Max", "Min"}[k]
}

// Prod is the number of elements of a tensor with these dims (1 for a scalar).
func Prod(dims []int) int {
	p := 1
	for _, d := range dims {
		p *= d
	}
	return p
}

// ForEachPosition calls fn with every multi-index of dims, in row-major order.
func ForEachPosition(dims []int, fn func(pos []int)) {
	pos := make([]int, len(dims))
	for range Prod(dims) {
		fn(pos)
		for a := len(dims) - 1; a >= 0; a-- {
			pos[a]++
			if pos[a] < dims[a] {
				break
			}
			pos[a] = 0
		}
	}
}

// ParallelChunks runs fn over the chunks [bounds[t], bounds[t+1]) on workers goroutines, the caller's
// among them, each taking the next chunk when done with one.
func ParallelChunks(bounds []int, workers int, fn func(lo, hi int)) {
	chunks := len(bounds) - 1
	var next atomic.Int64
	work := func() {
		for t := int(next.Add(1) - 1); t < chunks; t = int(next.Add(1) - 1) {
			fn(bounds[t], bounds[t+1])
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

// Splitting an op between the cores pays off only when the op runs long enough to cover the hand-off:
// a helper goroutine started for it reaches the other core 60-800 µs later on the 2-core Zen 4
// machine (its median about 90 µs), and the op after it then reads the part of the data the other
// core wrote. On MobileNetV2's step at batch 8 (most ops 20-700 µs), sharing out every op above a few
// microseconds of work made two threads no faster than one. So an op whose estimated work on one core
// is under splitMinNs runs on the calling core alone. The rates below are rough single-core ones of
// that machine: MobileNetV2's small products ran at 35-75 GFLOP/s and large ones reach about 100, its
// fused element-wise chains took 0.4-0.9 ns a value, its depthwise convolutions 9-16 multiply-adds a ns.
var splitMinNs = 200_000.0

const (
	GemmNsPerMAC      = 1.0 / 40 // a float32 product's multiply-add, about 80 GFLOP/s
	DepthwiseNsPerMAC = 1.0 / 10 // a depthwise convolution's: rows of a few channels, bound by memory
	ElementNs         = 0.5      // one value of an element-wise loop, copy or transpose
)

// WorthSplitting reports whether work estimated at ns nanoseconds on one core is worth sharing out
// between the cores (see splitMinNs).
func WorthSplitting(ns float64) bool { return ns >= splitMinNs }

// SetSplitMinNs sets the least estimated work, in nanoseconds, that WorthSplitting shares out and
// returns the previous value: tests lower it so that their small inputs take the split paths too. Not
// safe while ops run.
func SetSplitMinNs(ns float64) float64 {
	prev := splitMinNs
	splitMinNs = ns
	return prev
}
