package gobackend

import (
	"slices"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/pkg/errors"

	"github.com/trainer/trainer/gobackend/kernels"
)

// Element-wise fusion at compile time. A training step is full of short chains of float32 element-wise
// ops (BatchNorm's centring, scaling and shifting and their gradients, ReLU's mask, the optimizer's
// update), each of which simplego runs as a pass over memory into a new buffer; the broadcasts that
// feed them (a per-channel vector, a scalar) are materialised as whole tensors first. When the graph
// is compiled, goBuilder.compileFused rewrites each maximal chain whose intermediate values have no other
// use into one node that evaluates the chain block by block (512 values at a time, in L1), reading
// broadcast operands in place; a ReduceSum of such a chain accumulates the blocks directly. The nodes
// inside a chain are left unreferenced, and simplego skips them.
//
// Every fused op computes what simplego's computes, value by value, in the same float32 arithmetic and
// (for ReduceSum) the same order of additions, so results are bit-identical (the tests compare).
//
// The fused node reuses an op type simplego never builds (fusedOpType, simplego_internals.go) whose
// executor slot is empty in simplego's table; if a GoMLX upgrade gives that op an executor, or the node
// fields this needs can't be found, fusion is off (TestSimplegoInternals says so).

// compileFused fuses the element-wise chains of the graph (when the backend fuses), then compiles it
// with simplego (goBuilder.Compile, spmd.go, calls it).
func (b *goBuilder) compileFused(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	if sb, ok := b.Builder.(*simplego.Builder); ok && fuseFieldsOK {
		if b.fusedConv {
			foldKernelFlips(builderNodesOf(sb))
		}
		if b.fuse {
			fuseElementwise(sb, outputs)
		}
		if b.backend.fastDot && !parallelOps(b.backend.config) {
			markReshapeViews(builderNodesOf(sb), outputs)
		}
	}
	return b.Builder.Compile(outputs, shardings)
}

// fusedChunk is the number of values a fused chain evaluates at a time (its temporaries stay in L1).
const fusedChunk = 512

// setFusedNode turns n into a fused node with the given inputs and program (its shape is kept).
func setFusedNode(n *simplego.Node, inputs []*simplego.Node, prog *fusedProgram) {
	setNodeOpData(n, fusedOpType, prog)
	setNodeInputs(n, inputs)
}

// fuseKind is what a fused instruction computes: a binOp, or one of these.
type fuseKind = kernels.FuseKind

const (
	fuseWhere     = kernels.FuseWhere
	fuseGreater   = kernels.FuseGreater
	fuseLess      = kernels.FuseLess
	fuseGreaterEq = kernels.FuseGreaterEq
	fuseLessEq    = kernels.FuseLessEq
	fuseAnd       = kernels.FuseAnd
	fuseOr        = kernels.FuseOr
	fuseNot       = kernels.FuseNot
)

// boolKind reports whether instructions of kind k compute bools (comparisons, logical ops).
func boolKind(k fuseKind) bool { return k >= fuseGreater }

// logicalKind reports whether instructions of kind k read bools.
func logicalKind(k fuseKind) bool { return k >= fuseAnd }

// fusedArg is an instruction's operand: a leaf (an input read in place) or an earlier instruction.
type fusedArg struct {
	leaf bool
	idx  int
}

type fusedInstr struct {
	kind fuseKind
	args []fusedArg
	// scalar: every operand is one value (a broadcast scalar, or such an instruction), so the
	// instruction computes one value per block, read with stride 0.
	scalar bool
}

// fusedLeaf is an input of the fused node read with the given strides over the program's dims.
type fusedLeaf struct {
	input   int
	strides []int
	isBool  bool
}

// fusedProgram is the data of a fused node: the chain's instructions over the iteration space dims,
// and, for a fused ReduceSum, the output strides over dims (0 on the reduced axes).
type fusedProgram struct {
	dims       []int
	instrs     []fusedInstr
	leaves     []fusedLeaf
	reduce     bool
	outStrides []int
	name       string // e.g. "Fused(Sub,Mul,Add)" or "Fused(Mul)+ReduceSum", for op statistics.

	planOnce sync.Once
	plan     *fusedPlan // Derived on the first execution (planOf).
}

var fuseBinaryKinds = map[backends.OpType]fuseKind{
	backends.OpTypeAdd: fuseKind(binAdd), backends.OpTypeSub: fuseKind(binSub), backends.OpTypeMul: fuseKind(binMul),
	backends.OpTypeDiv: fuseKind(binDiv), backends.OpTypeMax: fuseKind(binMax), backends.OpTypeMin: fuseKind(binMin),
}

var fuseCompareKinds = map[backends.OpType]fuseKind{
	backends.OpTypeGreaterThan: fuseGreater, backends.OpTypeLessThan: fuseLess,
	backends.OpTypeGreaterOrEqual: fuseGreaterEq, backends.OpTypeLessOrEqual: fuseLessEq,
}

