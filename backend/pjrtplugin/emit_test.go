package pjrtplugin

import (
	"errors"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestEmitBackend builds a conv + reduce + dot graph on the emit backend and checks the StableHLO text.
// It is also the guard on the reflection the emit backend relies on (xla.Backend/xla.Builder fields).
func TestEmitBackend(t *testing.T) {
	b, err := NewEmitBackend(1)
	if !EmitAvailable {
		if err == nil || !strings.Contains(err.Error(), "cgo") {
			t.Fatalf("NewEmitBackend without cgo: %v", err)
		}
		t.Skip("built without cgo")
	}
	if err != nil {
		t.Fatal(err)
	}
	g := NewGraph(b, "probe")
	x := Parameter(g, "x", shapes.Make(dtypes.Float32, 2, 8, 8, 3))
	w := Parameter(g, "w", shapes.Make(dtypes.Float32, 3, 3, 3, 4))
	y := Convolve(x, w).ChannelsAxis(3).NoPadding().Done()
	pooled := ReduceSum(y, 1, 2) // [2, 4]
	m := Parameter(g, "m", shapes.Make(dtypes.Float32, 4, 5))
	out := MulScalar(Dot(pooled, m), 0.5)
	err = compileErr(func() { g.Compile(out) })
	if !errors.Is(err, ErrEmitted) {
		t.Fatalf("Compile on the emit backend: %v, want ErrEmitted", err)
	}
	mods := b.Modules()
	if len(mods) != 1 {
		t.Fatalf("%d modules emitted, want 1", len(mods))
	}
	text := mods[0].Text
	for _, want := range []string{"module @", "func.func @main", "stablehlo.convolution", "stablehlo.reduce",
		"stablehlo.dot_general", "stablehlo.multiply", "tensor<2x8x8x3xf32>", "tensor<2x5xf32>"} {
		if !strings.Contains(text, want) {
			t.Errorf("module lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "num_replicas") || strings.Contains(text, "num_partitions") {
		t.Errorf("single-device module declares replicas/partitions:\n%s", text)
	}
}

// TestEmitBackendShardy emits a 2-device AutoSharding (Shardy) program: the batch axis sharded, the
// weight replicated. XLA inserts the collectives at compile time, so the text carries the mesh and the
// sharding annotations, not an all_reduce.
func TestEmitBackendShardy(t *testing.T) {
	if !EmitAvailable {
		t.Skip("built without cgo")
	}
	b, err := NewEmitBackend(2)
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := distributed.NewDeviceMesh([]int{2}, []string{"replica"})
	if err != nil {
		t.Fatal(err)
	}
	g := NewGraph(b, "dp")
	if err := g.SetAutoSharding(mesh); err != nil {
		t.Fatal(err)
	}
	batch, err := distributed.NewShardingSpec(mesh, distributed.AxisSpec{"replica"})
	if err != nil {
		t.Fatal(err)
	}
	x := ShardedParameter(g, "x", shapes.Make(dtypes.Float32, 8, 4), batch)
	w := ShardedParameter(g, "w", shapes.Make(dtypes.Float32, 4, 3), distributed.NewReplicatedShardingSpec(mesh))
	loss := ReduceAllMean(Dot(x, w))
	err = compileErr(func() { g.Compile(loss, Gradient(loss, w)[0]) })
	if !errors.Is(err, ErrEmitted) {
		t.Fatalf("Compile: %v", err)
	}
	text := b.Modules()[0].Text
	for _, want := range []string{"sdy.mesh @mesh = <[\"replica\"=2]>", "stablehlo.num_partitions = 2",
		"sdy.sharding = #sdy.sharding<@mesh, [{\"replica\"}, {}]>", "stablehlo.dot_general"} {
		if !strings.Contains(text, want) {
			t.Errorf("module lacks %q:\n%s", want, text)
		}
	}
}

// compileErr runs fn and returns the error it panicked with (GoMLX graph calls panic on errors).
func compileErr(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	fn()
	return nil
}

func TestParseStepIO(t *testing.T) {
	module := `module @m {
  func.func @main(%arg0: tensor<8x28x28x1xf32> { sdy.sharding = #sdy.sharding<@mesh, [{"replica"}, {}, {}, {}]> }, %arg1: tensor<8xi32>, %arg2: tensor<f32>, %var__model_w: tensor<3x3x1x32xbf16>, %var__model_b: tensor<32xf32>) -> (tensor<3x3x1x32xbf16>, tensor<f32>) {
    %0 = "stablehlo.add"(%arg2, %arg2) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  }
}`
	io, err := ParseStepIO(module)
	if err != nil {
		t.Fatal(err)
	}
	want := StepIO{HostInputs: 3, HostBytes: 8*28*28*4 + 8*4 + 4, Variables: 2, VarBytes: 9*32*2 + 32*4}
	if io != want {
		t.Errorf("ParseStepIO = %+v, want %+v", io, want)
	}
	if _, err := ParseStepIO("module @m {}"); err == nil {
		t.Error("a module without main parsed")
	}
}
