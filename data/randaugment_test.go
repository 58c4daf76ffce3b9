package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func grey(w, h int, v ...uint8) pixels {
	return pixels{w: w, h: h, c: 1, pix: slices.Clone(v)}
}

func TestParseRandAugment(t *testing.T) {
	for _, c := range []struct {
		s    string
		want RandAugment
	}{
		{"rand-m9-mstd0.5-inc1", RandAugment{Magnitude: 9, NumOps: 2, MagnitudeStd: 0.5, Increasing: true}},
		{"rand-m6-mstd0.5-inc1", RandAugment{Magnitude: 6, NumOps: 2, MagnitudeStd: 0.5, Increasing: true}},
		{"rand-m9-mstd0.5", RandAugment{Magnitude: 9, NumOps: 2, MagnitudeStd: 0.5}},
		{"rand-n3-m7-inc0", RandAugment{Magnitude: 7, NumOps: 3}},
		{"rand", RandAugment{Magnitude: 10, NumOps: 2}},
		{"rand-m9-mstd101", RandAugment{Magnitude: 9, NumOps: 2, MagnitudeStd: math.Inf(1)}},
	} {
		got, err := ParseRandAugment(c.s)
		if err != nil || got != c.want {
			t.Errorf("%q: %+v, %v; want %+v", c.s, got, err, c.want)
		}
	}
	for _, s := range []string{"", "m9", "auto-m9", "rand-m11", "rand-m-1", "rand-n0", "rand-x3", "rand-mstd-1",
		"rand-inc2", "rand-w0", "rand-m9.5", "rand-m9-", "rand-9"} {
		_, err := ParseRandAugment(s)
		if err == nil || !strings.Contains(err.Error(), "rand-m{M}") {
			t.Errorf("%q: %v, want an error that gives the grammar", s, err)
		}
	}
}

// The photometric ops on fixed inputs, against values worked out from PIL's definitions.
func TestRandAugmentPointOpsGolden(t *testing.T) {
	check := func(name string, p pixels, want ...uint8) {
		t.Helper()
		if !slices.Equal(p.pix, want) {
			t.Errorf("%s: got %v, want %v", name, p.pix, want)
		}
	}
	p := grey(4, 1, 0, 10, 255, 128)
	Invert(p)
	check("invert", p, 255, 245, 0, 127)

	p = grey(5, 1, 0, 127, 128, 200, 255)
	Solarize(p, 128)
	check("solarize 128", p, 0, 127, 127, 55, 0)
	p = grey(2, 1, 0, 255)
	Solarize(p, 256)
	check("solarize 256", p, 0, 255)
	p = grey(2, 1, 0, 255)
	Solarize(p, 0)
	check("solarize 0", p, 255, 0)

	p = grey(4, 1, 0x3f, 0x40, 0xff, 0x81)
	Posterize(p, 2)
	check("posterize 2", p, 0, 0x40, 0xc0, 0x80)
	p = grey(2, 1, 0xff, 0x81)
	Posterize(p, 0)
	check("posterize 0", p, 0, 0)
	p = grey(2, 1, 0xff, 0x81)
	Posterize(p, 8)
	check("posterize 8", p, 0xff, 0x81)

	p = grey(5, 1, 0, 100, 127, 128, 200)
	SolarizeAdd(p, 110, 128)
	check("solarize add", p, 110, 210, 237, 128, 200)
	p = grey(1, 1, 127)
	SolarizeAdd(p, 200, 128)
	check("solarize add saturates", p, 255)

	// autocontrast: lo 50, hi 150, scale 2.55: int(i·2.55 − 127.5).
	p = grey(3, 1, 50, 100, 150)
	AutoContrast(p)
	check("autocontrast", p, 0, 127, 255)
	p = grey(2, 1, 9, 9)
	AutoContrast(p)
	check("autocontrast flat", p, 9, 9)

	p = grey(2, 2, 0, 1, 3, 255)
	Brightness(p, 0.5)
	check("brightness 0.5 truncates", p, 0, 0, 1, 127)
	p = grey(2, 1, 100, 200)
	Brightness(p, 1.9)
	check("brightness 1.9 clips", p, 190, 255)

	p = grey(2, 1, 0, 100) // mean 50
	Contrast(p, 0)
	check("contrast 0", p, 50, 50)
	p = grey(2, 1, 0, 100)
	Contrast(p, 2)
	check("contrast 2", p, 0, 150)

	// color 0: PIL's luma of pure red is 76.
	p = pixels{w: 1, h: 1, c: 3, pix: []uint8{255, 0, 0}}
	Color(p, 0)
	check("color 0", p, 76, 76, 76)
	p = pixels{w: 1, h: 1, c: 3, pix: []uint8{255, 0, 0}}
	Color(p, 1)
	check("color 1", p, 255, 0, 0)

	// sharpness 0 is the SMOOTH filter: centre (5·130)/13 = 50, border kept.
	var sc raScratch
	p = grey(3, 3, 0, 0, 0, 0, 130, 0, 0, 0, 0)
	Sharpness(p, 0, &sc)
	check("sharpness 0", p, 0, 0, 0, 0, 50, 0, 0, 0, 0)
	p = grey(3, 3, 0, 0, 0, 0, 130, 0, 0, 0, 0)
	Sharpness(p, 1.5, &sc) // 50 + 1.5·80 = 170
	check("sharpness 1.5", p, 0, 0, 0, 0, 170, 0, 0, 0, 0)
}

