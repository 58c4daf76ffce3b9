package trainstep

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// The carry is the loop state the step keeps on the device from one execution to the next, so the
// host need not read anything after an execution (the asynchronous loop, docs/reliability.md):
//
//   - the record: each execution's results (mean loss, correct count, the guard's findings), one row
//     per execution in a ring of RecordRows rows, which the host reads in one transfer (Step.Drain)
//     at a log interval, a checkpoint, an eval or the end;
//   - the state: the guard's decisions the host used to make after reading every execution — whether
//     the accumulation group so far was finite (a group with a non-finite micro-batch is not applied),
//     reduce_lr's factor on the learning rate, and whether the EMA shadows still start fresh at the
//     next applied step — so they take effect at the very next execution, as they did when the host
//     read each one.
//
// The carry's tensors are the previous execution's outputs, already on the device: after the first
// execution nothing of it crosses unless the host drains the record.

// RecordRows is the number of executions the record holds; Execute copies it to the host by itself
// when the host has not drained it for that long.
const RecordRows = 256

// The record's columns.
const (
	recLoss       = iota // the batch's mean loss (float32)
	recCorrect           // top-1 hits
	recLossFinite        // 1 when the loss is finite
	recBadGrads          // how many gradients are non-finite
	recFirstBad          // the index (in the guard's names) of the first non-finite gradient; ≥ that count when none
	recordCols
)

// The state vector's entries.
const (
	stRow     = iota // the record row the next execution writes
	stGroupOK        // 1 while no micro-batch of the accumulation group so far was non-finite
	stLRScale        // reduce_lr's factor on the lr input
	stFresh          // 1 until an optimizer step is applied: the EMA shadows start from the weights then
	stateLen
)

// carryInputs are the carry's graph inputs (per device).
type carryInputs struct{ record, state *Node }

// carryShapes are the shapes of the record and the state.
func carryShapes() (record, state shapes.Shape) {
	return shapes.Make(dtypes.Float32, RecordRows, recordCols), shapes.Make(dtypes.Float32, stateLen)
}

// CarryIO is the number of the step's inputs that hold the carry and their bytes: they come from the
// previous execution's outputs, on the device, and are no part of what the host sends.
func CarryIO() (inputs int, bytes int64) {
	record, state := carryShapes()
	return 2, int64(record.Memory() + state.Memory())
}

// carryIn returns the record and state host tensors a loop starts from.
func carryIn(lrScale float64, emaFresh bool) (record, state *tensors.Tensor) {
	shape, _ := carryShapes()
	record = tensors.FromShape(shape)
	state = tensors.FromValue([]float32{0, 1, float32(lrScale), flag(emaFresh)})
	return record, state
}

// carried is what build needs of the carry: the effective lr, EMA fresh flag and apply gate, and the
// carry's next value.
type carried struct {
	lr, emaFresh, apply *Node // apply is nil when the step applies every execution's update
	record, state       *Node
}

// advanceCarry computes the carry's effect on this execution and its next value, given the
// execution's loss, correct count, the guard's flags [loss, gradients...] and their conjunction ok.
func (s *Step) advanceCarry(in Inputs, loss, correct, flags, ok *Node) carried {
	g := loss.Graph()
	f32 := func(x *Node) *Node { return ConvertDType(x, dtypes.Float32) }
	entry := func(i int) *Node { return Reshape(Slice(in.Carry.state, AxisRange(i, i+1)), 1) }
	one := func() *Node { return Const(g, []float32{1}) }
	row, groupOK, lrScale, fresh := entry(stRow), entry(stGroupOK), entry(stLRScale), entry(stFresh)

	okF := Reshape(f32(ok), 1)
	// A micro-batch that starts an accumulation group (Keep = 0) starts it finite.
	groupBefore := one()
	if in.Keep != nil {
		first := Reshape(f32(Equal(in.Keep, ZerosLike(in.Keep))), 1)
		groupBefore = Max(first, groupOK)
	}
	groupAfter := Mul(groupBefore, okF)
	last := one() // this micro-batch ends its optimizer step
	if in.Apply != nil {
		last = Reshape(f32(GreaterThan(in.Apply, ZerosLike(in.Apply))), 1)
	}
	applied := Mul(last, groupAfter)
	if !s.guard.gate {
		applied = last // under stop nothing is withheld: the run ends at the host's next read
	}
	out := carried{lr: Mul(in.LR, Reshape(lrScale))}
	if in.EMAFresh != nil {
		out.emaFresh = Max(in.EMAFresh, Reshape(fresh))
	}
	if in.Apply != nil && s.guard.gate {
		out.apply = Mul(in.Apply, Reshape(groupAfter))
	}
	if s.reduceLR { // halve at the group's first non-finite micro-batch, from the next execution on
		halve := Mul(groupBefore, OneMinus(okF))
		lrScale = Mul(lrScale, Sub(one(), MulScalar(halve, 0.5)))
	}
	fresh = Mul(fresh, OneMinus(applied))
	nextRow := AddScalar(row, 1)
	nextRow = Mul(nextRow, f32(LessThan(nextRow, Scalar(g, dtypes.Float32, RecordRows)))) // wraps to 0
	out.state = Concatenate([]*Node{nextRow, groupAfter, lrScale, fresh}, 0)

	// The record's row for this execution.
	bad, firstBad := Scalar(g, dtypes.Float32, 0), Scalar(g, dtypes.Float32, 0)
	if n := flags.Shape().Dimensions[0] - 1; n > 0 {
		grads := Slice(flags, AxisRange(1))
		bad = Sub(Scalar(g, dtypes.Float32, n), ReduceAllSum(grads))
		index := Iota(g, shapes.Make(dtypes.Float32, n), 0)
		firstBad = ReduceAllMin(Where(Equal(grads, ZerosLike(grads)), index, Scalar(g, dtypes.Float32, n)))
	}
	values := Concatenate([]*Node{Reshape(f32(loss), 1), Reshape(f32(correct), 1),
		Reshape(Slice(flags, AxisRange(0, 1)), 1), Reshape(bad, 1), Reshape(firstBad, 1)}, 0)
	rows := Iota(g, shapes.Make(dtypes.Float32, RecordRows, recordCols), 0)
	here := Equal(rows, BroadcastToDims(row, RecordRows, recordCols))
	out.record = Where(here, BroadcastToDims(Reshape(values, 1, recordCols), RecordRows, recordCols), in.Carry.record)
	return out
}