var fuseLogicalKinds = map[backends.OpType]fuseKind{
	backends.OpTypeLogicalAnd: fuseAnd, backends.OpTypeLogicalOr: fuseOr, backends.OpTypeLogicalNot: fuseNot,
}

// fusibleKind says whether n is an element-wise op a chain can hold (float32 arithmetic, Where on
// float32 values, comparisons of float32 operands, logical ops on bools: ReLU6's masks), and which.
func fusibleKind(n *simplego.Node) (fuseKind, bool) {
	op, shape := nodeOpType(n), nodeShape(n)
	in := nodeInputsOf(n)
	f32 := func(x *simplego.Node) bool { return nodeShape(x).DType == dtypes.Float32 }
	isBool := func(x *simplego.Node) bool { return nodeShape(x).DType == dtypes.Bool }
	if k, ok := fuseBinaryKinds[op]; ok {
		return k, shape.DType == dtypes.Float32 && len(in) == 2 && f32(in[0]) && f32(in[1])
	}
	if k, ok := fuseCompareKinds[op]; ok {
		return k, shape.DType == dtypes.Bool && len(in) == 2 && f32(in[0]) && f32(in[1])
	}
	if k, ok := fuseLogicalKinds[op]; ok {
		arity := 2
		if k == fuseNot {
			arity = 1
		}
		return k, shape.DType == dtypes.Bool && len(in) == arity && isBool(in[0]) && isBool(in[arity-1])
	}
	if op == backends.OpTypeWhere {
		return fuseWhere, shape.DType == dtypes.Float32 && len(in) == 3 && isBool(in[0]) && f32(in[1]) && f32(in[2])
	}
	return 0, false
}

// fuseElementwise rewrites the fusible chains of the graph that computes outputs; it returns the number
// of fused nodes made.
func fuseElementwise(sb *simplego.Builder, outputs []backends.Op) int {
	if !fusionInstalled {
		return 0
	}
	nodes := builderNodesOf(sb)
	index := make(map[*simplego.Node]int, len(nodes))
	for i, n := range nodes {
		index[n] = i
	}
	uses := make([]int, len(nodes))
	isOut := make([]bool, len(nodes))
	reachable := make([]bool, len(nodes))
	for _, o := range outputs {
		n, ok := o.(*simplego.Node)
		i, known := index[n]
		if !ok || !known {
			return 0
		}
		isOut[i], reachable[i] = true, true
		uses[i]++
	}
	for i := len(nodes) - 1; i >= 0; i-- { // Nodes are in topological order: inputs come first.
		if !reachable[i] {
			continue
		}
		for _, in := range nodeInputsOf(nodes[i]) {
			j := index[in]
			reachable[j] = true
			uses[j]++
		}
	}
	f := &fuser{nodes: nodes, index: index, uses: uses, isOut: isOut, absorbed: make([]bool, len(nodes))}
	count := 0
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		if !reachable[i] || f.absorbed[i] {
			continue
		}
		if nodeOpType(n) == backends.OpTypeReduceSum && nodeShape(n).DType == dtypes.Float32 {
			if f.fuseReduce(n) {
				count++
			}
			continue
		}
		if k, ok := fusibleKind(n); ok && !boolKind(k) && f.fuse(n, n, nil) {
			count++
		}
	}
	return count
}

type fuser struct {
	nodes    []*simplego.Node
	index    map[*simplego.Node]int
	uses     []int
	isOut    []bool
	absorbed []bool
}

// absorbable: x's value is used only by the chain being built, has the chain's dims, and is fusible.
func (f *fuser) absorbable(x *simplego.Node, dims []int) bool {
	i := f.index[x]
	if f.uses[i] != 1 || f.isOut[i] || f.absorbed[i] || !slices.Equal(nodeShape(x).Dimensions, dims) || len(nodeShape(x).Dimensions) != len(dims) {
		return false
	}
	_, ok := fusibleKind(x)
	return ok
}

// fuseReduce fuses ReduceSum r with the chain that computes its operand (which must have no other use).
func (f *fuser) fuseReduce(r *simplego.Node) bool {
	in := nodeInputsOf(r)
	axes, ok := nodeDataOf(r).([]int)
	if len(in) != 1 || !ok || len(axes) == 0 {
		return false
	}
	x := in[0]
	dims := nodeShape(x).Dimensions
	if !f.absorbable(x, dims) {
		return false
	}
	if k, _ := fusibleKind(x); boolKind(k) {
		return false
	}
	reduced := make([]bool, len(dims))
	for _, a := range axes {
		if a < 0 || a >= len(dims) {
			return false
		}
		reduced[a] = true
	}
	outStrides := make([]int, len(dims))
	stride := 1
	for a := len(dims) - 1; a >= 0; a-- {
		if !reduced[a] {
			outStrides[a] = stride
			stride *= dims[a]
		}
	}
	if stride != nodeShape(r).Size() {
		return false
	}
	f.absorbed[f.index[x]] = true
	return f.fuse(r, x, outStrides)
}

