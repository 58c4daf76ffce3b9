package verify

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify/reference"
)

// The collectives a data-parallel step differentiates through, checked like every op: the SPMD
// program on spmdDevices devices (each running it on its shard) against the float64 reference of the
// computation on the joined batch, and its gradient (AllReduce's registered VJP inside) against
// central differences of that reference. A backend with fewer devices runs them on the pure-Go
// backend's in-process devices (go:devices=2), which the rows' shapes then name.

// spmdDevices is the number of devices of the collective checks.
const spmdDevices = 2

// spmdCase is one collective check: build runs on each device with its shard x (rows [d·n, (d+1)·n)
// of the joined input) and the replicated params; ref computes the devices' outputs, joined along
// the first axis, from the joined input.
type spmdCase struct {
	name   string
	shard  []int // one device's x
	params []operand
	build  func(ctx *context.Context, x *Node, opts graphs.Options) *Node
	ref    func(x reference.Tensor, params []reference.Tensor) reference.Tensor
	// after adds results read from the context after the run (BatchNorm's running statistics).
	after func(ctx *context.Context, x reference.Tensor, params []reference.Tensor, shapes string) []Result
}

func collectiveChecks() []Check {
	var checks []Check
	for _, c := range []spmdCase{allReduceCase(), syncBatchNormCase()} {
		checks = append(checks, Check{Name: c.name, Run: c.run})
	}
	return checks
}

// allReduceCase: y_d = x_d ⊙ tanh(Σ_r x_r) on every device d, so each x_r reaches its own output
// directly and every output through the all-reduce: dx_r = w_r ⊙ tanh(S) + (1 − tanh²S) ⊙ Σ_d w_d ⊙ x_d,
// the second term being AllReduce's gradient (the cotangents all-reduced).
func allReduceCase() spmdCase {
	return spmdCase{
		name:  "allreduce_sum",
		shard: []int{3, 4},
		build: func(_ *context.Context, x *Node, _ graphs.Options) *Node {
			return Mul(x, Tanh(x.Graph().Distributed().AllReduceOne(x, backends.ReduceOpSum)))
		},
		ref: func(x reference.Tensor, _ []reference.Tensor) reference.Tensor {
			n := x.Size() / spmdDevices
			y := reference.New(x.Dims...)
			for i := range n {
				var s float64
				for d := range spmdDevices {
					s += x.Data[d*n+i]
				}
				for d := range spmdDevices {
					y.Data[d*n+i] = x.Data[d*n+i] * math.Tanh(s)
				}
			}
			return y
		},
	}
}

// syncBatchNormCase: graphs.BatchNorm in training with SyncBN on the devices' shards is BatchNorm of
// the joined batch: its moments are all-reduced sums, differentiated through AllReduce's gradient.
func syncBatchNormCase() spmdCase {
	const c = 3
	bn := graphs.TorchBN
	return spmdCase{
		name:  "batchnorm_train_sync",
		shard: []int{2, 2, 2, c},
		params: []operand{
			param("bn", "weight", uniform(0.5, 1.5), c), param("bn", "bias", normal(0.3), c),
			state("bn", "running_mean", normal(0.3), c), state("bn", "running_var", uniform(0.5, 1.5), c),
		},
		build: func(ctx *context.Context, x *Node, opts graphs.Options) *Node {
			opts.SyncBN = true
			return graphs.BatchNorm(ctx.In("bn"), x, true, bn, opts)
		},
		ref: func(x reference.Tensor, p []reference.Tensor) reference.Tensor {
			y, _, _ := reference.BatchNormTrain(x, p[0].Data, p[1].Data, bn.Epsilon)
			return y
		},
		after: func(ctx *context.Context, x reference.Tensor, p []reference.Tensor, shapes string) []Result {
			// The global batch's statistics, m = all devices' rows × H × W, identical on every device.
			_, mean, variance := reference.BatchNormTrain(x, p[0].Data, p[1].Data, bn.Epsilon)
			m := float64(x.Size() / c)
			var want []float64
			for k := range c {
				want = append(want, bn.Decay*p[2].Data[k]+(1-bn.Decay)*mean[k])
			}
			for k := range c {
				want = append(want, bn.Decay*p[3].Data[k]+(1-bn.Decay)*variance[k]*m/(m-1))
			}
			var got []float64
			for _, name := range []string{"running_mean", "running_var"} {
				dist, err := ctx.GetVariableByScopeAndName("/bn", name).DistributedValue()
				if err != nil {
					return []Result{failed("batchnorm_train_sync/running_stats", shapes, err)}
				}
				shards := dist.Shards()
				for _, s := range shards[1:] {
					if !s.Equal(shards[0]) {
						return []Result{failed("batchnorm_train_sync/running_stats", shapes, fmt.Errorf("%s differs between devices", name))}
					}
				}
				got = append(got, fromHost(shards[0]).Data...)
			}
			abs, rel := reference.Errors(got, want)
			return []Result{within("batchnorm_train_sync/running_stats", shapes, abs, rel, forwardTol)}
		},
	}
}

// spmdBackend is backend when it has the devices, else the pure-Go backend's in-process devices.
func spmdBackend(backend backends.Backend) (backends.Backend, string, func(), error) {
	if backend.NumDevices() >= spmdDevices {
		return backend, "", func() {}, nil
	}
	b, err := gobackend.New(fmt.Sprintf("devices=%d", spmdDevices))
	if err != nil {
		return nil, "", nil, err
	}
	return b, fmt.Sprintf(" on go:devices=%d", spmdDevices), b.Finalize, nil
}

