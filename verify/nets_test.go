package verify

import (
	"strings"
	"testing"
	"time"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// TestNetChecks sweeps every registered net, so nets added later are covered without naming them.
// With -short only the nets with small default inputs (MNIST, CIFAR sizes) run; the full sweep
// checks one coordinate (the largest gradient) per parameter tensor to stay within minutes.
func TestNetChecks(t *testing.T) {
	cfg := NetConfig{Coords: 1}
	for _, name := range graphs.Names() {
		spec, _ := graphs.Get(name)
		if testing.Short() && spec.InputShape[0] > 32 {
			continue
		}
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			results := CheckNet(testBackend(), name, cfg)
			if len(results) != 2 {
				t.Errorf("%d results, want the plain and the drop-path pass", len(results))
			}
			for _, r := range results {
				t.Logf("%-34s %s: abs %.2e rel %.2e (tol %.0e) %s", r.Name, r.Shapes, r.MaxAbsErr, r.MaxRelErr, r.Tolerance, r.Note)
				if !r.Pass {
					t.Errorf("%s failed: %s", r.Name, r.Note)
				}
			}
			t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// toyNet is a two-layer net on 8x8 grey images; broken forwards h + h²/2 but stops the gradient of
// the square, and dropPath wraps the hidden layer in a residual branch with stochastic depth.
func toyNet(name string, broken, dropPath bool) graphs.Spec {
	return graphs.Spec{
		Name: name, InputShape: [3]int{8, 8, 1}, NumClasses: 10,
		Build: func(ctx *context.Context, x *Node, train bool, opts graphs.Options) *Node {
			x = graphs.Flatten(graphs.ToCompute(x, opts))
			h := graphs.Linear(ctx.In("fc1"), x, graphs.LinearConfig{Units: 6}, opts)
			h = graphs.GELU(h, graphs.GELUErf)
			if broken {
				h = Add(h, StopGradient(MulScalar(Square(h), 0.5)))
			}
			if dropPath {
				branch := graphs.Linear(ctx.In("branch"), h, graphs.LinearConfig{Units: 6}, opts)
				h = Add(h, graphs.DropPath(ctx, branch, opts.DropPath(0), train))
			}
			return graphs.FromCompute(graphs.Linear(ctx.In("fc2"), h, graphs.LinearConfig{Units: opts.NumClasses}, opts), opts)
		},
	}
}

func TestNetCheckCatchesAWrongGradient(t *testing.T) {
	good := checkSpec(testBackend(), toyNet("toy", false, false), NetConfig{})
	if Failures(good) != 0 || len(good) != 2 {
		t.Fatalf("the correct toy net should pass: %+v", good)
	}
	if !strings.Contains(good[1].Note, "not applicable") {
		t.Errorf("a net without drop path should say so in its drop-path pass: %+v", good[1])
	}
	bad := checkSpec(testBackend(), toyNet("toy_broken", true, false), NetConfig{})
	if bad[0].Pass || bad[0].MaxRelErr < 1e-2 || !strings.Contains(bad[0].Note, "fc1") {
		t.Errorf("a stopped gradient must fail the check, at fc1: %+v", bad[0])
	}
}

func TestNetCheckReplaysTheDropPathMask(t *testing.T) {
	spec := toyNet("toy_drop_path", false, true)
	cfg := NetConfig{Batch: 8, DropPath: 0.5}.withDefaults()
	rate := cfg.DropPath
	run := &netRun{backend: testBackend(), spec: spec, cfg: cfg, size: 8}
	zero := 0.0
	if r := run.check("plain", &zero); !r.Pass {
		t.Fatalf("plain pass: %+v", r)
	}
	r := run.check("drop_path", &rate)
	if !r.Pass || strings.Contains(r.Note, "not applicable") {
		t.Fatalf("drop-path pass with the mask replayed: %+v", r)
	}
	// Without resetting the RNG state each evaluation draws a new mask: the differences are noise.
	run.noReplay = true
	if r := run.check("drop_path_no_replay", &rate); r.Pass {
		t.Errorf("without replaying the mask the check should fail: %+v", r)
	}
}