// fuse builds the chain rooted at root (root's value, or with outStrides the ReduceSum of it) into the
// carrier node; it returns false, changing nothing, when there is no chain to fuse.
func (f *fuser) fuse(carrier, root *simplego.Node, outStrides []int) bool {
	dims := nodeShape(root).Dimensions
	prog := &fusedProgram{dims: dims, reduce: outStrides != nil, outStrides: outStrides}
	var inputs []*simplego.Node
	var absorbed []int
	transformed := false
	leafOf := func(src *simplego.Node, strides []int) fusedArg {
		in := -1
		for i, x := range inputs {
			if x == src {
				in = i
			}
		}
		if in < 0 {
			in = len(inputs)
			inputs = append(inputs, src)
		}
		for i, l := range prog.leaves {
			if l.input == in && slices.Equal(l.strides, strides) {
				return fusedArg{leaf: true, idx: i}
			}
		}
		prog.leaves = append(prog.leaves, fusedLeaf{input: in, strides: strides, isBool: nodeShape(src).DType == dtypes.Bool})
		return fusedArg{leaf: true, idx: len(prog.leaves) - 1}
	}
	var emit func(m *simplego.Node, recompute bool) (fusedArg, bool)
	recomputed := map[*simplego.Node]fusedArg{} // Each recomputed node once per chain, however many uses.
	emit = func(m *simplego.Node, recompute bool) (fusedArg, bool) {
		kind, _ := fusibleKind(m)
		ins := fusedInstr{kind: kind}
		for _, x := range nodeInputsOf(m) {
			if f.recomputable(x, dims, recompute) {
				// A mask other nodes use too (ReLU's comparison, ReLU6's conjunction of two): cheaper to
				// compute again here from its float operands than to read its stored bools; it stays
				// for its other users.
				a, done := recomputed[x]
				if !done {
					var ok bool
					if a, ok = emit(x, true); !ok {
						return a, false
					}
					recomputed[x] = a
				}
				ins.args = append(ins.args, a)
				continue
			}
			if !recompute && f.absorbable(x, dims) {
				f.absorbed[f.index[x]] = true
				absorbed = append(absorbed, f.index[x])
				a, ok := emit(x, false)
				if !ok {
					return a, false
				}
				ins.args = append(ins.args, a)
				continue
			}
			if src, strides, ok := f.leafTransform(x, dims); ok {
				// Read in place; the broadcast or reshape stays for any other user.
				transformed = true
				ins.args = append(ins.args, leafOf(src, strides))
				continue
			}
			strides, ok := broadcastStrides(nodeShape(x), shapes.Make(nodeShape(x).DType, dims...))
			if !ok {
				return fusedArg{}, false
			}
			ins.args = append(ins.args, leafOf(x, strides))
		}
		ins.scalar = m != root
		for _, a := range ins.args {
			ins.scalar = ins.scalar && ((a.leaf && allZero(prog.leaves[a.idx].strides)) || (!a.leaf && prog.instrs[a.idx].scalar))
		}
		prog.instrs = append(prog.instrs, ins)
		return fusedArg{idx: len(prog.instrs) - 1}, true
	}
	_, ok := emit(root, false)
	if !ok || (len(prog.instrs) < 2 && !transformed && !prog.reduce) {
		for _, i := range absorbed {
			f.absorbed[i] = false
		}
		if root != carrier {
			f.absorbed[f.index[root]] = false
		}
		return false
	}
	names := make([]string, len(prog.instrs))
	for i, ins := range prog.instrs {
		names[i] = ins.kind.String()
	}
	prog.name = "Fused(" + strings.Join(names, ",") + ")"
	if prog.reduce {
		prog.name += "+ReduceSum"
	}
	setFusedNode(carrier, inputs, prog)
	return true
}

func allZero(s []int) bool {
	for _, v := range s {
		if v != 0 {
			return false
		}
	}
	return true
}

// recomputable: x, of the chain's dims, is cheaper to compute again in the chain than to read: a
// bool-valued op (comparison or logical) with other users (or any, inside such a recomputation), or an
// arithmetic op of broadcast scalars (ReLU6's six, AddScalar(ZerosLike(x), 6), would otherwise be
// written out whole).
func (f *fuser) recomputable(x *simplego.Node, dims []int, inside bool) bool {
	i := f.index[x]
	if f.absorbed[i] || len(nodeShape(x).Dimensions) != len(dims) || !slices.Equal(nodeShape(x).Dimensions, dims) {
		return false
	}
	k, ok := fusibleKind(x)
	switch {
	case !ok:
		return false
	case boolKind(k):
		return f.uses[i] >= 2 || inside
	case f.scalarValued(x, 4):
		return true
	}
	if f.uses[i] < 2 && !inside {
		return false
	}
	full, cheap := f.cheapFromOne(x, dims, 2)
	return cheap && full == 1
}

