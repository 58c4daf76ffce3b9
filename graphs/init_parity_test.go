package graphs

import (
	"encoding/json"
	"math"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"
)

// torchInitStat is one state_dict tensor of a freshly built torchvision net, as
// scripts/torchvision_init_stats.py records it.
type torchInitStat struct {
	N         int
	Mean, Std float64
	MaxAbs    float64 `json:"max_abs"`
}

// TestInitMatchesTorchvision builds each seed net torchvision has at full width, initialises it, and
// compares every tensor's element count, mean and spread with those of torchvision 0.14's own fresh model
// (testdata/torchvision_init_stats.json): the initial distribution is where a net's training starts, and a
// layer drawn √C times too narrow trains differently while every shape and count still agrees. Two
// independent samples of n values from one distribution differ in standard deviation by about
// σ·sqrt((κ−1)/(2n)) (κ the kurtosis: 3 for a normal, 1.8 for a uniform) and in mean by σ·sqrt(2/n), so the
// test allows 5/sqrt(n) relative on the spread and 5σ·sqrt(2/n) on the mean: a false alarm is
// under one in a million per tensor, and a factor of 2 in the spread fails for any tensor over 100
// values. Constant tensors (BatchNorm's γ, β and running statistics, ConvNeXt's layer scale, zeroed
// biases) must match exactly. The fixture's statistics leave out values over 20σ from the mean (torch's
// float32 trunc_normal_ clamps an occasional infinite draw to the truncation bound, ±2 = 100σ for
// ConvNeXt's σ 0.02, which alone moves a tensor's spread by 1%); ours must have none. ViT-Tiny and MobileNetV4-Conv-M are timm nets and timm is not installed
// where the fixture is written, so they are not checked here.
func TestInitMatchesTorchvision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds five full-width nets (about 90M parameters)")
	}
	raw, err := os.ReadFile("testdata/torchvision_init_stats.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Torchvision string
		Nets        map[string]map[string]torchInitStat
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(fixture.Nets))
	for name := range fixture.Nets {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) != 5 {
		t.Fatalf("fixture holds %d nets, want the five torchvision seed nets", len(names))
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want := fixture.Nets[name]
			spec, err := Get(name)
			if err != nil {
				t.Fatal(err)
			}
			ctx := mobileGraphOnly(t, name, Options{Seed: 7}, 32)
			if err := ctx.InitializeVariables(testBackend(), nil); err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			ctx.EnumerateVariables(func(v *context.Variable) {
				if !strings.HasPrefix(v.Scope(), "/"+ModelScope) {
					return
				}
				key, ok := spec.StateDictKey(v.Scope(), v.Name())
				if !ok {
					return
				}
				w, ok := want[key]
				if !ok {
					t.Errorf("%s (%s/%s) is not in torchvision %s's state_dict", key, v.Scope(), v.Name(), fixture.Torchvision)
					return
				}
				seen[key] = true
				checkInitStat(t, key, variableValues(t, v), w)
			})
			for key := range want {
				if !seen[key] {
					t.Errorf("torchvision's %s has no variable here", key)
				}
			}
		})
	}
}

// checkInitStat compares one tensor's values with torchvision's statistics of the same tensor.
func checkInitStat(t *testing.T, key string, values []float64, w torchInitStat) {
	t.Helper()
	n := len(values)
	if n != w.N {
		t.Errorf("%s: %d values, torchvision %d", key, n, w.N)
		return
	}
	mean, std := meanStd(values)
	far := 0
	for _, x := range values {
		if math.Abs(x-mean) > 20*std {
			far++
		}
	}
	if far > 0 {
		t.Errorf("%s: %d values over 20σ from the mean (mean %.4g, std %.4g)", key, far, mean, std)
	}
	if w.Std == 0 {
		if std != 0 || math.Abs(mean-w.Mean) > 1e-7*math.Max(1, math.Abs(w.Mean)) {
			t.Errorf("%s: mean %.6g std %.3g, torchvision sets every value to %.6g", key, mean, std, w.Mean)
		}
		return
	}
	relStd := math.Abs(std/w.Std - 1)
	meanTol := 5 * w.Std * math.Sqrt(2/float64(n))
	if relStd > 5/math.Sqrt(float64(n)) || math.Abs(mean-w.Mean) > meanTol {
		t.Errorf("%s: mean %.4g std %.4g over %d values; torchvision mean %.4g std %.4g (spread off by %.0f%%, allowed %.0f%%)",
			key, mean, std, n, w.Mean, w.Std, 100*relStd, 100*5/math.Sqrt(float64(n)))
	}
}

// meanStd is the mean and population standard deviation of values.
func meanStd(values []float64) (mean, std float64) {
	for _, x := range values {
		mean += x
	}
	mean /= float64(len(values))
	for _, x := range values {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(values)))
}