// Equalize, per channel: 255 pixels of 50, 255 of 100, 10 of 200 give step (520−10)/255 = 2 and
// the lut 50→0, 100→(1+255)/2 = 128, 200→(1+510)/2 = 255; the mirrored channel (10 of 55, 255 of
// 155 and 205) has step (520−255)/255 = 1: 55→0, 155→10, 205→265 clipped; a one-value channel is left alone.
func TestEqualizeGolden(t *testing.T) {
	n := 520
	p := pixels{w: n, h: 1, c: 3, pix: make([]uint8, 3*n)}
	for i := range n {
		v := uint8(50)
		switch {
		case i >= 510:
			v = 200
		case i >= 255:
			v = 100
		}
		p.pix[3*i], p.pix[3*i+1], p.pix[3*i+2] = v, 7, 255-v
	}
	Equalize(p)
	for i, want := range map[int][3]uint8{0: {0, 7, 255}, 300: {128, 7, 10}, 515: {255, 7, 0}} {
		if got := [3]uint8(p.pix[3*i : 3*i+3]); got != want {
			t.Errorf("pixel %d: %v, want %v", i, got, want)
		}
	}
	// Too few pixels for a step of 1: unchanged, as PIL.
	q := grey(3, 1, 10, 20, 30)
	Equalize(q)
	if !slices.Equal(q.pix, []uint8{10, 20, 30}) {
		t.Errorf("small image: %v", q.pix)
	}
}

func TestRandAugmentGeometry(t *testing.T) {
	var sc raScratch
	rng := rand.New(rand.NewPCG(1, 2))
	rgb := func(w, h int) pixels {
		p := pixels{w: w, h: h, c: 3, pix: make([]uint8, w*h*3)}
		for i := range p.pix {
			p.pix[i] = uint8(rng.IntN(256))
		}
		return p
	}
	at := func(p pixels, x, y int) [3]uint8 { return [3]uint8(p.pix[(y*p.w+x)*3:]) }

	// Integer translation moves pixels exactly and fills the uncovered column.
	src := rgb(4, 3)
	p := pixels{w: 4, h: 3, c: 3, pix: slices.Clone(src.pix)}
	affine(p, [6]float64{1, 0, 1, 0, 1, 0}, &sc)
	for y := range 3 {
		for x := range 4 {
			want := randFill
			if x < 3 {
				want = at(src, x+1, y)
			}
			if at(p, x, y) != want {
				t.Fatalf("translate: (%d,%d) %v, want %v", x, y, at(p, x, y), want)
			}
		}
	}

	// Half a pixel: bilinear averages neighbours, truncated as Pillow does; the last column falls outside.
	g := grey(4, 1, 0, 100, 201, 255)
	affine(g, [6]float64{1, 0, 0.5, 0, 1, 0}, &sc)
	if want := []uint8{50, 150, 228, 117}; !slices.Equal(g.pix, want) { // 117: the grey fill
		t.Errorf("half-pixel translate: %v, want %v", g.pix, want)
	}

	// Rotation by 180° is the two flips, by 90° counter-clockwise out(x, y) = in(w−1−y, x), by 0 the identity.
	src = rgb(5, 4)
	p = pixels{w: 5, h: 4, c: 3, pix: slices.Clone(src.pix)}
	Rotate(p, 180, &sc)
	for y := range 4 {
		for x := range 5 {
			if at(p, x, y) != at(src, 4-x, 3-y) {
				t.Fatalf("rotate 180: (%d,%d) %v, want %v", x, y, at(p, x, y), at(src, 4-x, 3-y))
			}
		}
	}
	src = rgb(5, 5)
	p = pixels{w: 5, h: 5, c: 3, pix: slices.Clone(src.pix)}
	Rotate(p, 90, &sc)
	for y := range 5 {
		for x := range 5 {
			if at(p, x, y) != at(src, 4-y, x) {
				t.Fatalf("rotate 90: (%d,%d) %v, want %v", x, y, at(p, x, y), at(src, 4-y, x))
			}
		}
	}
	p = pixels{w: 5, h: 5, c: 3, pix: slices.Clone(src.pix)}
	Rotate(p, 0, &sc)
	if !slices.Equal(p.pix, src.pix) {
		t.Error("rotate 0 changed the image")
	}

	// Shear of a flat image: flat where it samples inside, the fill where it leaves the image.
	flat := pixels{w: 8, h: 8, c: 3, pix: slices.Repeat([]uint8{10, 20, 30}, 64)}
	affine(flat, [6]float64{1, 0.3, 0, 0, 1, 0}, &sc)
	if at(flat, 0, 0) != [3]uint8{10, 20, 30} || at(flat, 7, 7) != randFill || at(flat, 7, 0) != [3]uint8{10, 20, 30} {
		t.Errorf("shear: corners %v %v %v", at(flat, 0, 0), at(flat, 7, 7), at(flat, 7, 0))
	}
	fills := 0
	for y := range 8 {
		for x := range 8 {
			if c := at(flat, x, y); c == randFill {
				fills++
				if float64(x)+0.5+0.3*(float64(y)+0.5) < 8 {
					t.Errorf("shear: (%d,%d) filled but samples inside", x, y)
				}
			} else if c != [3]uint8{10, 20, 30} {
				t.Errorf("shear: (%d,%d) = %v", x, y, c)
			}
		}
	}
	if fills == 0 {
		t.Error("shear 0.3 filled nothing")
	}
}

