package verify

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/testbackend"
	"github.com/trainer/trainer/verify/reference"
)

var testBackend = testbackend.Go

func TestOpChecks(t *testing.T) {
	debugPanics = true
	for _, c := range OpChecks() {
		t.Run(c.Name, func(t *testing.T) {
			for _, r := range safeRun(c.Name, func() []Result { return c.Run(testBackend()) }) {
				t.Logf("%-40s abs %.2e rel %.2e tol %.0e pass %v %s", r.Name, r.MaxAbsErr, r.MaxRelErr, r.Tolerance, r.Pass, r.Note)
				if !r.Pass {
					t.Errorf("%s failed: %+v", r.Name, r)
				}
			}
		})
	}
}

// The engine must fail what is wrong: a forward that differs from the reference, a gradient that
// misses a term, and a float32 path that rounds like bfloat16.
func TestOpCheckCatchesErrors(t *testing.T) {
	square := func(in, _ []reference.Tensor) reference.Tensor {
		return reference.Map(in[0], func(v float64) float64 { return v * v })
	}
	base := opCase{name: "square", inputs: []operand{input("x", normal(1), 3, 4)}, smooth: true, ref: square}

	ok := base
	ok.build = func(_ *context.Context, in []*Node, _ graphs.Options) *Node { return Mul(in[0], in[0]) }
	if res := ok.run(testBackend()); Failures(res) != 0 || len(res) != 3 {
		t.Fatalf("x·x against x²: %+v", res)
	}

	wrongForward := base
	wrongForward.build = func(_ *context.Context, in []*Node, _ graphs.Options) *Node {
		return AddScalar(Mul(in[0], in[0]), 1e-6)
	}
	if res := wrongForward.run(testBackend()); res[0].Pass || !res[1].Pass {
		t.Errorf("a forward off by 1e-6 must fail the forward check only: %+v", res)
	}

	stopped := base
	stopped.build = func(_ *context.Context, in []*Node, _ graphs.Options) *Node { return Mul(in[0], StopGradient(in[0])) }
	if res := stopped.run(testBackend()); !res[0].Pass || res[1].Pass || res[1].MaxRelErr < 0.4 {
		t.Errorf("a gradient missing half its terms must fail the gradient check: %+v", res)
	}

	bf16 := base
	bf16.build = func(_ *context.Context, in []*Node, _ graphs.Options) *Node {
		x := in[0]
		if x.DType() == dtypes.Float32 {
			x = ConvertDType(ConvertDType(x, dtypes.BFloat16), dtypes.Float32)
		}
		return Mul(x, x)
	}
	if res := bf16.run(testBackend()); !res[1].Pass || res[2].Pass {
		t.Errorf("bfloat16 rounding in the float32 path must fail the float32 check: %+v", res)
	}
}

func TestResultJSONHoldsNonFiniteErrors(t *testing.T) {
	b, err := json.Marshal(failed("x/forward", "x 2", errors.New("boom")))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"x/forward","shapes":"x 2","tolerance":0,"pass":false,"note":"error: boom","max_abs_err":null,"max_rel_err":null}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(within("y/grad", "", 1e-9, 2e-8, 1e-6))
	if !strings.Contains(string(b), `"max_rel_err":2e-8`) || !strings.Contains(string(b), `"pass":true`) {
		t.Errorf("finite result: %s", b)
	}
}
