package gobackend

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
)

// Reshapes of a graph input that only products read. A classifier's first Dense flattens the batch
// (Reshape [128, 28, 28, 1] -> [128, 784]) and simplego copies the values whenever the caller keeps its
// input (a training loop's batch, a bench's resident one): 400 KB, about 20 µs of a 0.2-ms step on the
// linear net. When the graph is compiled, a Reshape whose operand is a parameter used by nothing else,
// and whose users are all DotGenerals (which never write into their operands), is marked a view: at run
// time, if simplego doesn't own the parameter's buffer, the Reshape returns a buffer over the same
// values instead of a copy. Such a buffer must never reach simplego's buffer pools (a later op would
// write over the caller's input): the DotGeneral that uses it last takes it out of simplego's hands
// (releaseViews), as an executor that consumes an input does; a Reshape below it that is its last user
// takes it over as simplego's Reshape takes any buffer it owns. Not under ops_parallel: there two users
// running at once may each see the other as the last one, and simplego then pools the buffer itself.

// reshapeView is the data of a Reshape node marked as a view (simplego keeps no data for Reshape).
type reshapeView struct{}

// markReshapeViews marks the graph's Reshapes that can view their operand (see above): from a
// parameter whose one use is a Reshape, that Reshape and the chain of Reshapes below it (a Dense
// flattens, then its product reshapes again), when every user down the chain is a DotGeneral or such a
// Reshape.
func markReshapeViews(nodes []*simplego.Node, outputs []backends.Op) {
	if !bufferFieldsOK || sgExecutors[backends.OpTypeReshape] == nil {
		return
	}
	isOutput := map[*simplego.Node]bool{}
	for _, o := range outputs {
		if n, ok := o.(*simplego.Node); ok {
			isOutput[n] = true
		}
	}
	// Every listing of a node as an input, live nodes or not (counting more users only marks fewer).
	users := map[*simplego.Node][]*simplego.Node{}
	for _, n := range nodes {
		for _, in := range nodeInputsOf(n) {
			users[in] = append(users[in], n)
		}
	}
	// readByProducts reports whether r's values are only read by products, directly or through
	// Reshapes; each user lists it once (simplego hands a node the ownership of an input only at its
	// last use, once).
	var readByProducts func(r *simplego.Node) bool
	readByProducts = func(r *simplego.Node) bool {
		if nodeOpType(r) != backends.OpTypeReshape || nodeDataOf(r) != nil || isOutput[r] || len(users[r]) == 0 {
			return false
		}
		seen := map[*simplego.Node]bool{}
		for _, u := range users[r] {
			if seen[u] || (nodeOpType(u) != backends.OpTypeDotGeneral && !readByProducts(u)) {
				return false
			}
			seen[u] = true
		}
		return true
	}
	var mark func(r *simplego.Node)
	mark = func(r *simplego.Node) {
		setNodeOpData(r, backends.OpTypeReshape, &reshapeView{})
		for _, u := range users[r] {
			if nodeOpType(u) == backends.OpTypeReshape && !isReshapeView(u) {
				mark(u)
			}
		}
	}
	for _, p := range nodes {
		if nodeOpType(p) != backends.OpTypeParameter || isOutput[p] || len(users[p]) != 1 {
			continue
		}
		if r := users[p][0]; readByProducts(r) {
			mark(r)
		}
	}
}

// isReshapeView reports whether n is a Reshape marked as a view.
func isReshapeView(n *simplego.Node) bool {
	if nodeOpType(n) != backends.OpTypeReshape {
		return false
	}
	_, ok := nodeDataOf(n).(*reshapeView)
	return ok
}

// execFastReshape replaces simplego's Reshape: a view over the operand's values when the node is marked
// a view and simplego doesn't own the operand's buffer; simplego's otherwise (which takes an owned
// buffer over, or copies).
func execFastReshape(backend *simplego.Backend, node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) (*simplego.Buffer, error) {
	orig := sgExecutors[backends.OpTypeReshape]
	if len(inputs) != 1 || inputsOwned[0] || !nodeFieldsOK || !bufferFieldsOK || !isReshapeView(node) || !ownsFastOps(backend) {
		return orig(backend, node, inputs, inputsOwned)
	}
	flat, err := backend.BufferData(inputs[0])
	if err != nil {
		return orig(backend, node, inputs, inputsOwned)
	}
	return newBufferOver(nodeShape(node), flat), nil
}

// releaseViews takes the view buffers node used for the last time out of simplego's hands, so that
// they never join its buffer pools (a buffer simplego owned and that a view node took over is only left
// to the garbage collector).
func releaseViews(node *simplego.Node, inputs []*simplego.Buffer, inputsOwned []bool) {
	if !fuseFieldsOK {
		return
	}
	for i, in := range nodeInputsOf(node) {
		if i < len(inputs) && inputsOwned[i] && inputs[i] != nil && isReshapeView(in) {
			inputs[i] = nil
		}
	}
}