// cheapFromOne reports whether x is arithmetic (up to depth levels of it) on broadcasts and on
// full-size operands that are stored anyway (not element-wise ops: a convolution's output, a
// parameter), and how many of those it reads. BatchNorm's centred input x - mean and normalised x̂,
// each used by two chains, are then computed in each from x instead of written out and read back: one
// pass over memory fewer each way.
func (f *fuser) cheapFromOne(x *simplego.Node, dims []int, depth int) (full int, ok bool) {
	k, fusible := fusibleKind(x)
	if !fusible || k >= fuseWhere || depth == 0 || !slices.Equal(nodeShape(x).Dimensions, dims) {
		return 0, false
	}
	for _, in := range nodeInputsOf(x) {
		shape := nodeShape(in)
		switch _, inFusible := fusibleKind(in); {
		case shape.Size() < kernels.Prod(dims):
			// A broadcast operand (a per-channel vector), read in place.
		case nodeOpType(in) == backends.OpTypeBroadcastInDim || nodeOpType(in) == backends.OpTypeReshape:
			if _, _, ok := f.leafTransform(in, dims); !ok {
				return 0, false
			}
			if nodeShape(nodeInputsOf(in)[0]).Size() == kernels.Prod(dims) {
				full++
			}
		case !inFusible:
			full++
		default:
			n, ok := f.cheapFromOne(in, dims, depth-1)
			if !ok {
				return 0, false
			}
			full += n
		}
	}
	return full, true
}

// scalarValued reports whether x is a binary arithmetic op whose operands are each one value (a
// one-element tensor, a broadcast or reshape of one, or such an op again, up to depth levels).
func (f *fuser) scalarValued(x *simplego.Node, depth int) bool {
	k, ok := fusibleKind(x)
	if !ok || k >= fuseWhere || depth == 0 {
		return false
	}
	for _, in := range nodeInputsOf(x) {
		switch {
		case nodeShape(in).Size() == 1:
		case (nodeOpType(in) == backends.OpTypeBroadcastInDim || nodeOpType(in) == backends.OpTypeReshape) &&
			len(nodeInputsOf(in)) == 1 && nodeShape(nodeInputsOf(in)[0]).Size() == 1:
		case f.scalarValued(in, depth-1):
		default:
			return false
		}
	}
	return true
}

// leafTransform reads through a BroadcastInDim or Reshape: the chain reads its operand in place with
// the strides the broadcast or reshape implies over dims.
func (f *fuser) leafTransform(x *simplego.Node, dims []int) (src *simplego.Node, strides []int, ok bool) {
	in := nodeInputsOf(x)
	if len(in) != 1 {
		return nil, nil, false
	}
	src = in[0]
	xShape, srcShape := nodeShape(x), nodeShape(src)
	target := shapes.Make(xShape.DType, dims...)
	switch nodeOpType(x) {
	case backends.OpTypeReshape:
		strides, ok = broadcastStrides(xShape, target)
		return src, strides, ok
	case backends.OpTypeBroadcastInDim:
		axes, isInts := nodeDataOf(x).([]int)
		if !isInts || len(axes) != srcShape.Rank() || xShape.Rank() != len(dims) {
			return nil, nil, false
		}
		strides = make([]int, len(dims))
		if srcShape.Size() > 1 {
			rm := kernels.RowMajorStrides(srcShape.Dimensions)
			for j, a := range axes {
				if a < 0 || a >= len(dims) {
					return nil, nil, false
				}
				switch {
				case srcShape.Dimensions[j] == 1:
				case srcShape.Dimensions[j] == xShape.Dimensions[a] && xShape.Dimensions[a] == dims[a]:
					strides[a] = rm[j]
				default:
					return nil, nil, false
				}
			}
		}
		for a, d := range xShape.Dimensions {
			if d != dims[a] && d != 1 {
				return nil, nil, false
			}
		}
		return src, strides, true
	}
	return nil, nil, false
}

// execFused evaluates a fused node.
func execFused(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	prog, ok := nodeDataOf(node).(*fusedProgram)
	if !ok {
		return nil, errors.Errorf("fused node without its program")
	}
	pl := prog.planOf()
	outShape := nodeShape(node)
	ev := pl.getEval()
	defer pl.putEval(ev)
	for i, l := range prog.leaves {
		flat, err := backend.BufferData(inputs[l.input])
		if err != nil {
			return nil, err
		}
		if l.isBool {
			ev.bools[i] = flat.([]bool)
		} else {
			ev.f32[i] = flat.([]float32)
		}
	}
	var output *simplego.Buffer
	if !prog.reduce {
		// Write over an input this node is the last user of, if every leaf reading it has the output's
		// layout: each block is read before its place in the output is written.
		for i, buf := range inputs {
			if s, err := backend.BufferShape(buf); !inputsOwned[i] || err != nil || !s.Equal(outShape) {
				continue
			}
			sameLayout := true
			for _, l := range prog.leaves {
				if l.input == i && !slices.Equal(l.strides, pl.rowMajor) {
					sameLayout = false
				}
			}
			if sameLayout {
				output, inputs[i] = buf, nil
				break
			}
		}
	}
	if output == nil {
		output = backend.NewBuffer(outShape)
	}
	outAny, err := backend.BufferData(output)
	if err != nil {
		return nil, err
	}
	ev.out = outAny.([]float32)
	if prog.reduce {
		clear(ev.out)
	}
	if pl.empty {
		return output, nil
	}
	runFused(pl, ev)
	return output, nil
}

