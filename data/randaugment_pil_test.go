package data

import (
	"encoding/json"
	"os"
	"testing"
)

// TestRandAugmentOpsMatchPillow applies each RandAugment op to a fixed image and compares with what
// Pillow (the library timm's RandAugment calls) made of the same image, recorded in
// testdata/randaugment_pil.json by scripts/pil_randaugment_golden.py: every op, geometric ones included,
// must give Pillow's bytes exactly.
func TestRandAugmentOpsMatchPillow(t *testing.T) {
	raw, err := os.ReadFile("testdata/randaugment_pil.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Pillow        string
		Width, Height int
		Input         []uint8
		Cases         map[string][]uint8
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	sc := &raScratch{}
	ops := map[string]func(p pixels){
		"invert":          Invert,
		"posterize_3":     func(p pixels) { Posterize(p, 3) },
		"solarize_100":    func(p pixels) { Solarize(p, 100) },
		"solarize_add_60": func(p pixels) { SolarizeAdd(p, 60, 128) },
		"autocontrast":    AutoContrast,
		"equalize":        Equalize,
		"color_0.3":       func(p pixels) { Color(p, 0.3) },
		"color_1.7":       func(p pixels) { Color(p, 1.7) },
		"contrast_1.6":    func(p pixels) { Contrast(p, 1.6) },
		"brightness_0.6":  func(p pixels) { Brightness(p, 0.6) },
		"sharpness_1.8":   func(p pixels) { Sharpness(p, 1.8, sc) },
		"rotate_30":       func(p pixels) { Rotate(p, 30, sc) },
		"rotate_180":      func(p pixels) { Rotate(p, 180, sc) },
		"rotate_-12.5":    func(p pixels) { Rotate(p, -12.5, sc) },
		"shear_x_0.3":     func(p pixels) { affine(p, [6]float64{1, 0.3, 0, 0, 1, 0}, sc) },
		"shear_y_-0.2":    func(p pixels) { affine(p, [6]float64{1, 0, 0, -0.2, 1, 0}, sc) },
		"translate_x_3.5": func(p pixels) { affine(p, [6]float64{1, 0, 3.5, 0, 1, 0}, sc) },
		// timm's RandAugment given bicubic (RSB-A3's geometry): the same ops through Pillow's BICUBIC.
		"rotate_30_bicubic":         func(p pixels) { rotate(p, 30, true, sc) },
		"rotate_-12.5_bicubic":      func(p pixels) { rotate(p, -12.5, true, sc) },
		"shear_x_0.3_bicubic":       func(p pixels) { affineWith(p, [6]float64{1, 0.3, 0, 0, 1, 0}, true, sc) },
		"shear_y_-0.2_bicubic":      func(p pixels) { affineWith(p, [6]float64{1, 0, 0, -0.2, 1, 0}, true, sc) },
		"translate_x_3.5_bicubic":   func(p pixels) { affineWith(p, [6]float64{1, 0, 3.5, 0, 1, 0}, true, sc) },
		"translate_y_-4.25_bicubic": func(p pixels) { affineWith(p, [6]float64{1, 0, 0, 0, 1, -4.25}, true, sc) },
	}
	for name, want := range golden.Cases {
		op, ok := ops[name]
		if !ok {
			t.Errorf("no Go op for Pillow case %s", name)
			continue
		}
		p := pixels{w: golden.Width, h: golden.Height, c: 3, pix: append([]uint8(nil), golden.Input...)}
		op(p)
		worst, off := 0, 0
		for i := range want {
			d := int(p.pix[i]) - int(want[i])
			if d < 0 {
				d = -d
			}
			if d > 0 {
				off++
			}
			worst = max(worst, d)
		}
		t.Logf("%-16s max |ours - Pillow %s| = %d levels, %d of %d values differ", name, golden.Pillow, worst, off, len(want))
		if worst > 0 {
			t.Errorf("%s: differs from Pillow by up to %d levels (%d of %d values)", name, worst, off, len(want))
		}
	}
}
