package stats

import (
	"math"
	"math/big"
	"testing"
)

// TestWilsonClosedForms checks the interval against values worked by hand from
// centre = (p + z²/2n)/(1 + z²/n), half = z/(1 + z²/n)·sqrt(p(1−p)/n + z²/4n²) (Wilson 1927):
// at k = 0 it reduces to [0, z²/(n+z²)], at k = n to [n/(n+z²), 1], and 50/100 at z = 1.96 is the
// textbook [0.40383, 0.59617].
func TestWilsonClosedForms(t *testing.T) {
	z := 1.96
	cases := []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 10, 0, z * z / (10 + z*z)},
		{10, 10, 10 / (10 + z*z), 1},
		{50, 100, 0.5 - 1.96/(1+z*z/100)*math.Sqrt(0.0025+z*z/40000), 0.5 + 1.96/(1+z*z/100)*math.Sqrt(0.0025+z*z/40000)},
	}
	for _, c := range cases {
		lo, hi := Wilson(c.k, c.n, z)
		if math.Abs(lo-c.lo) > 1e-12 || math.Abs(hi-c.hi) > 1e-12 {
			t.Errorf("Wilson(%d, %d) = [%v, %v], want [%v, %v]", c.k, c.n, lo, hi, c.lo, c.hi)
		}
	}
	if lo, hi := Wilson(50, 100, z); math.Abs(lo-0.40383) > 5e-6 || math.Abs(hi-0.59617) > 5e-6 {
		t.Errorf("Wilson(50, 100) = [%.5f, %.5f], want [0.40383, 0.59617]", lo, hi)
	}
	if lo, hi := Wilson(0, 0, Z95); lo != 0 || hi != 1 {
		t.Errorf("Wilson(0, 0) = [%v, %v], want [0, 1]", lo, hi)
	}
	// An ImageNet-sized accuracy: 38,584 of 50,000 (77.168%) has a half-width near 0.37 points.
	lo, hi := Wilson(38584, 50000, Z95)
	if lo > 0.77168 || hi < 0.77168 || math.Abs((hi-lo)/2-0.00368) > 0.0001 {
		t.Errorf("Wilson(38584, 50000) = [%v, %v]", lo, hi)
	}
	if got := Interval(50, 100); got != "50.00% [40.38, 59.62]" {
		t.Errorf("Interval(50, 100) = %q", got)
	}
}

// TestMcNemarExactSmallCases checks p = min(1, 2·Σ_{i≤min(b,c)} C(b+c, i)/2^(b+c)) on cases summed by hand.
func TestMcNemarExactSmallCases(t *testing.T) {
	cases := []struct {
		b, c int
		p    float64
	}{
		{0, 0, 1},
		{0, 5, 2.0 / 32},         // 2·C(5,0)/2⁵
		{5, 0, 2.0 / 32},         // symmetric
		{1, 5, 2 * 7.0 / 64},     // 2·(1+6)/2⁶
		{2, 8, 2 * 56.0 / 1024},  // 2·(1+10+45)/2¹⁰
		{3, 3, 1},                // the tail holds the middle term
		{4, 5, 1},                // 2·P(X≤4), X~B(9,½), is exactly 1
		{3, 7, 2 * 176.0 / 1024}, // 2·(1+10+45+120)/2¹⁰
		{0, 1, 1},                // 2·½
	}
	for _, c := range cases {
		if got := McNemarExact(c.b, c.c); math.Abs(got-c.p) > 1e-12 {
			t.Errorf("McNemarExact(%d, %d) = %v, want %v", c.b, c.c, got, c.p)
		}
	}
}