// fusedPlan is what every execution of a program shares, derived from it once: the merged iteration
// space, how it is walked, and evaluators kept for reuse. A small net's step runs each fused node once
// per step, and building the loop and an evaluator anew per call (a dozen allocations) cost about as
// much as evaluating a short chain.
type fusedPlan struct {
	prog     *fusedProgram
	rowMajor []int // The row-major strides of prog.dims: the output's, unless it is a reduction's.
	empty    bool  // No values to evaluate.
	loop     stridedLoop
	// walk is the loop the evaluator's body runs over: loop itself, or (blocked) loop without its last
	// axis, whose rows are evaluated in blocks of several at once.
	walk    *stridedLoop
	outer   stridedLoop
	blocked bool
	evals   sync.Pool // *fusedEval of this plan, without their slab.
}

// planOf returns the program's plan, derived on first use.
func (prog *fusedProgram) planOf() *fusedPlan {
	prog.planOnce.Do(func() { prog.plan = newFusedPlan(prog) })
	return prog.plan
}

func newFusedPlan(prog *fusedProgram) *fusedPlan {
	pl := &fusedPlan{prog: prog, rowMajor: kernels.RowMajorStrides(prog.dims), empty: kernels.Prod(prog.dims) == 0}
	outStrides := prog.outStrides
	if !prog.reduce {
		outStrides = pl.rowMajor
	}
	strides := make([][]int, 1+len(prog.leaves))
	strides[0] = outStrides
	for i, l := range prog.leaves {
		strides[1+i] = l.strides
	}
	pl.loop = newStridedLoop(prog.dims, strides...)
	pl.walk = &pl.loop
	if pl.empty {
		return pl
	}
	loop := &pl.loop
	last := len(loop.dims) - 1
	pl.blocked = last >= 1 && loop.dims[last] < fusedChunk/2
	if prog.reduce && last >= 1 && loop.dims[last] < fusedChunk {
		// A reduction keeping only (part of) the row: splitting the row would cut it into short pieces.
		keptOuter := false
		for a := range last {
			keptOuter = keptOuter || loop.strides[0][a] != 0
		}
		pl.blocked = pl.blocked || !keptOuter
	}
	if pl.blocked {
		// Short rows (a channels axis): evaluate blocks of several rows at once.
		pl.outer = stridedLoop{dims: loop.dims[:last], strides: make([][]int, len(loop.strides))}
		for o, st := range loop.strides {
			pl.outer.strides[o] = st[:last]
		}
		pl.walk = &pl.outer
	}
	return pl
}

// getEval returns an evaluator of the plan with its scratch attached; putEval gives it back.
func (pl *fusedPlan) getEval() *fusedEval {
	ev, _ := pl.evals.Get().(*fusedEval)
	if ev == nil {
		ev = newFusedEval(pl)
	}
	ev.attachSlab()
	return ev
}

// putEval returns ev's scratch to the shared pool and ev to the plan's, dropping its references to
// the call's data.
func (pl *fusedPlan) putEval(ev *fusedEval) {
	ev.release()
	ev.out = nil
	clear(ev.f32)
	clear(ev.bools)
	pl.evals.Put(ev)
}

// runFused runs the plan's loop with one evaluator per worker, split on an axis (for a reduction, a
// kept one: each output is then summed by one goroutine, in order) or not at all; ev is the caller's
// evaluator, bound to the call's operands.
func runFused(pl *fusedPlan, ev *fusedEval) {
	loop, reduce := pl.walk, pl.prog.reduce
	split := loop.splitAxisElementwise()
	if reduce {
		split = -1
		for a, d := range loop.dims {
			if loop.strides[0][a] != 0 && (split < 0 || d > loop.dims[split]) {
				split = a
			}
		}
	}
	last := len(loop.dims) - 1
	switch {
	case split < 0:
		ev.walk(0, 0, loop.dims[0])
	case reduce && split == last && !pl.blocked:
		// Per-column sums over many rows of 512 or more values (the guard's Σg² of a kernel gradient,
		// per-channel sums of 512-channel maps) run on one core, walking whole rows: sharing the columns
		// out between two cores, each reading part of every row, took 2.5-6× one core's time on Zen 4
		// (64-column chunks), and still 2.5-3× with one half per core.
		ev.walk(last, 0, loop.dims[last])
	default:
		if chunks, workers := loop.chunking(split); workers > 1 {
			runFusedChunks(pl, ev, split, chunks, workers)
		} else {
			ev.walk(split, 0, loop.dims[split])
		}
	}
}

