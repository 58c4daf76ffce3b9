package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The boxes are pinned (resume draws the same ones) and follow timm's ranges.
func TestRandomErasingBoxes(t *testing.T) {
	rng := rand.NewPCG(5, 6)
	e := RandomErasing{Prob: 0.7}
	var got [][4]int
	for range 5 {
		top, left, h, w, ok := e.Box(20, 30, rng)
		if !ok {
			t.Fatal("no box")
		}
		got = append(got, [4]int{top, left, h, w})
	}
	want := [][4]int{{7, 7, 9, 8}, {8, 8, 11, 13}, {9, 23, 7, 4}, {0, 7, 14, 11}, {5, 8, 8, 20}}
	if !slices.Equal(got, want) {
		t.Errorf("boxes %v, want %v", got, want)
	}
	const n = 20000
	erased := 0
	for range n {
		top, left, h, w, ok := e.Box(60, 50, rng)
		if !ok {
			continue
		}
		erased++
		// Sides are rounded: the drawn aspect lies within the rounding of each side.
		fh, fw := float64(h), float64(w)
		if top < 0 || left < 0 || top+h > 60 || left+w > 50 || h >= 60 || w >= 50 ||
			(fh+0.5)*(fw+0.5) < 0.02*3000 || (fh-0.5)*(fw-0.5) > 3000.0/3 ||
			(fh+0.5)/(fw-0.5) < 0.3 || (fh-0.5)/(fw+0.5) > 1/0.3 {
			t.Fatalf("box (%d,%d) %dx%d outside timm's area and aspect ranges", top, left, h, w)
		}
	}
	// Some draws do not fit (tall boxes of a third of the area), so slightly under 0.7 are erased.
	if f := float64(erased) / n; f < 0.65 || f > 0.71 {
		t.Errorf("erased fraction %.3f, want about 0.7", f)
	}
	if _, _, _, _, ok := (RandomErasing{}).Box(20, 30, rng); ok {
		t.Error("probability 0 erased")
	}
}

// Each mode fills exactly the drawn box: zeros, one normal value per channel, or per-value normal
// noise with mean 0 and variance 1; the rest of the example is untouched.
func TestRandomErasingFills(t *testing.T) {
	const h, w, c = 64, 64, 3
	for _, mode := range []string{"const", "rand", "pixel"} {
		e := RandomErasing{Prob: 1, Mode: mode}
		x := make([]float32, h*w*c)
		for i := range x {
			x[i] = 7
		}
		var rng, boxRNG rand.PCG
		rng.Seed(1, 2)
		boxRNG.Seed(1, 2)
		e.apply(x, h, w, c, &rng)
		top, left, bh, bw, _ := e.Box(h, w, &boxRNG)
		var sum, sq float64
		for y := range h {
			for xx := range w {
				in := y >= top && y < top+bh && xx >= left && xx < left+bw
				for ch := range c {
					v := x[(y*w+xx)*c+ch]
					switch {
					case !in && v != 7:
						t.Fatalf("%s: (%d,%d) outside the box changed to %v", mode, y, xx, v)
					case in && mode == "const" && v != 0:
						t.Fatalf("const: %v inside the box", v)
					case in && mode == "rand" && v != x[(top*w+left)*c+ch]:
						t.Fatalf("rand: channel %d not one colour", ch)
					case in:
						sum += float64(v)
						sq += float64(v) * float64(v)
					}
				}
			}
		}
		if mode == "pixel" {
			n := float64(bh * bw * c)
			mean, variance := sum/n, sq/n-sum*sum/(n*n)
			if n < 200 || math.Abs(mean) > 4/math.Sqrt(n) || math.Abs(variance-1) > 0.25 {
				t.Errorf("pixel: %g values, mean %.3f variance %.3f", n, mean, variance)
			}
		}
	}
	if err := (RandomErasing{Prob: 0.5, Mode: "noise"}).Validate(); err == nil {
		t.Error("mode noise accepted")
	}
}