// spmdRun is one execution of a collective check's program: the devices' outputs and input gradients
// joined along the first axis, the parameters' gradients summed over the devices.
type spmdRun struct {
	y, dx   reference.Tensor
	dParams []reference.Tensor
	ctx     *context.Context
}

func (c spmdCase) run(backend backends.Backend) []Result {
	rng := rand.New(rand.NewPCG(seed(c.name), 7))
	joined := append([]int{spmdDevices * c.shard[0]}, c.shard[1:]...)
	x := reference.FromData(normal(1)(rng, joined), joined...)
	params := make([]reference.Tensor, len(c.params))
	for i, p := range c.params {
		params[i] = reference.FromData(p.gen(rng, p.dims), p.dims...)
	}
	shapes := fmt.Sprintf("x %s per device ×%d", dimsString(c.shard), spmdDevices)
	for _, p := range c.params {
		shapes += ", " + p.name + " " + dimsString(p.dims)
	}

	b, where, release, err := spmdBackend(backend)
	if err != nil {
		return []Result{failed(c.name, shapes, err)}
	}
	defer release()
	shapes += where
	var run spmdRun
	if res := safeRun(c.name+"/forward", func() []Result {
		run = c.runGraph(b, x, params)
		return nil
	}); len(res) > 0 {
		res[0].Shapes = shapes
		return res
	}

	want := c.ref(x, params)
	abs, rel := reference.Errors(run.y.Data, want.Data)
	results := []Result{within(c.name+"/forward", shapes, abs, rel, forwardTol)}

	// Gradients of L = Σ w·Y, Y the joined outputs, against central differences of the reference.
	w := reference.FromData(functional(want.Size()), want.Dims...)
	maxAbs, maxRel, worst := 0.0, 0.0, ""
	compare := func(name string, got []float64, vals []float64, set func([]float64) reference.Tensor) {
		fd := reference.CentralDiffRichardson(func(v []float64) float64 { return reference.Dot(w, set(v)) }, append([]float64(nil), vals...), fdStep)
		a, r := reference.Errors(got, fd)
		maxAbs = max(maxAbs, a)
		if r > maxRel || worst == "" {
			maxRel, worst = r, name
		}
	}
	compare("x", run.dx.Data, x.Data, func(v []float64) reference.Tensor { return c.ref(reference.FromData(v, joined...), params) })
	k := 0
	for i, p := range c.params {
		if p.fixed {
			continue
		}
		compare(p.name, run.dParams[k].Data, params[i].Data, func(v []float64) reference.Tensor {
			ps := append([]reference.Tensor(nil), params...)
			ps[i] = reference.FromData(v, p.dims...)
			return c.ref(x, ps)
		})
		k++
	}
	grad := within(c.name+"/grad", shapes, maxAbs, maxRel, gradTol)
	if !grad.Pass {
		grad.Note = "worst: d/d" + worst
	}
	results = append(results, grad)
	if c.after != nil {
		results = append(results, c.after(run.ctx, x, params, shapes)...)
	}
	return results
}

// runGraph runs the check's program in float64 on spmdDevices devices of backend: each device's
// output, the gradient of its Σ w_d·y_d with respect to its x and to every differentiated parameter.
func (c spmdCase) runGraph(backend backends.Backend, x reference.Tensor, params []reference.Tensor) spmdRun {
	ctx := context.New()
	for i, p := range c.params {
		v := ctx.InAbsPath("/"+p.scope).VariableWithValue(p.name, hostTensor(params[i], dtypes.Float64, false))
		v.SetTrainable(!p.fixed)
	}
	mesh, err := distributed.NewDeviceMesh([]int{spmdDevices}, []string{"replica"})
	if err != nil {
		panic(err)
	}
	exec, err := context.NewExec(backend, ctx.Checked(false), func(ctx *context.Context, x, w *Node) []*Node {
		g := x.Graph()
		y := c.build(ctx, x, graphs.Options{Precision: "float64"})
		wrt := []*Node{x}
		for _, p := range c.params {
			if !p.fixed {
				wrt = append(wrt, ctx.GetVariableByScopeAndName("/"+p.scope, p.name).ValueGraph(g))
			}
		}
		return append([]*Node{y}, Gradient(ReduceAllSum(Mul(y, w)), wrt...)...)
	})
	if err != nil {
		panic(err)
	}
	defer exec.Finalize()
	exec.SPMD(mesh)
	y := c.ref(x, params) // for its shape
	wAll := functional(y.Size())
	rows, outRows := x.Size()/spmdDevices, y.Size()/spmdDevices
	outShard := append([]int{y.Dims[0] / spmdDevices}, y.Dims[1:]...)
	var args []any
	for d := range spmdDevices {
		args = append(args, tensors.FromFlatDataAndDimensions(append([]float64(nil), x.Data[d*rows:(d+1)*rows]...), c.shard...),
			tensors.FromFlatDataAndDimensions(append([]float64(nil), wAll[d*outRows:(d+1)*outRows]...), outShard...))
	}
	outs, err := exec.Exec(args...)
	if err != nil {
		panic(err)
	}
	perDevice := len(outs) / spmdDevices
	run := spmdRun{y: reference.New(y.Dims...), dx: reference.New(x.Dims...), ctx: ctx}
	for d := range spmdDevices {
		o := outs[d*perDevice : (d+1)*perDevice]
		copy(run.y.Data[d*outRows:], fromHost(o[0]).Data)
		copy(run.dx.Data[d*rows:], fromHost(o[1]).Data)
		for i, t := range o[2:] {
			if d == 0 {
				run.dParams = append(run.dParams, reference.New(t.Shape().Dimensions...))
			}
			for j, v := range fromHost(t).Data {
				run.dParams[i].Data[j] += v
			}
		}
	}
	return run
}
