package data

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
)

// aaGolden is testdata/autoaugment_pil.json, written by scripts/pil_autoaugment_golden.py from
// torchvision 0.14's AutoAugment and Pillow 9.4.
type aaGolden struct {
	Pillow, Torchvision string
	Policy              [][2][3]any // [op name, probability, bin or null]
	Space               []struct {
		Width, Height int
		Ops           map[string]struct {
			Signed bool
			Mags   []float64
		}
	}
	Translate map[string][]float64 // side: TranslateY's bins for a square of that side
	Matrices  [][6]any             // [width, height, op, bin, negative, matrix or null]
	Images    []struct {
		Mode          string
		Width, Height int
		Input         []byte
		Cases         []struct {
			Op                 string
			Bin                *int
			Negative, Bilinear bool
			Output             []byte
		}
		Affine []struct {
			Matrix [6]float64
			Output []byte
		}
		Apply []struct {
			Seed     [2]uint64
			Bilinear bool
			Sub      int
			Probs    [2]float64
			Negative [2]bool
			Sha256   string
		}
	}
}

func loadAAGolden(t *testing.T) aaGolden {
	t.Helper()
	raw, err := os.ReadFile("testdata/autoaugment_pil.json")
	if err != nil {
		t.Fatal(err)
	}
	var g aaGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func aaOpNamed(t *testing.T, name string) aaOp {
	t.Helper()
	i := slices.Index(aaOpNames[:], name)
	if i < 0 {
		t.Fatalf("torchvision op %q has no Go op", name)
	}
	return aaOp(i)
}

// diffBytes reports the largest difference and how many values differ.
func diffBytes(got, want []byte) (worst, off int) {
	if len(got) != len(want) {
		return 256, max(len(got), len(want))
	}
	for i := range want {
		d := int(got[i]) - int(want[i])
		if d != 0 {
			off++
			worst = max(worst, d, -d)
		}
	}
	return worst, off
}

// The policy table and the magnitude bins are torchvision's, value for value.
func TestAutoAugmentTablesMatchTorchvision(t *testing.T) {
	g := loadAAGolden(t)
	if len(g.Policy) != len(aaImageNet) || len(aaImageNet) != 25 {
		t.Fatalf("%d sub-policies in Go, %d in torchvision %s, want 25", len(aaImageNet), len(g.Policy), g.Torchvision)
	}
	for i, sub := range g.Policy {
		for j, step := range sub {
			want := aaStep{op: aaOpNamed(t, step[0].(string)), prob: step[1].(float64), bin: -1}
			if step[2] != nil {
				want.bin = int8(step[2].(float64))
			}
			if got := aaImageNet[i][j]; got != want {
				t.Errorf("sub-policy %d step %d: %v %g bin %d, torchvision %v %g bin %d", i, j, got.op, got.prob, got.bin, want.op, want.prob, want.bin)
			}
		}
	}
	checked := 0
	for _, sp := range g.Space {
		for name, o := range sp.Ops {
			op := aaOpNamed(t, name)
			if op.signed() != o.Signed {
				t.Errorf("%v: signed %v, torchvision %v", op, op.signed(), o.Signed)
			}
			if len(o.Mags) == 1 { // the ops without a magnitude
				continue
			}
			for bin, want := range o.Mags {
				if got := aaMagnitude(op, bin, sp.Width, sp.Height); got != want {
					t.Errorf("%v bin %d at %dx%d: %.17g, torchvision %.17g", op, bin, sp.Width, sp.Height, got, want)
				}
				checked++
			}
		}
	}
	for side, mags := range g.Translate {
		n, err := strconv.Atoi(side)
		if err != nil || len(mags) != 10 {
			t.Fatalf("translate bins for side %q: %v, %d bins", side, err, len(mags))
		}
		for bin, want := range mags {
			if got := aaMagnitude(aaTranslateY, bin, 1, n); got != want {
				t.Errorf("TranslateY bin %d at side %d: %.17g, torchvision %.17g", bin, n, got, want)
			}
			checked++
		}
	}
	if checked < 5*10*len(g.Space)+10*20 {
		t.Errorf("checked only %d magnitudes", checked)
	}
}

// The matrix of every geometric (op, bin, sign), at a size with a half-pixel centre and at 224², is
// the one torchvision hands to PIL, bit for bit; null means Pillow copied (rotation by 0°).
func TestAutoAugmentMatricesMatchTorchvision(t *testing.T) {
	g := loadAAGolden(t)
	if len(g.Matrices) < 200 {
		t.Fatalf("%d matrices in the golden", len(g.Matrices))
	}
	var sc raScratch
	for _, e := range g.Matrices {
		w, h := int(e[0].(float64)), int(e[1].(float64))
		op, bin, neg := aaOpNamed(t, e[2].(string)), int(e[3].(float64)), e[4].(bool)
		mag := aaMagnitude(op, bin, w, h)
		if neg {
			mag = -mag
		}
		p := pixels{w: w, h: h, c: 1, pix: make([]uint8, w*h)}
		m, copied := aaGeometry(op, mag, p, &sc)
		if e[5] == nil {
			if !copied {
				t.Errorf("%v bin %d neg %v at %dx%d: matrix %v, Pillow copied", op, bin, neg, w, h, m)
			}
			continue
		}
		var want [6]float64
		for i, v := range e[5].([]any) {
			want[i] = v.(float64)
		}
		if copied || m != want {
			t.Errorf("%v bin %d neg %v at %dx%d: %v (copied %v), torchvision %v", op, bin, neg, w, h, m, copied, want)
		}
	}
}

// Every (op, bin, sign) the policy uses, the other ops at bin 9, on a real photo (RGB and grey), nearest
// and bilinear: Pillow's bytes exactly; and PIL nearest-neighbour transforms through each of Pillow's
// three code paths.
func TestAutoAugmentOpsMatchPillow(t *testing.T) {
	g := loadAAGolden(t)
	var sc raScratch
	used := map[[2]int]bool{}
	for _, sub := range aaImageNet {
		for _, st := range sub {
			used[[2]int{int(st.op), int(st.bin)}] = false
		}
	}
	for _, im := range g.Images {
		c := map[string]int{"RGB": 3, "L": 1}[im.Mode]
		input := func() pixels {
			return pixels{w: im.Width, h: im.Height, c: c, pix: slices.Clone(im.Input)}
		}
		for _, cs := range im.Cases {
			op, bin := aaOpNamed(t, cs.Op), -1
			mag := 0.0
			if cs.Bin != nil {
				bin = *cs.Bin
				mag = aaMagnitude(op, bin, im.Width, im.Height)
			}
			if cs.Negative {
				mag = -mag
			}
			if _, ok := used[[2]int{int(op), bin}]; ok && im.Mode == "RGB" {
				used[[2]int{int(op), bin}] = true
			}
			p := input()
			AutoAugment{Bilinear: cs.Bilinear}.applyOp(op, mag, p, &sc)
			if worst, off := diffBytes(p.pix, cs.Output); worst > 0 {
				t.Errorf("%s %v bin %d neg %v bilinear %v: differs from Pillow %s by up to %d levels (%d of %d values)",
					im.Mode, op, bin, cs.Negative, cs.Bilinear, g.Pillow, worst, off, len(cs.Output))
			}
		}
		if len(im.Affine) < 4 {
			t.Errorf("%s: %d affine cases", im.Mode, len(im.Affine))
		}
		for _, a := range im.Affine {
			p := input()
			affineNearest(p, a.Matrix, &sc)
			if worst, off := diffBytes(p.pix, a.Output); worst > 0 {
				t.Errorf("%s nearest affine %v: differs from Pillow by up to %d levels (%d values)", im.Mode, a.Matrix, worst, off)
			}
		}
		t.Logf("%s %dx%d: %d op cases and %d affine transforms compared with Pillow %s", im.Mode, im.Width, im.Height,
			len(im.Cases), len(im.Affine), g.Pillow)
	}
	for k, seen := range used {
		if !seen {
			t.Errorf("the policy's %v bin %d has no Pillow case", aaOp(k[0]), k[1])
		}
	}
}

// Whole apply() calls: the draws from the seeded generator are the ones the golden fed to
// torchvision's AutoAugment.forward, and the result has the same SHA-256.
func TestAutoAugmentApplyMatchesTorchvision(t *testing.T) {
	g := loadAAGolden(t)
	var sc raScratch
	subs := map[int]bool{}
	for _, im := range g.Images {
		c := map[string]int{"RGB": 3, "L": 1}[im.Mode]
		changed := 0
		for _, a := range im.Apply {
			var rng rand.PCG
			rng.Seed(a.Seed[0], a.Seed[1])
			d := drawAA(&rng, len(aaImageNet))
			if d.sub != a.Sub || d.probs != a.Probs || d.neg != a.Negative {
				t.Fatalf("seed %v: draws %+v, golden sub %d probs %v neg %v (the Python PCG port disagrees)", a.Seed, d, a.Sub, a.Probs, a.Negative)
			}
			subs[d.sub] = true
			p := pixels{w: im.Width, h: im.Height, c: c, pix: slices.Clone(im.Input)}
			rng.Seed(a.Seed[0], a.Seed[1])
			AutoAugment{Policy: "imagenet", Bilinear: a.Bilinear}.apply(p, &rng, &sc)
			sum := sha256.Sum256(p.pix)
			if got := hex.EncodeToString(sum[:]); got != a.Sha256 {
				t.Errorf("%s seed %v bilinear %v (sub-policy %d %v, probs %.3f, neg %v): output differs from torchvision's",
					im.Mode, a.Seed, a.Bilinear, d.sub, aaImageNet[d.sub], d.probs, d.neg)
			}
			if !slices.Equal(p.pix, im.Input) {
				changed++
			}
		}
		t.Logf("%s: %d apply calls, %d changed the image", im.Mode, len(im.Apply), changed)
		if changed < len(im.Apply)/3 {
			t.Errorf("%s: only %d of %d calls changed the image", im.Mode, changed, len(im.Apply))
		}
	}
	if len(subs) < 15 {
		t.Errorf("the golden reaches only %d of 25 sub-policies", len(subs))
	}
}
