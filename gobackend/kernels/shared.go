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