// The draws: each layer's op uniform over the 15, applied half the time, level N(M, S)/10 clipped.
func TestRandAugmentDraws(t *testing.T) {
	r, err := ParseRandAugment("rand-m9-mstd0.5-n2")
	if err != nil {
		t.Fatal(err)
	}
	var rng rand.PCG
	rng.Seed(3, 4)
	const trials = 20000
	var counts [numRAOps]int
	applied, sum, sumSq := 0, 0.0, 0.0
	for range trials {
		r.draw(&rng, func(op raOp, level float64) {
			counts[op]++
			applied++
			sum += level
			sumSq += level * level
			if level < 0 || level > 1 {
				t.Fatalf("level %g", level)
			}
		})
	}
	if f := float64(applied) / (2 * trials); math.Abs(f-0.5) > 0.01 {
		t.Errorf("applied fraction %.4f, want 0.5", f)
	}
	for op, n := range counts {
		if f := float64(n) / float64(applied); math.Abs(f-1.0/15) > 0.008 {
			t.Errorf("op %d chosen %.4f of the time, want 1/15", op, f)
		}
	}
	mean := sum / float64(applied)
	std := math.Sqrt(sumSq/float64(applied) - mean*mean)
	// N(0.9, 0.05) clipped at 1: mean 0.8996, std 0.049.
	if math.Abs(mean-0.8996) > 0.002 || math.Abs(std-0.049) > 0.003 {
		t.Errorf("level mean %.4f std %.4f, want about 0.8996 and 0.049", mean, std)
	}
}

// In the transform: seeded per example (same generator state, same bytes), and it changes images.
func TestTransformRandAugmentSeeded(t *testing.T) {
	ra, err := ParseRandAugment("rand-m9-mstd0.5-inc1")
	if err != nil {
		t.Fatal(err)
	}
	src := pixels{w: 20, h: 16, c: 3, pix: make([]uint8, 20*16*3)}
	for i := range src.pix {
		src.pix[i] = uint8(i * 37 % 251)
	}
	tf := Transform{Size: 12, Train: true, Scale: [2]float64{0.5, 1}, Ratio: [2]float64{0.75, 4.0 / 3}, HFlip: 0.5}
	plain, withRA := tf, tf
	withRA.RandAugment = &ra
	if err := withRA.Validate(); err != nil {
		t.Fatal(err)
	}
	run := func(tf Transform, pos int) []uint8 {
		var sc augScratch
		exampleRNG(&sc.rng, 7, 1, pos)
		out, err := tf.apply(src, &sc.rng, &sc)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(out.pix)
	}
	changed := 0
	for pos := range 40 {
		a, b := run(withRA, pos), run(withRA, pos)
		if !slices.Equal(a, b) {
			t.Fatalf("example %d: two runs differ", pos)
		}
		if !slices.Equal(a, run(plain, pos)) {
			changed++
		}
	}
	// P(no op applied) = 1/4, and a few ops can be no-ops: expect about 30 of 40 changed.
	if changed < 22 || changed > 36 {
		t.Errorf("RandAugment changed %d of 40 examples, want about 30", changed)
	}
	// Eval ignores it.
	eval := withRA
	eval.Train = false
	plainEval := plain
	plainEval.Train = false
	if !slices.Equal(run(eval, 0), run(plainEval, 0)) {
		t.Error("RandAugment ran in eval")
	}
}

