package gobackend

import (
	"math/rand"
	"slices"
	"testing"
	"time"

	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// manyIndependentOps is a graph of 6 products and 4 Erfs that all depend on the inputs only, so simplego's
// parallel executor starts them together. With simplego's own executors (simplego_dot) the products and
// the Erfs each split their work over simplego's workers pool from inside a pool worker.
func manyIndependentOps(in []*Node) []*Node {
	x, y := in[0], in[1]
	var outs []*Node
	for i := range 6 {
		xi := MulScalar(x, float64(i+1))
		outs = append(outs, Einsum("bij,bjk->bik", xi, y))
	}
	for i := range 4 {
		// 8·48·48 elements: above simplego's threshold for splitting an Erf.
		outs = append(outs, Erf(MulScalar(x, 0.25*float64(i+1))))
	}
	return outs
}

// runWithin runs exec on args in a goroutine and fails the test if it hasn't returned within limit:
// a deadlocked executor never returns.
func runWithin(t *testing.T, limit time.Duration, exec *Exec, args ...any) []*tensors.Tensor {
	t.Helper()
	type result struct {
		outs []*tensors.Tensor
		err  error
	}
	done := make(chan result, 1)
	go func() {
		outs, err := exec.Exec(args...)
		done <- result{outs, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("%+v", r.err)
		}
		return r.outs
	case <-time.After(limit):
		t.Fatalf("the step did not finish within %s: the executor is deadlocked", limit)
		return nil
	}
}

// Parallel op execution must not deadlock when several ops that split their work over simplego's workers
// pool run at once (each holds a pool slot while it waits for slots for its parts), and must give the
// sequential execution's results bit for bit. parallelism=1 leaves two slots, so the first two such ops
// would hold them all.
func TestParallelOpsNoDeadlock(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	x, y := randTT(rng, 8, 48, 48), randTT(rng, 8, 48, 48)
	run := func(config string) [][]float32 {
		b, err := newBackend(config)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Finalize()
		exec, err := NewExec(b, manyIndependentOps)
		if err != nil {
			t.Fatal(err)
		}
		defer exec.Finalize()
		var flat [][]float32
		for range 5 {
			outs := runWithin(t, 60*time.Second, exec, float32Tensor(x), float32Tensor(y))
			flat = flat[:0]
			for _, o := range outs {
				flat = append(flat, tensors.MustCopyFlatData[float32](o))
			}
		}
		return flat
	}
	for _, fast := range []string{"", "simplego_dot,"} {
		want := run(fast + "ops_sequential")
		for _, parallelism := range []string{"parallelism=1", "parallelism=2"} {
			config := fast + "ops_parallel," + parallelism
			got := run(config)
			for i := range want {
				if !slices.Equal(got[i], want[i]) {
					t.Errorf("%s: output %d differs from ops_sequential's", config, i)
				}
			}
		}
	}
}

// float32Tensor is t as a float32 tensor.
func float32Tensor(t tt) *tensors.Tensor {
	flat := make([]float32, len(t.data))
	for i, v := range t.data {
		flat[i] = float32(v)
	}
	return tensors.FromFlatDataAndDimensions(flat, t.dims...)
}
