package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestParseAutoAugment(t *testing.T) {
	a, err := ParseAutoAugment("imagenet")
	if err != nil || a != (AutoAugment{Policy: "imagenet"}) {
		t.Errorf("imagenet: %+v, %v", a, err)
	}
	if err := (AutoAugment{Policy: "imagenet", Bilinear: true}).Validate(); err != nil {
		t.Error(err)
	}
	if err := (AutoAugment{}).Validate(); err == nil {
		t.Error("the empty policy validated")
	}
	for _, s := range []string{"", "original", "IMAGENET", "cifar10", "svhn", "imagenet ", "v0", "rand-m9"} {
		_, err := ParseAutoAugment(s)
		if err == nil || !strings.Contains(err.Error(), `"imagenet"`) {
			t.Errorf("%q: %v, want an error that names the accepted policies", s, err)
		}
	}
}

// The sub-policy is uniform over the 25, each step runs with its probability, signs are fair.
func TestAutoAugmentDraws(t *testing.T) {
	var rng rand.PCG
	rng.Seed(11, 12)
	const trials = 250000
	var subs [25]int
	var ran [25][2]int
	neg := 0
	for range trials {
		d := drawAA(&rng, len(aaImageNet))
		subs[d.sub]++
		for i, st := range aaImageNet[d.sub] {
			if d.probs[i] <= st.prob {
				ran[d.sub][i]++
			}
			if d.neg[i] {
				neg++
			}
		}
	}
	chi2 := 0.0
	for _, n := range subs {
		e := float64(trials) / 25
		chi2 += (float64(n) - e) * (float64(n) - e) / e
	}
	// 24 degrees of freedom: mean 24, P(chi² > 55) ≈ 3e-4.
	t.Logf("sub-policy counts %v, chi² %.1f (24 dof)", subs, chi2)
	if chi2 > 55 {
		t.Errorf("sub-policy draw not uniform: chi² %.1f over 24 dof", chi2)
	}
	for s, sub := range aaImageNet {
		for i, st := range sub {
			n := float64(subs[s])
			f := float64(ran[s][i]) / n
			if sd := math.Sqrt(st.prob * (1 - st.prob) / n); math.Abs(f-st.prob) > 4*sd+1e-12 {
				t.Errorf("sub-policy %d step %d (%v, p %.1f) ran %.4f of the time", s, i, st.op, st.prob, f)
			}
		}
	}
	if f := float64(neg) / (2 * trials); math.Abs(f-0.5) > 0.004 {
		t.Errorf("negative sign %.4f of the time, want 0.5", f)
	}
}

// apply is a function of the generator state alone, and leaves the generator where the five draws
// leave it whatever the image.
func TestAutoAugmentApplyPure(t *testing.T) {
	img := func(seed uint64) pixels {
		r := rand.New(rand.NewPCG(seed, 1))
		p := pixels{w: 12, h: 9, c: 3, pix: make([]uint8, 12*9*3)}
		for i := range p.pix {
			p.pix[i] = uint8(r.IntN(256))
		}
		return p
	}
	a := AutoAugment{Policy: "imagenet"}
	var sc raScratch
	changed := 0
	for pos := range 50 {
		var r1, r2, r3 rand.PCG
		exampleRNG(&r1, 5, 2, pos)
		exampleRNG(&r2, 5, 2, pos)
		exampleRNG(&r3, 5, 2, pos)
		p, q, other := img(1), img(1), img(2)
		a.apply(p, &r1, &sc)
		a.apply(q, &r2, &sc)
		if !slices.Equal(p.pix, q.pix) {
			t.Fatalf("example %d: two runs from the same state differ", pos)
		}
		if !slices.Equal(p.pix, img(1).pix) {
			changed++
		}
		a.apply(other, &r3, &sc)
		var r4 rand.PCG
		exampleRNG(&r4, 5, 2, pos)
		drawAA(&r4, len(aaImageNet))
		if n1, n3, n4 := r1.Uint64(), r3.Uint64(), r4.Uint64(); n1 != n4 || n3 != n4 {
			t.Fatalf("example %d: generator after apply %x / %x, after the draws alone %x", pos, n1, n3, n4)
		}
	}
	// P(nothing changes) is about a quarter (both steps skipped, or no-op steps such as colour bin 0).
	if changed < 25 || changed > 48 {
		t.Errorf("apply changed %d of 50 images", changed)
	}
}

// Hand-worked values: the solarize threshold is PIL's float comparison, posterize bins, and the
// nearest-neighbour paths on a tiny image.
func TestAutoAugmentOpsGolden(t *testing.T) {
	var sc raScratch
	a := AutoAugment{}
	check := func(name string, p pixels, want ...uint8) {
		t.Helper()
		if !slices.Equal(p.pix, want) {
			t.Errorf("%s: got %v, want %v", name, p.pix, want)
		}
	}
	// Bin 1: threshold 226.67, so 226 stays and 227 flips; bin 3: exactly 170, which flips.
	p := grey(4, 1, 226, 227, 169, 170)
	a.applyOp(aaSolarize, aaMagnitude(aaSolarize, 1, 4, 1), p, &sc)
	check("solarize bin 1", p, 226, 28, 169, 170)
	p = grey(4, 1, 226, 227, 169, 170)
	a.applyOp(aaSolarize, aaMagnitude(aaSolarize, 3, 4, 1), p, &sc)
	check("solarize bin 3", p, 29, 28, 169, 85)
	p = grey(2, 1, 0xff, 0x9f)
	a.applyOp(aaPosterize, aaMagnitude(aaPosterize, 8, 2, 1), p, &sc) // 4 bits
	check("posterize bin 8", p, 0xf0, 0x90)

	// ShearX by 0.5 in 16.16 fixed point: row 0 samples x + 0.75 (itself), row 1 x + 1.25 (its right
	// neighbour), the last pixel of row 1 falls outside and is black.
	p = grey(4, 2, 1, 2, 3, 4, 5, 6, 7, 8)
	affineNearest(p, [6]float64{1, 0.5, 0, 0, 1, 0}, &sc)
	check("shear 0.5", p, 1, 2, 3, 4, 6, 7, 8, 0)
	// Translation through the scaling path: out(x, y) = in(x+2, y-1).
	p = grey(4, 2, 1, 2, 3, 4, 5, 6, 7, 8)
	affineNearest(p, [6]float64{1, 0, 2, 0, 1, -1}, &sc)
	check("translate (2, -1)", p, 0, 0, 0, 0, 3, 4, 0, 0)
	// TranslateX bin 9 on a 4-wide image: int(150/331·4) = 1 pixel, right for a positive magnitude.
	p = pixels{w: 4, h: 1, c: 3, pix: []uint8{1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}}
	a.applyOp(aaTranslateX, aaMagnitude(aaTranslateX, 9, 4, 1), p, &sc)
	check("translate x bin 9", p, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3)
}

// BenchmarkAutoAugment224 is the average per-image cost at 224 (nearest).
func BenchmarkAutoAugment224(b *testing.B) {
	a := AutoAugment{Policy: "imagenet"}
	p := benchImage224()
	var sc raScratch
	var rng rand.PCG
	rng.Seed(1, 2)
	b.ResetTimer()
	for range b.N {
		a.apply(p, &rng, &sc)
	}
}
