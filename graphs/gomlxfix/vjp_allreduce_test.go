package gomlxfix

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/gobackend"
)

// devicesBackend is the pure-Go backend with n in-process devices (one per n, shared by the tests).
var devicesBackend = func() func(t *testing.T, n int) backends.Backend {
	var mu sync.Mutex
	cache := map[int]backends.Backend{}
	return func(t *testing.T, n int) backends.Backend {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if cache[n] == nil {
			Install()
			b, err := gobackend.New(fmt.Sprintf("devices=%d", n))
			if err != nil {
				t.Fatal(err)
			}
			cache[n] = b
		}
		return cache[n]
	}
}()

func replicaMesh(t *testing.T, n int) *distributed.DeviceMesh {
	t.Helper()
	mesh, err := distributed.NewDeviceMesh([]int{n}, []string{"replica"})
	if err != nil {
		t.Fatal(err)
	}
	return mesh
}

func randFloats(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

// The gradient of a sum all-reduce on R devices: device d computes L_d = Σ w_d·tanh(y), y = Σ_r x_r²
// (every device gets the same y); the cotangent of device r's x must be ∂(Σ_d L_d)/∂x_r =
// Σ_d w_d·(1 − tanh²y)·2x_r, the closed form below.
func TestAllReduceVJP(t *testing.T) {
	const size = 5
	for _, n := range []int{2, 4} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		xs, ws := make([][]float64, n), make([][]float64, n)
		for d := range n {
			xs[d], ws[d] = randFloats(rng, size), randFloats(rng, size)
		}
		exec, err := NewExec(devicesBackend(t, n), func(x, w *Node) *Node {
			y := x.Graph().Distributed().AllReduceOne(Square(x), backends.ReduceOpSum)
			return Gradient(ReduceAllSum(Mul(w, Tanh(y))), x)[0]
		})
		if err != nil {
			t.Fatal(err)
		}
		exec.SPMD(replicaMesh(t, n))
		var args []any
		for d := range n {
			args = append(args, tensors.FromValue(xs[d]), tensors.FromValue(ws[d]))
		}
		outs, err := exec.Exec(args...)
		if err != nil {
			t.Fatalf("devices=%d: %+v", n, err)
		}
		for r := range n {
			got := tensors.MustCopyFlatData[float64](outs[r])
			for i := range size {
				var y, sumW float64
				for d := range n {
					y += xs[d][i] * xs[d][i]
					sumW += ws[d][i]
				}
				want := sumW * (1 - math.Tanh(y)*math.Tanh(y)) * 2 * xs[r][i]
				if math.Abs(got[i]-want) > 1e-12*math.Max(1, math.Abs(want)) {
					t.Errorf("devices=%d: d/dx of device %d [%d] = %g, want %g", n, r, i, got[i], want)
				}
			}
		}
		exec.Finalize()
	}
}

// Only sum all-reduces have a gradient; the others say so.
func TestAllReduceVJPRefusesMax(t *testing.T) {
	exec, err := NewExec(devicesBackend(t, 2), func(x *Node) *Node {
		y := x.Graph().Distributed().AllReduceOne(x, backends.ReduceOpMax)
		return Gradient(ReduceAllSum(y), x)[0]
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	exec.SPMD(replicaMesh(t, 2))
	_, err = exec.Exec(tensors.FromValue([]float64{1}), tensors.FromValue([]float64{2}))
	if err == nil || !strings.Contains(err.Error(), "only sum all-reduces are differentiable") {
		t.Errorf("gradient of a max all-reduce: %v", err)
	}
}
