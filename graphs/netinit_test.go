package graphs

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// initWant is the distribution one variable of a net starts from: N(0, std²) when std > 0, U(±bound)
// when bound > 0, else every value equal to constant.
type initWant struct {
	scope, name string
	std, bound  float64
	constant    float64
}

// checkInitialisation builds the named net at full width (graph only) for size×size images, initialises
// its variables and compares each listed variable's sample mean and spread with its wanted distribution.
func checkInitialisation(t *testing.T, name string, size int, wants []initWant) {
	t.Helper()
	ctx := mobileGraphOnly(t, name, Options{Seed: 1}, size)
	if err := ctx.InitializeVariables(testBackend(), nil); err != nil {
		t.Fatal(err)
	}
	for _, w := range wants {
		v := ctx.GetVariableByScopeAndName("/"+ModelScope+"/"+w.scope, w.name)
		if v == nil {
			t.Fatalf("%s: no variable %s/%s", name, w.scope, w.name)
		}
		values := tensors.MustCopyFlatData[float32](v.MustValue())
		var mean, sq, maxAbs float64
		for _, x := range values {
			mean += float64(x)
			sq += float64(x) * float64(x)
			maxAbs = max(maxAbs, math.Abs(float64(x)))
		}
		n := float64(len(values))
		mean /= n
		std := math.Sqrt(sq/n - mean*mean)
		switch {
		case w.std > 0:
			// Every normal variable listed has at least 864 values: the sample std's standard error is
			// under 2.5%, so 8% is over 3 of them.
			if math.Abs(std/w.std-1) > 0.08 || math.Abs(mean) > 4*w.std/math.Sqrt(n) {
				t.Errorf("%s %s/%s: mean %.4g std %.4g over %d values, want N(0, %.4g²)", name, w.scope, w.name,
					mean, std, len(values), w.std)
			}
		case w.bound > 0:
			// A uniform sample's std has standard error √(0.2/n): under 1.8% from 600 values.
			if maxAbs > w.bound || math.Abs(std*math.Sqrt(3)/w.bound-1) > 0.05 {
				t.Errorf("%s %s/%s: max |w| %.4g, std %.4g over %d values, want U(±%.4g)", name, w.scope, w.name,
					maxAbs, std, len(values), w.bound)
			}
		default:
			if std != 0 || mean != w.constant {
				t.Errorf("%s %s/%s: mean %g std %g, want all %g", name, w.scope, w.name, mean, std, w.constant)
			}
		}
	}
}
