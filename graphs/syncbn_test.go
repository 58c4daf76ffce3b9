package graphs

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs/testbackend"
)

// devicesBackend is the shared pure-Go backend with n in-process devices.
func devicesBackend(t *testing.T, n int) backends.Backend {
	t.Helper()
	b, err := testbackend.Devices(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

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

// bnRun is one training-mode BatchNorm: each device's output and input gradient (of Σ w·y) and, summed
// over the devices, the γ and β gradients; then the running statistics it left.
type bnRun struct {
	y, dx           [][]float64 // per device
	dGamma, dBeta   []float64   // summed over the devices
	runMean, runVar []float64
}

// runBN runs BatchNorm in training on devices shards of x (rows device-major), with opts, on a fresh
// context whose γ and β are gamma and beta.
func runBN(t *testing.T, devices int, x, w []float64, rows, ch int, gamma, beta []float64, opts Options) bnRun {
	t.Helper()
	opts.Precision = "float64"
	backend := testBackend()
	if devices > 1 {
		backend = devicesBackend(t, devices)
	}
	ctx := context.New()
	bn := ctx.In("bn")
	bn.VariableWithValue("weight", tensors.FromFlatDataAndDimensions(append([]float64(nil), gamma...), ch))
	bn.VariableWithValue("bias", tensors.FromFlatDataAndDimensions(append([]float64(nil), beta...), ch))
	exec, err := context.NewExec(backend, ctx, func(ctx *context.Context, x, w *Node) []*Node {
		y := BatchNorm(ctx.In("bn").Checked(false), x, true, BNConfig{Epsilon: 1e-5, Decay: 0.9}, opts)
		g := x.Graph()
		gradients := Gradient(ReduceAllSum(Mul(w, y)), x,
			ctx.GetVariableByScopeAndName("/bn", "weight").ValueGraph(g), ctx.GetVariableByScopeAndName("/bn", "bias").ValueGraph(g))
		return append([]*Node{y}, gradients...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	if devices > 1 {
		exec.SPMD(replicaMesh(t, devices))
	}
	n, size := rows/devices, rows/devices*ch
	var args []any
	for d := range devices {
		args = append(args, tensors.FromFlatDataAndDimensions(append([]float64(nil), x[d*size:(d+1)*size]...), n, ch),
			tensors.FromFlatDataAndDimensions(append([]float64(nil), w[d*size:(d+1)*size]...), n, ch))
	}
	outs, err := exec.Exec(args...)
	if err != nil {
		t.Fatalf("devices=%d: %+v", devices, err)
	}
	run := bnRun{dGamma: make([]float64, ch), dBeta: make([]float64, ch)}
	for d := range devices {
		o := outs[4*d : 4*d+4]
		run.y = append(run.y, tensors.MustCopyFlatData[float64](o[0]))
		run.dx = append(run.dx, tensors.MustCopyFlatData[float64](o[1]))
		for c, v := range tensors.MustCopyFlatData[float64](o[2]) {
			run.dGamma[c] += v
		}
		for c, v := range tensors.MustCopyFlatData[float64](o[3]) {
			run.dBeta[c] += v
		}
	}
	run.runMean = replicatedValue(t, ctx.GetVariableByScopeAndName("/bn", "running_mean"), devices)
	run.runVar = replicatedValue(t, ctx.GetVariableByScopeAndName("/bn", "running_var"), devices)
	return run
}

// replicatedValue reads a variable that every device holds, checking that all their copies are the same.
func replicatedValue(t *testing.T, v *context.Variable, devices int) []float64 {
	t.Helper()
	if devices == 1 {
		return tensors.MustCopyFlatData[float64](v.MustValue())
	}
	dist, err := v.DistributedValue()
	if err != nil {
		t.Fatal(err)
	}
	first := tensors.MustCopyFlatData[float64](dist.Shards()[0])
	for d, shard := range dist.Shards() {
		if !slices.Equal(tensors.MustCopyFlatData[float64](shard), first) {
			t.Errorf("devices=%d: %s on device %d differs from device 0's", devices, v.Name(), d)
		}
	}
	return first
}

func flat(parts [][]float64) []float64 {
	var out []float64
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func maxRelDiff(a, b []float64) float64 {
	worst := 0.0
	for i := range a {
		worst = max(worst, math.Abs(a[i]-b[i])/math.Max(1, math.Abs(b[i])))
	}
	return worst
}

// Sync BatchNorm on R devices is BatchNorm of the joined batch on one device: outputs, input gradients
// (through the all-reduced moments, allReduceVJP), γ/β gradients summed over the replicas and the
// running statistics, to float64 rounding. Without SyncBN each device is BatchNorm of its shard alone,
// and the running statistics are the mean of the shards' (which differ from the global batch's).
func TestSyncBatchNorm(t *testing.T) {
	const rows, ch = 8, 3
	rng := rand.New(rand.NewPCG(7, 7))
	x, w := randFloats(rng, rows*ch), randFloats(rng, rows*ch)
	for i := range x {
		x[i] = 2*x[i] + float64(i%ch) // per-channel offsets, so shards' means differ
	}
	gamma, beta := randFloats(rng, ch), randFloats(rng, ch)
	one := runBN(t, 1, x, w, rows, ch, gamma, beta, Options{})
	for _, n := range []int{2, 4} {
		sync := runBN(t, n, x, w, rows, ch, gamma, beta, Options{SyncBN: true})
		for _, c := range []struct {
			name      string
			got, want []float64
		}{{"y", flat(sync.y), flat(one.y)}, {"dx", flat(sync.dx), flat(one.dx)}, {"dγ", sync.dGamma, one.dGamma},
			{"dβ", sync.dBeta, one.dBeta}, {"running_mean", sync.runMean, one.runMean}, {"running_var", sync.runVar, one.runVar}} {
			if d := maxRelDiff(c.got, c.want); d > 1e-12 {
				t.Errorf("sync BN on %d devices: %s differs from one device's by %.3g", n, c.name, d)
			}
		}

		local := runBN(t, n, x, w, rows, ch, gamma, beta, Options{})
		meanStats := [2][]float64{make([]float64, ch), make([]float64, ch)}
		for d := range n {
			shard := runBN(t, 1, x[d*rows/n*ch:(d+1)*rows/n*ch], w[d*rows/n*ch:(d+1)*rows/n*ch], rows/n, ch, gamma, beta, Options{})
			if diff := maxRelDiff(local.y[d], shard.y[0]); diff > 1e-12 {
				t.Errorf("per-replica BN on %d devices: device %d's output is not its shard's BatchNorm (%.3g)", n, d, diff)
			}
			if diff := maxRelDiff(local.dx[d], shard.dx[0]); diff > 1e-12 {
				t.Errorf("per-replica BN on %d devices: device %d's input gradient is not its shard's (%.3g)", n, d, diff)
			}
			for c := range ch {
				meanStats[0][c] += shard.runMean[c] / float64(n)
				meanStats[1][c] += shard.runVar[c] / float64(n)
			}
		}
		if maxRelDiff(local.runMean, meanStats[0]) > 1e-12 || maxRelDiff(local.runVar, meanStats[1]) > 1e-12 {
			t.Errorf("per-replica BN on %d devices: running statistics %v %v, want the shards' mean %v %v",
				n, local.runMean, local.runVar, meanStats[0], meanStats[1])
		}
		if d := maxRelDiff(flat(local.y), flat(one.y)); d < 1e-3 {
			t.Errorf("per-replica BN on %d devices equals global-batch BN (%.3g): the test cannot tell them apart", n, d)
		}
	}
}
