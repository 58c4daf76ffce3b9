package data

import (
	"slices"
	"strings"
	"testing"
)

// AutoAugment runs inside the training transform after the crop and flip, as a pure function of
// (seed, epoch, position), and never together with RandAugment.
func TestTransformRunsAutoAugment(t *testing.T) {
	src := toPixels(testImage(97, 61, 3), 3)
	plain := Transform{Size: 16, Train: true, Scale: [2]float64{0.08, 1}, Ratio: torchRatio, HFlip: 0.5}
	withAA := plain
	withAA.AutoAugment = &AutoAugment{Policy: "imagenet"}
	run := func(tf Transform, pos int) []uint8 {
		var sc augScratch
		exampleRNG(&sc.rng, 7, 0, pos)
		out, err := tf.apply(src, &sc.rng, &sc)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(out.pix)
	}
	changed := 0
	for pos := range 16 {
		a := run(withAA, pos)
		if !slices.Equal(a, run(withAA, pos)) {
			t.Fatalf("position %d: two runs differ", pos)
		}
		if !slices.Equal(a, run(plain, pos)) {
			changed++
		}
	}
	// About three in four calls change the image (the sub-policies' probabilities); 16 positions
	// all unchanged would mean the policy is not applied.
	if changed < 6 {
		t.Errorf("AutoAugment changed %d of 16 images, want most", changed)
	}
	both := withAA
	both.RandAugment = &RandAugment{NumOps: 2, Magnitude: 9}
	if err := both.Validate(); err == nil || !strings.Contains(err.Error(), "exclusive") {
		t.Errorf("rand and auto augment together: %v", err)
	}
	if err := withAA.Validate(); err != nil {
		t.Error(err)
	}
}