// runFusedChunks shares the loop's split axis out in chunks, each worker with an evaluator of its own
// bound to ev's operands.
func runFusedChunks(pl *fusedPlan, ev *fusedEval, split, chunks, workers int) {
	kernels.ParallelChunks(kernels.SplitRange(pl.walk.dims[split], chunks, 1), workers, func(lo, hi int) {
		w := pl.getEval()
		w.out = ev.out
		copy(w.f32, ev.f32)
		copy(w.bools, ev.bools)
		w.walk(split, lo, hi)
		pl.putEval(w)
	})
}

// fusedEval holds one goroutine's temporaries.
type fusedEval struct {
	prog      *fusedProgram
	loop      *stridedLoop // The loop the body runs over.
	body      func(off []int, n int)
	out       []float32
	f32       [][]float32
	bools     [][]bool
	rowStride []int // Per operand (output first) along the loop's row.
	ft        [][]float32
	bt        [][]bool
	gather    [3][]float32
	gatherB   [2][]bool
	scratch   []int // The loop walk's indices and offsets.

	// Blocks of short rows: the row length, each operand's stride between rows, and per leaf a buffer
	// holding its block when it is neither contiguous nor constant (a per-channel vector repeated for
	// every row is built once per source offset).
	rowLen     int
	rowsStride []int
	blockBuf   [][]float32
	blockBufB  [][]bool
	blockBase  []int

	slab *fusedSlab // Where the buffers above come from, back to fusedSlabs when done.
}

// walk runs the evaluator's body over its loop with axis restricted to [lo, hi).
func (ev *fusedEval) walk(axis, lo, hi int) {
	ev.loop.runScratch(axis, lo, hi, ev.body, ev.scratch)
}

// fusedSlab is the memory of an evaluator's buffers, kept in a pool: a step runs about a thousand
// fused nodes, most of them small, and allocating their buffers anew cost more than evaluating some.
type fusedSlab struct {
	f []float32
	b []bool
}

var fusedSlabs = sync.Pool{New: func() any { return &fusedSlab{} }}

// carve points each of bufs at the next fusedChunk values of *slab, advancing it.
func carve[T any](bufs [][]T, slab *[]T) {
	for i := range bufs {
		bufs[i] = (*slab)[:fusedChunk:fusedChunk]
		*slab = (*slab)[fusedChunk:]
	}
}

// release returns the evaluator's buffers to the pool; they must not be used until attachSlab.
func (ev *fusedEval) release() {
	fusedSlabs.Put(ev.slab)
	ev.slab = nil
}

// newFusedEval builds an evaluator of pl without its slab (attachSlab gives it one).
func newFusedEval(pl *fusedPlan) *fusedEval {
	prog, loop := pl.prog, &pl.loop
	nLeaves := len(prog.leaves)
	ev := &fusedEval{prog: prog, loop: pl.walk, ft: make([][]float32, len(prog.instrs)), bt: make([][]bool, len(prog.instrs)),
		f32: make([][]float32, nLeaves), bools: make([][]bool, nLeaves),
		blockBuf: make([][]float32, nLeaves), blockBufB: make([][]bool, nLeaves), blockBase: make([]int, nLeaves),
		scratch: make([]int, 3*len(pl.walk.dims)+len(pl.walk.strides))}
	ev.body = ev.row
	if pl.blocked {
		ev.body = ev.blockRows
	}
	last := len(loop.dims) - 1
	for o := range loop.strides {
		ev.rowStride = append(ev.rowStride, loop.rowStride(o))
		if last >= 1 {
			ev.rowsStride = append(ev.rowsStride, loop.strides[o][last-1])
		}
	}
	ev.rowLen = loop.dims[last]
	return ev
}

// attachSlab gives the evaluator its temporaries, carved from a pooled slab.
func (ev *fusedEval) attachSlab() {
	prog := ev.prog
	nBool := 0
	for _, ins := range prog.instrs {
		if boolKind(ins.kind) {
			nBool++
		}
	}
	nLeaves := len(prog.leaves)
	nf := (len(prog.instrs) - nBool + len(ev.gather) + nLeaves) * fusedChunk
	nb := (nBool + len(ev.gatherB) + nLeaves) * fusedChunk
	ev.slab = fusedSlabs.Get().(*fusedSlab)
	if len(ev.slab.f) < nf {
		ev.slab.f = make([]float32, nf)
	}
	if len(ev.slab.b) < nb {
		ev.slab.b = make([]bool, nb)
	}
	fs, bs := ev.slab.f, ev.slab.b
	for i, ins := range prog.instrs {
		if boolKind(ins.kind) {
			carve(ev.bt[i:i+1], &bs)
		} else {
			carve(ev.ft[i:i+1], &fs)
		}
	}
	carve(ev.gather[:], &fs)
	carve(ev.gatherB[:], &bs)
	carve(ev.blockBuf, &fs)
	carve(ev.blockBufB, &bs)
	clear(ev.blockBase) // The blocks built for another call's operands are stale.
}