// readRecord turns rows of a record copied to the host into Results.
func (s *Step) readRecord(flat []float32, rows []int) []Result {
	out := make([]Result, len(rows))
	for i, r := range rows {
		v := flat[r*recordCols : (r+1)*recordCols]
		res := Result{Loss: float64(v[recLoss]), Correct: float64(v[recCorrect])}
		res.NonFinite.Loss = v[recLossFinite] != 1
		if bad := int(v[recBadGrads]); bad > 0 {
			first := int(v[recFirstBad])
			if first >= 0 && first < len(s.guard.names) {
				res.NonFinite.Tensor = s.guard.names[first]
			} else {
				res.NonFinite.Tensor = fmt.Sprintf("gradient #%d", first)
			}
			res.NonFinite.More = bad - 1
		}
		out[i] = res
	}
	return out
}

// StartCarry makes the next execution start a loop's carry: an empty record, reduce_lr's factor
// lrScale on the lr input, and the EMA shadows starting from the weights at the first applied step
// when emaFresh (a loop then sends Scalars.EMAFresh false: the carry decides). Without a call, the
// first execution starts one with factor 1 and emaFresh false, so Scalars.EMAFresh alone decides.
func (s *Step) StartCarry(lrScale float64, emaFresh bool) {
	s.finalizeCarry()
	s.carry = make([][2]*tensors.Tensor, s.replicas)
	for r := range s.carry {
		s.carry[r][0], s.carry[r][1] = carryIn(lrScale, emaFresh)
	}
	s.nextRow, s.unread, s.spilled = 0, 0, nil
}

func (s *Step) finalizeCarry() {
	for _, c := range s.carry {
		c[0].FinalizeAll()
		c[1].FinalizeAll()
	}
	s.carry = nil
}

// Drain returns the results of the executions since the last Drain (or StartCarry), in order, read
// from the record on device 0 in one transfer: the one point where the host waits for the device.
func (s *Step) Drain() []Result {
	out := s.spilled
	s.spilled = nil
	if s.unread > 0 {
		out = append(out, s.readUnread()...)
	}
	return out
}

// readUnread copies the record to the host and returns its unread rows.
func (s *Step) readUnread() []Result {
	flat := tensors.MustCopyFlatData[float32](s.carry[0][0])
	rows := make([]int, s.unread)
	for i := range rows {
		rows[i] = (s.nextRow - s.unread + i + RecordRows) % RecordRows
	}
	s.unread = 0
	return s.readRecord(flat, rows)
}

// takeCarry replaces the carry by an execution's outputs (per device: record, state).
func (s *Step) takeCarry(next [][2]*tensors.Tensor) {
	s.finalizeCarry()
	s.carry = next
	s.nextRow = (s.nextRow + 1) % RecordRows
	s.unread++
	if s.unread == RecordRows { // keep the rows the ring is about to overwrite
		s.spilled = append(s.spilled, s.readUnread()...)
	}
}
