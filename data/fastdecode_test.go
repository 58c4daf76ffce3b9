package data

import (
	"math/rand/v2"
	"os"
	"testing"
)

// TestFastDecodeCost states what Transform.FastDecode costs in pixels on ImageNet-like JPEGs (about
// 400×350, 4:2:0): the same crops and flips as the exact path (the random sequence is unchanged),
// their RandomResizedCrop(224) outputs a little apart.
func TestFastDecodeCost(t *testing.T) {
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded: FastDecode has no effect with image/jpeg")
	}
	paths := benchJPEGs(t, t.TempDir(), 6)
	exact := Transform{Size: 224, Train: true, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5}
	fast := exact
	fast.FastDecode = true
	var se, sf augScratch
	sum, n, worst, maxDiff := 0.0, 0, 0.0, 0
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 4 {
			re, rf := rand.NewPCG(uint64(i), uint64(k)), rand.NewPCG(uint64(i), uint64(k))
			a, err := exact.decodeApply(b, 3, 0, re, &se)
			if err != nil {
				t.Fatal(err)
			}
			f, err := fast.decodeApply(b, 3, 0, rf, &sf)
			if err != nil {
				t.Fatal(err)
			}
			if re.Uint64() != rf.Uint64() {
				t.Fatalf("%s: fast decode drew a different number of values", p)
			}
			m, mean := pixelDiff(t, a, f)
			sum, n, worst, maxDiff = sum+mean, n+1, max(worst, mean), max(maxDiff, m)
		}
	}
	t.Logf("fast decode vs exact, %d crops at 224: mean abs difference %.3f levels (worst crop %.3f), max %d", n, sum/float64(n), worst, maxDiff)
	if sum == 0 || worst > 3 {
		t.Errorf("fast decode: mean difference %.3f, worst crop %.3f: want some, each <= 3 levels", sum/float64(n), worst)
	}
}