// blockLeaf returns leaf l's values over a block of g rows (row-major g×rowLen) starting at base, and
// their stride (0: one value for the whole block).
func (ev *fusedEval) blockLeaf(l, base, g int) (f []float32, b []bool, stride int) {
	n, s1, s2 := ev.rowLen, ev.rowStride[1+l], ev.rowsStride[1+l]
	isBool := ev.prog.leaves[l].isBool
	switch {
	case s1 == 0 && s2 == 0:
		if isBool {
			return nil, ev.bools[l][base : base+1], 0
		}
		return ev.f32[l][base : base+1], nil, 0
	case s1 == 1 && s2 == n:
		if isBool {
			return nil, ev.bools[l][base : base+g*n], 1
		}
		return ev.f32[l][base : base+g*n], nil, 1
	}
	// Build the block: a row repeated (s2 == 0) only when the source moved.
	repeat := s2 == 0 && s1 == 1
	if isBool {
		buf := ev.blockBufB[l]
		src := ev.bools[l]
		for r := range g {
			for j := range n {
				buf[r*n+j] = src[base+r*s2+j*s1]
			}
		}
		return nil, buf[:g*n], 1
	}
	buf := ev.blockBuf[l]
	if repeat {
		// The first row, then copies of it up to the most rows a block holds (built once per source).
		if ev.blockBase[l] != base+1 {
			src := ev.f32[l]
			for j := range n {
				buf[j] = src[base+j*s1]
			}
			for r := 1; r < fusedChunk/n; r++ {
				copy(buf[r*n:(r+1)*n], buf[:n])
			}
			ev.blockBase[l] = base + 1
		}
		return buf[:g*n], nil, 1
	}
	src := ev.f32[l]
	if s1 == 0 { // One value per row (a per-row statistic, as LayerNorm's): each row filled with it.
		for r := range g {
			kernels.FillRow(buf[r*n:(r+1)*n], src[base+r*s2])
		}
		return buf[:g*n], nil, 1
	}
	for r := range g {
		row := buf[r*n : (r+1)*n]
		for j := range row {
			row[j] = src[base+r*s2+j*s1]
		}
	}
	return buf[:g*n], nil, 1
}

// blockRows evaluates R rows of rowLen values from off (operand offsets of the first row), in blocks
// of as many whole rows as fit in fusedChunk.
func (ev *fusedEval) blockRows(off []int, R int) {
	prog, n := ev.prog, ev.rowLen
	g := fusedChunk / n
	last := len(prog.instrs) - 1
	for r0 := 0; r0 < R; r0 += g {
		gg := min(g, R-r0)
		m := gg * n
		argF := func(a fusedArg) ([]float32, int) {
			if !a.leaf {
				if prog.instrs[a.idx].scalar {
					return ev.ft[a.idx][:1], 0
				}
				return ev.ft[a.idx][:m], 1
			}
			f, _, s := ev.blockLeaf(a.idx, off[1+a.idx]+r0*ev.rowsStride[1+a.idx], gg)
			return f, s
		}
		argB := func(a fusedArg) ([]bool, int) {
			if !a.leaf {
				if prog.instrs[a.idx].scalar {
					return ev.bt[a.idx][:1], 0
				}
				return ev.bt[a.idx][:m], 1
			}
			_, c, sc := ev.blockLeaf(a.idx, off[1+a.idx]+r0*ev.rowsStride[1+a.idx], gg)
			return c, sc
		}
		for i, ins := range prog.instrs {
			var dst []float32
			mi := m
			if ins.scalar {
				mi = 1
			}
			if i == last && !prog.reduce {
				start := off[0] + r0*ev.rowsStride[0]
				dst = ev.out[start : start+m] // The output's rows are contiguous.
			} else if !boolKind(ins.kind) {
				dst = ev.ft[i][:mi]
			}
			switch {
			case logicalKind(ins.kind):
				a, sa := argB(ins.args[0])
				b, sb := a, sa
				if len(ins.args) > 1 {
					b, sb = argB(ins.args[1])
				}
				kernels.LogicalRow(ins.kind, ev.bt[i][:mi], a, b, sa, sb)
			case boolKind(ins.kind):
				a, sa := argF(ins.args[0])
				b, sb := argF(ins.args[1])
				kernels.CompareRow(ins.kind, ev.bt[i][:mi], a, b, sa, sb)
			case ins.kind == fuseWhere:
				c, sc := argB(ins.args[0])
				t, st := argF(ins.args[1])
				f, sf := argF(ins.args[2])
				kernels.WhereRow(dst, c, t, f, sc, st, sf)
			default:
				a, sa := argF(ins.args[0])
				b, sb := argF(ins.args[1])
				kernels.BinaryRow(binOp(ins.kind), dst, a, b, sa, sb)
			}
		}
		if prog.reduce {
			v := ev.ft[last][:m]
			so := ev.rowStride[0]
			if so == 1 && ev.rowsStride[0] == 0 {
				// Every row adds into the same outputs (per-channel sums): all rows in one pass.
				kernels.SumRows(ev.out[off[0]:off[0]+n], v, gg, n)
				continue
			}
			if so == 0 && ev.rowsStride[0] == 1 {
				// Each row to the next output: the rows' sums overlap, each still added in order.
				kernels.AddRowSums(ev.out[off[0]+r0:off[0]+r0+gg], v, n)
				continue
			}
			for r := range gg {
				o := off[0] + (r0+r)*ev.rowsStride[0]
				x := v[r*n : (r+1)*n]
				if so == 0 {
					acc := ev.out[o]
					for _, xv := range x {
						acc += xv
					}
					ev.out[o] = acc
				} else {
					kernels.AccumulateRow(ev.out[o:o+n], x)
				}
			}
		}
	}
}

