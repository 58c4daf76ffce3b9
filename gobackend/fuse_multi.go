package gobackend

import (
	"slices"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/trainer/trainer/gobackend/kernels"
)

// Multi-output fusion. Element-wise fusion (fuse.go) stops at a value with two uses: an optimizer's new
// momentum m' = μm + g is both the momentum variable's new value and an operand of the weight update
// w' = w − lr·m', and the guard's Σg² reads the same gradient g. Each chain is then a pass over memory of
// its own, and SGD's step reads g twice and m' again. After element-wise fusion, fused nodes over the
// same iteration space that read a common full-size input, or where one reads another's value, are
// merged into one node with several outputs (simplego's multi-output nodes: each output is read by its
// users through a select node), evaluated block by block like any fused chain: one pass reads g, m and
// w and writes m', w' and the per-column Σg². A member whose value only other members read is not
// written at all.
//
// Each output is computed by the same instructions, in the same order of additions for a sum, as the
// node it replaces, so the bits are the same. A node joins a group only if none of its other inputs
// depends on the group's outputs (a step that clips or gates on Σg² keeps the sum apart), and the graph
// is put back in an order where every node follows its inputs; if none exists, nothing is merged.

// maxMultiMembers and maxMultiLeaves bound a merged node (its evaluator keeps a block per instruction
// and leaf).
const (
	maxMultiMembers = 8
	maxMultiLeaves  = 16
)

// dependsBudget bounds the nodes one dependency search visits; past it the search says "depends", and
// the node stays apart.
const dependsBudget = 4096

// fuseMulti merges the fused nodes of the graph that computes outputs into multi-output nodes; it returns
// the number of multi-output nodes made.
func fuseMulti(sb *simplego.Builder, outputs []backends.Op) int {
	if !multiFusionInstalled {
		return 0
	}
	nodes := builderNodesOf(sb)
	index := make(map[*simplego.Node]int, len(nodes))
	for i, n := range nodes {
		index[n] = i
	}
	uses := make([]int, len(nodes))
	reachable := make([]bool, len(nodes))
	for _, o := range outputs {
		n, ok := o.(*simplego.Node)
		i, known := index[n]
		if !ok || !known {
			return 0
		}
		reachable[i] = true
		uses[i]++
	}
	for i := len(nodes) - 1; i >= 0; i-- {
		if !reachable[i] {
			continue
		}
		for _, in := range nodeInputsOf(nodes[i]) {
			j, ok := index[in]
			if !ok {
				return 0
			}
			reachable[j] = true
			uses[j]++
		}
	}
	m := &multiFuser{nodes: nodes, index: index, uses: uses, group: make([]int, len(nodes)), stamp: make([]int, len(nodes))}
	for i := range m.group {
		m.group[i] = -1
	}
	consumers := map[*simplego.Node][]int{} // A full-size input -> the fused nodes seen so far that read it.
	for i, n := range nodes {
		prog := singleProgram(n)
		if !reachable[i] || prog == nil {
			continue
		}
		var cands []int
		addCand := func(g int) {
			if !slices.Contains(cands, g) {
				cands = append(cands, g)
			}
		}
		size := kernels.Prod(prog.dims)
		for _, in := range nodeInputsOf(n) {
			j := index[in]
			if m.group[j] >= 0 {
				addCand(m.group[j])
			}
			if nodeShape(in).Size() == size && size > 1 {
				for _, c := range consumers[in] {
					addCand(m.group[c])
				}
				consumers[in] = append(consumers[in], i)
			}
		}
		for _, g := range cands {
			if m.canJoin(g, i, prog) {
				m.group[i] = g
				m.groups[g] = append(m.groups[g], i)
				break
			}
		}
		if m.group[i] < 0 {
			m.group[i] = len(m.groups)
			m.groups = append(m.groups, []int{i})
		}
	}
	return m.apply(sb)
}