// BenchmarkRandAugment224 is the average per-image cost at 224 (rand-m9-mstd0.5-inc1: one op on average).
func BenchmarkRandAugment224(b *testing.B) {
	ra := RandAugment{Magnitude: 9, NumOps: 2, MagnitudeStd: 0.5, Increasing: true}
	p := benchImage224()
	var sc raScratch
	var rng rand.PCG
	rng.Seed(1, 2)
	b.ResetTimer()
	for range b.N {
		ra.apply(p, &rng, &sc)
	}
}

// benchImage224 is a 224×224 RGB image of varied bytes for the augmentation benchmarks.
func benchImage224() pixels {
	p := pixels{w: 224, h: 224, c: 3, pix: make([]uint8, 224*224*3)}
	for i := range p.pix {
		p.pix[i] = uint8(i * 37 % 251)
	}
	return p
}

// TestRandAugmentInterpolation: bilinear and bicubic resample every geometric op with that filter (the
// filters themselves are byte-checked against Pillow in TestRandAugmentOpsMatchPillow); random picks one
// of the two per op, each about half the time, as timm's random choice.
func TestRandAugmentInterpolation(t *testing.T) {
	for i, name := range RAInterpolations {
		if got, err := ParseRAInterpolation(name); err != nil || got != RAInterpolation(i) {
			t.Errorf("ParseRAInterpolation(%q) = %v, %v", name, got, err)
		}
	}
	if got, err := ParseRAInterpolation(""); err != nil || got != RABilinear {
		t.Errorf("empty: %v, %v, want bilinear", got, err)
	}
	if _, err := ParseRAInterpolation("lanczos"); err == nil || !strings.Contains(err.Error(), "bilinear, bicubic, random") {
		t.Errorf("lanczos: %v", err)
	}
	src := pixels{w: 13, h: 11, c: 3, pix: make([]uint8, 13*11*3)}
	for i := range src.pix {
		src.pix[i] = uint8(i * 37 % 251)
	}
	// A translation by ±0.5·0.45·13 = ±2.925 px, resampled either way.
	shifted := func(shift float64, bicubic bool) []uint8 {
		p := pixels{w: src.w, h: src.h, c: 3, pix: slices.Clone(src.pix)}
		affineWith(p, [6]float64{1, 0, shift, 0, 1, 0}, bicubic, &raScratch{})
		return p.pix
	}
	type outcome struct{ bicubic, neg bool }
	candidates := map[outcome][]uint8{}
	for _, o := range []outcome{{false, false}, {false, true}, {true, false}, {true, true}} {
		s := 2.925
		if o.neg {
			s = -s
		}
		candidates[o] = shifted(s, o.bicubic)
	}
	if slices.Equal(candidates[outcome{false, false}], candidates[outcome{true, false}]) {
		t.Fatal("bilinear and bicubic give the same bytes: the test cannot tell them apart")
	}
	var rng rand.PCG
	rng.Seed(5, 6)
	for _, c := range []struct {
		interp     RAInterpolation
		minB, maxB int // bicubic outcomes of 400
	}{{RABilinear, 0, 0}, {RABicubic, 400, 400}, {RARandom, 160, 240}} {
		r := RandAugment{Magnitude: 5, NumOps: 1, Interpolation: c.interp}
		bicubics := 0
		for range 400 {
			p := pixels{w: src.w, h: src.h, c: 3, pix: slices.Clone(src.pix)}
			r.applyOp(opTranslateXRel, 0.5, p, &rng, &raScratch{})
			found := false
			for o, want := range candidates {
				if slices.Equal(p.pix, want) {
					found = true
					if o.bicubic {
						bicubics++
					}
				}
			}
			if !found {
				t.Fatalf("%s: the op's output is neither filter's translation", RAInterpolations[c.interp])
			}
		}
		if bicubics < c.minB || bicubics > c.maxB {
			t.Errorf("%s: %d of 400 ops bicubic, want %d..%d", RAInterpolations[c.interp], bicubics, c.minB, c.maxB)
		}
	}
}