// argF returns a float operand's values for positions [j0, j0+m) of the row at off, and its stride
// (0: one value for the whole block); slot picks the scratch for strided leaves.
func (ev *fusedEval) argF(a fusedArg, off []int, j0, m, slot int) ([]float32, int) {
	if !a.leaf {
		if ev.prog.instrs[a.idx].scalar {
			return ev.ft[a.idx][:1], 0
		}
		return ev.ft[a.idx][:m], 1
	}
	s := ev.rowStride[1+a.idx]
	data := ev.f32[a.idx]
	base := off[1+a.idx] + j0*s
	switch s {
	case 0:
		return data[base : base+1], 0
	case 1:
		return data[base : base+m], 1
	}
	g := ev.gather[slot][:m]
	for j := range g {
		g[j] = data[base+j*s]
	}
	return g, 1
}

func (ev *fusedEval) argB(a fusedArg, off []int, j0, m, slot int) ([]bool, int) {
	if !a.leaf {
		if ev.prog.instrs[a.idx].scalar {
			return ev.bt[a.idx][:1], 0
		}
		return ev.bt[a.idx][:m], 1
	}
	s := ev.rowStride[1+a.idx]
	data := ev.bools[a.idx]
	base := off[1+a.idx] + j0*s
	switch s {
	case 0:
		return data[base : base+1], 0
	case 1:
		return data[base : base+m], 1
	}
	g := ev.gatherB[slot][:m]
	for j := range g {
		g[j] = data[base+j*s]
	}
	return g, 1
}

// row evaluates the program over one row of the loop, a block at a time.
func (ev *fusedEval) row(off []int, n int) {
	prog := ev.prog
	last := len(prog.instrs) - 1
	so := ev.rowStride[0]
	for j0 := 0; j0 < n; j0 += fusedChunk {
		m := min(fusedChunk, n-j0)
		for i, ins := range prog.instrs {
			var dst []float32
			mi := m
			if ins.scalar {
				mi = 1
			}
			if i == last && !prog.reduce {
				dst = ev.out[off[0]+j0 : off[0]+j0+m]
			} else if !boolKind(ins.kind) {
				dst = ev.ft[i][:mi]
			}
			switch {
			case logicalKind(ins.kind):
				a, sa := ev.argB(ins.args[0], off, j0, m, 0)
				b, sb := a, sa
				if len(ins.args) > 1 {
					b, sb = ev.argB(ins.args[1], off, j0, m, 1)
				}
				kernels.LogicalRow(ins.kind, ev.bt[i][:mi], a, b, sa, sb)
			case boolKind(ins.kind):
				a, sa := ev.argF(ins.args[0], off, j0, m, 0)
				b, sb := ev.argF(ins.args[1], off, j0, m, 1)
				kernels.CompareRow(ins.kind, ev.bt[i][:mi], a, b, sa, sb)
			case ins.kind == fuseWhere:
				c, sc := ev.argB(ins.args[0], off, j0, m, 0)
				t, st := ev.argF(ins.args[1], off, j0, m, 1)
				f, sf := ev.argF(ins.args[2], off, j0, m, 2)
				kernels.WhereRow(dst, c, t, f, sc, st, sf)
			default:
				a, sa := ev.argF(ins.args[0], off, j0, m, 0)
				b, sb := ev.argF(ins.args[1], off, j0, m, 1)
				kernels.BinaryRow(binOp(ins.kind), dst, a, b, sa, sb)
			}
		}
		if prog.reduce {
			v := ev.ft[last][:m]
			if so == 0 {
				acc := ev.out[off[0]]
				for _, x := range v {
					acc += x
				}
				ev.out[off[0]] = acc
			} else {
				kernels.AccumulateRow(ev.out[off[0]+j0:off[0]+j0+m], v)
			}
		}
	}
}