// singleProgram is n's program if n is a fused node with one output.
func singleProgram(n *simplego.Node) *fusedProgram {
	if nodeOpType(n) != fusedOpType {
		return nil
	}
	prog, ok := nodeDataOf(n).(*fusedProgram)
	if !ok || len(prog.outputs) != 1 {
		return nil
	}
	return prog
}

type multiFuser struct {
	nodes  []*simplego.Node
	index  map[*simplego.Node]int
	uses   []int
	group  []int   // Per node, its group (every fused node is in one), or -1.
	groups [][]int // Each group's members, in graph order.
	stamp  []int   // Dependency searches: the search that last visited each node.
	search int
}

// canJoin reports whether fused node i (program prog, after every member of group g in graph order) may
// join group g: same iteration space, members' values read only as the element-wise values they are,
// and no other input depending on a member.
func (m *multiFuser) canJoin(g, i int, prog *fusedProgram) bool {
	members := m.groups[g]
	if len(members) >= maxMultiMembers {
		return false
	}
	leaves := len(prog.leaves)
	for _, j := range members {
		p := singleProgram(m.nodes[j])
		if !slices.Equal(p.dims, prog.dims) {
			return false
		}
		leaves += len(p.leaves)
	}
	if leaves > maxMultiLeaves*2 { // Before sharing: the merged node's count is checked when it is built.
		return false
	}
	rowMajor := kernels.RowMajorStrides(prog.dims)
	inputs := nodeInputsOf(m.nodes[i])
	for in, x := range inputs {
		j := m.index[x]
		if m.group[j] != g {
			if m.dependsOnGroup(j, g) {
				return false
			}
			continue
		}
		if singleProgram(x).outputs[0].reduce {
			return false
		}
		for _, l := range prog.leaves {
			if l.input == in && !slices.Equal(l.strides, rowMajor) {
				return false
			}
		}
	}
	return true
}

// dependsOnGroup reports whether node j depends on a member of group g (or the search ran past its
// budget).
func (m *multiFuser) dependsOnGroup(j, g int) bool {
	first := m.groups[g][0]
	if j < first {
		return false // Nodes are in graph order: nothing before the first member depends on it.
	}
	m.search++
	stack := []int{j}
	visited := 0
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if m.group[k] == g {
			return true
		}
		if visited++; visited > dependsBudget {
			return true
		}
		for _, in := range nodeInputsOf(m.nodes[k]) {
			x := m.index[in]
			if x > first && m.stamp[x] != m.search {
				m.stamp[x] = m.search
				stack = append(stack, x)
			} else if x == first {
				return true
			}
		}
	}
	return false
}

// multiMember is what apply changes in a member, to put it back.
type multiMember struct {
	node   *simplego.Node
	op     backends.OpType
	data   any
	inputs []*simplego.Node
}

// apply builds the multi-output node of each group of two or more and puts the graph in order; when no
// order exists (two groups each needing the other's output first) it undoes every change.
func (m *multiFuser) apply(sb *simplego.Builder) int {
	var saved []multiMember
	var made []*simplego.Node
	for _, members := range m.groups {
		if len(members) < 2 {
			continue
		}
		for _, j := range members {
			n := m.nodes[j]
			saved = append(saved, multiMember{n, nodeOpType(n), nodeDataOf(n), nodeInputsOf(n)})
		}
		if node := m.build(members); node != nil {
			made = append(made, node)
		} else {
			saved = saved[:len(saved)-len(members)]
		}
	}
	if len(made) == 0 {
		return 0
	}
	order, ok := topologicalOrder(m.nodes)
	if !ok {
		for _, s := range saved {
			setNodeOpData(s.node, s.op, s.data)
			setNodeInputs(s.node, s.inputs)
		}
		return 0
	}
	for i, n := range order {
		setNodeIndex(n, i)
	}
	setBuilderNodes(sb, order)
	return len(made)
}