// exactTail is the two-sided p-value by exact rational arithmetic: a reference with no floating point
// in the sum.
func exactTail(b, c int) float64 {
	n, k := b+c, min(b, c)
	sum, term := new(big.Int), big.NewInt(1) // term = C(n, i)
	for i := 0; i <= k; i++ {
		sum.Add(sum, term)
		term.Mul(term, big.NewInt(int64(n-i)))
		term.Quo(term, big.NewInt(int64(i+1)))
	}
	r := new(big.Rat).SetFrac(new(big.Int).Mul(sum, big.NewInt(2)), new(big.Int).Lsh(big.NewInt(1), uint(n)))
	p, _ := r.Float64()
	return math.Min(1, p)
}

// TestMcNemarExactAgreesWithBigIntegerSums checks the log-space sum against exact rational sums up to
// thousands of discordant pairs (where C(n, k) alone overflows float64), including p-values far below
// float64's normal range of intermediate products.
func TestMcNemarExactAgreesWithBigIntegerSums(t *testing.T) {
	for _, c := range [][2]int{{10, 30}, {120, 150}, {480, 520}, {1000, 1100}, {2400, 2600}, {300, 900}, {1590, 1610}} {
		got, want := McNemarExact(c[0], c[1]), exactTail(c[0], c[1])
		if math.Abs(got-want) > 1e-9*want {
			t.Errorf("McNemarExact(%d, %d) = %.15g, exact %.15g", c[0], c[1], got, want)
		}
	}
	// The gap of a one-point difference on 50,000 images with 2,000 discordant images is no noise.
	if p := McNemarExact(750, 1250); p > 1e-25 || p <= 0 {
		t.Errorf("McNemarExact(750, 1250) = %g, want a tiny positive p", p)
	}
	// Hundreds of thousands of pairs run and stay in [0, 1].
	if p := McNemarExact(200000, 200500); p < 0.4 || p > 1 {
		t.Errorf("McNemarExact(200000, 200500) = %g", p)
	}
	if !math.IsNaN(McNemarExact(-1, 3)) {
		t.Error("McNemarExact(-1, 3) is not NaN")
	}
}

// TestAgainstAPublishedPairing checks both statistics against a pairing published with scipy's values:
// the book's ConvNeXt-T runs (runs/2026-09-18-cnx-verified-300ep/RESULTS.md of brettkoonce/lean4-mlir)
// score 40,651 of 50,000 "[95% CI 80.96–81.64]", and pair with 1,903 images only A got right and 1,802
// only B, where scipy.stats.binomtest(1802, 3705) gives p = 0.1004.
func TestAgainstAPublishedPairing(t *testing.T) {
	if p := McNemarExact(1903, 1802); math.Abs(p-0.1004) > 0.00005 {
		t.Errorf("McNemarExact(1903, 1802) = %.5f, want 0.1004", p)
	}
	if got := Interval(40651, 50000); got != "81.30% [80.96, 81.64]" {
		t.Errorf("Interval(40651, 50000) = %q, want 81.30%% [80.96, 81.64]", got)
	}
}

// TestAgainstMorePublishedPairings: the book's ViT-Ti pairings (runs/2026-10-01-vit-verified-bf16-300ep)
// and its ConvNeXt EMA control, as published (three significant digits), and their Wilson intervals.
func TestAgainstMorePublishedPairings(t *testing.T) {
	for _, c := range []struct {
		b, c int
		p    float64
	}{{2257, 2438, 0.009}, {2252, 2429, 0.010}, {2417, 2561, 0.043}, {32, 48, 0.093}} {
		if got := McNemarExact(c.b, c.c); math.Abs(got-c.p) > 0.0005 {
			t.Errorf("McNemarExact(%d, %d) = %.4f, published %.3f", c.b, c.c, got, c.p)
		}
	}
	for _, c := range []struct {
		k    int
		want string
	}{{36208, "72.42% [72.02, 72.81]"}, {35562, "71.12% [70.73, 71.52]"}} {
		if got := Interval(c.k, 50000); got != c.want {
			t.Errorf("Interval(%d, 50000) = %q, published %q", c.k, got, c.want)
		}
	}
}
