package backend

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/trainer/trainer/gobackend"
)

// TestTransferCounterResidency runs a step that updates a 1 MiB variable: after the first step, which
// sends the input, each step moves only its scalar in and its scalar out. Reading
// the variable back to the host shows up as 1 MiB, so the count would catch residency breaking.
func TestTransferCounterResidency(t *testing.T) {
	backend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	counter := CountTransfers(backend)
	const n = 1 << 18 // float32: 1 MiB
	ctx := context.New()
	v := ctx.VariableWithShape("w", shapes.Make(dtypes.Float32, n))
	exec, err := context.NewExec(counter, ctx, func(ctx *context.Context, x, lr *Node) *Node {
		w := v.ValueGraph(x.Graph())
		v.SetValueGraph(Add(w, Mul(x, lr)))
		return ReduceAllSum(w)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	x := tensors.FromValue(make([]float32, n)) // Reused: sent once, then resident.
	step := func(i int) (in, out int64) {
		in0, out0 := counter.Transferred()
		outs, err := exec.Exec(x, float32(i))
		if err != nil {
			t.Fatal(err)
		}
		_ = tensors.ToScalar[float32](outs[0])
		in1, out1 := counter.Transferred()
		return in1 - in0, out1 - out0
	}
	in, _ := step(0)
	if in < 4*n { // The input; the variable's zeros may be made on the device.
		t.Errorf("first step sent %d bytes, want at least %d (the input)", in, 4*n)
	}
	for i := 1; i <= 3; i++ {
		in, out := step(i)
		if in != 4 || out != 4 {
			t.Errorf("step %d moved %d bytes in and %d out, want 4 and 4 (the lr scalar, the loss)", i, in, out)
		}
	}
	_, out0 := counter.Transferred()
	_ = v.MustValue().Value() // Reading the variable on the host is a full copy.
	if _, out1 := counter.Transferred(); out1-out0 != 4*n {
		t.Errorf("reading the variable moved %d bytes out, want %d", out1-out0, 4*n)
	}
}