// build merges the members (fused nodes, in graph order) into a new multi-output node and makes each
// member read by others only, or by nodes outside, its select node or unreferenced; nil if the merged
// node would read too many leaves.
func (m *multiFuser) build(members []int) *simplego.Node {
	first := singleProgram(m.nodes[members[0]])
	prog := &fusedProgram{dims: first.dims}
	var inputs []*simplego.Node
	leafOf := func(src *simplego.Node, l fusedLeaf) fusedArg {
		in := slices.Index(inputs, src)
		if in < 0 {
			in = len(inputs)
			inputs = append(inputs, src)
		}
		for i, x := range prog.leaves {
			if x.input == in && slices.Equal(x.strides, l.strides) {
				return fusedArg{leaf: true, idx: i}
			}
		}
		prog.leaves = append(prog.leaves, fusedLeaf{input: in, strides: l.strides, isBool: l.isBool})
		return fusedArg{leaf: true, idx: len(prog.leaves) - 1}
	}
	rootInstr := map[*simplego.Node]int{}
	internalUses := map[*simplego.Node]int{} // Each member's uses by later members.
	var names []string
	for _, j := range members {
		n := m.nodes[j]
		p := singleProgram(n)
		base := len(prog.instrs)
		ins := nodeInputsOf(n)
		for _, x := range ins {
			if _, member := rootInstr[x]; member {
				internalUses[x]++
			}
		}
		for _, in := range p.instrs {
			c := fusedInstr{kind: in.kind, scalar: in.scalar, args: make([]fusedArg, len(in.args))}
			for a, arg := range in.args {
				switch {
				case !arg.leaf:
					c.args[a] = fusedArg{idx: base + arg.idx}
				default:
					l := p.leaves[arg.idx]
					src := ins[l.input]
					if r, member := rootInstr[src]; member {
						c.args[a] = fusedArg{idx: r}
					} else {
						c.args[a] = leafOf(src, l)
					}
				}
			}
			prog.instrs = append(prog.instrs, c)
		}
		rootInstr[n] = base + p.outputs[0].instr
		names = append(names, p.name)
	}
	if len(prog.leaves) > maxMultiLeaves {
		return nil
	}
	multi := new(simplego.Node)
	var outShapes []shapes.Shape
	var selects []*simplego.Node
	for _, j := range members {
		n := m.nodes[j]
		o := singleProgram(n).outputs[0]
		if m.uses[j] > internalUses[n] {
			o.instr = rootInstr[n]
			prog.outputs = append(prog.outputs, o)
			outShapes = append(outShapes, o.shape)
			selects = append(selects, n)
			setNodeInputs(n, []*simplego.Node{multi})
		} else {
			setNodeInputs(n, nil)
		}
		setNodeOpData(n, fusedOpType, nil)
	}
	prog.name = "Multi[" + strings.Join(names, " ") + "]"
	setNodeOpData(multi, fusedOpType, prog)
	setNodeInputs(multi, inputs)
	setNodeMultiOutputs(multi, outShapes, selects)
	return multi
}

// topologicalOrder returns nodes, and the nodes they read that aren't listed (the multi-output nodes),
// in an order where each follows its inputs and otherwise keeps its place; ok is false if the graph
// has a cycle.
func topologicalOrder(nodes []*simplego.Node) (order []*simplego.Node, ok bool) {
	const (
		open = 1
		done = 2
	)
	state := make(map[*simplego.Node]uint8, len(nodes)+len(nodes)/8)
	order = make([]*simplego.Node, 0, len(nodes)+len(nodes)/8)
	var visit func(n *simplego.Node) bool
	visit = func(n *simplego.Node) bool {
		switch state[n] {
		case done:
			return true
		case open:
			return false
		}
		state[n] = open
		for _, in := range nodeInputsOf(n) {
			if !visit(in) {
				return false
			}
		}
		state[n] = done
		order = append(order, n)
		return true
	}
	for _, n := range nodes {
		if !visit(n) {
			return nil, false
		}
	}
	return order, true
}

// isMultiOutput reports whether n is a node with several outputs (callers check multiFieldsOK first).
func isMultiOutput(n *simplego.Node) bool {
	s, _ := nodeMultiOutputs(n)
	return len(s) > 0
}
