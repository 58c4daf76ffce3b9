package data

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"image"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

var torchRatio = [2]float64{3.0 / 4, 4.0 / 3}

// The crop boxes are pinned: they are part of what makes a resumed run draw the same augmentation.
func TestRandomResizedCropParamsGolden(t *testing.T) {
	rng := rand.NewPCG(1, 2)
	var got [][4]int
	for range 4 {
		x, y, w, h := RandomResizedCropParams(400, 350, [2]float64{0.08, 1}, torchRatio, rng)
		got = append(got, [4]int{x, y, w, h})
	}
	want := [][4]int{{46, 23, 343, 321}, {100, 59, 178, 232}, {109, 110, 154, 184}, {66, 88, 271, 230}}
	if !slices.Equal(got, want) {
		t.Errorf("boxes %v, want %v", got, want)
	}
	// Properties over many draws: inside the image, area and ratio within range (up to rounding).
	for i := range 2000 {
		x, y, w, h := RandomResizedCropParams(400, 350, [2]float64{0.25, 0.5}, torchRatio, rng)
		area, ratio := float64(w*h)/(400*350), float64(w)/float64(h)
		if x < 0 || y < 0 || x+w > 400 || y+h > 350 || area < 0.24 || area > 0.51 || ratio < 0.74 || ratio > 1.35 {
			t.Fatalf("draw %d: box (%d,%d) %dx%d: area %.3f ratio %.3f", i, x, y, w, h, area, ratio)
		}
	}
	// A 1000x10 strip cannot hold a box of ratio <= 4/3 and area >= 0.9: the fallback centers 13x10.
	if x, y, w, h := RandomResizedCropParams(1000, 10, [2]float64{0.9, 1}, torchRatio, rng); [4]int{x, y, w, h} != [4]int{493, 0, 13, 10} {
		t.Errorf("fallback box (%d,%d) %dx%d, want (493,0) 13x10", x, y, w, h)
	}
}

func TestHFlip(t *testing.T) {
	p := pixels{w: 3, h: 2, c: 2, pix: []uint8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}
	HFlip(p)
	if want := []uint8{5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8}; !slices.Equal(p.pix, want) {
		t.Errorf("flipped %v, want %v", p.pix, want)
	}
}

// The whole training transform at a fixed seed is pinned by a hash of its output, and differs
// between seeds, epochs and positions.
func TestTransformGolden(t *testing.T) {
	src := toPixels(testImage(97, 61, 3), 3)
	tf := Transform{Size: 16, Train: true, Scale: [2]float64{0.08, 1}, Ratio: torchRatio, HFlip: 0.5}
	hash := func(tf Transform, seed uint64, epoch, pos int) uint64 {
		var sc augScratch
		exampleRNG(&sc.rng, seed, epoch, pos)
		out, err := tf.apply(src, &sc.rng, &sc)
		if err != nil {
			t.Fatal(err)
		}
		if out.w != 16 || out.h != 16 || out.c != 3 {
			t.Fatalf("output %dx%dx%d", out.w, out.h, out.c)
		}
		h := fnv.New64a()
		h.Write(out.pix)
		return h.Sum64()
	}
	got := []uint64{hash(tf, 7, 0, 0), hash(tf, 7, 0, 1), hash(tf, 7, 1, 0), hash(tf, 8, 0, 0)}
	want := []uint64{0xafdfe0e5c450666b, 0x38a8ce00060f3245, 0xa396ec3b10b61e37, 0x23de908fcc96f3fe}
	if !slices.Equal(got, want) {
		t.Errorf("hashes %#x, want %#x", got, want)
	}
	if hash(tf, 7, 0, 0) != got[0] {
		t.Error("the same (seed, epoch, position) gave another output")
	}
	tf.Interp = Bicubic
	if hash(tf, 7, 0, 0) == got[0] {
		t.Error("bicubic gave the bilinear output")
	}
	// Eval: resize + center crop, no randomness.
	ev := Transform{Size: 16, CropPct: 0.875}
	if hash(ev, 1, 0, 0) != hash(ev, 2, 5, 9) {
		t.Error("the eval transform depends on the seed")
	}
}

func TestToPixelsFastPaths(t *testing.T) {
	src := testImage(37, 23, 1)
	var buf bytes.Buffer
	jpeg.Encode(&buf, src, &jpeg.Options{Quality: 90})
	ycc, _, err := image.Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	gray := image.NewGray(src.Bounds())
	for i := range gray.Pix {
		gray.Pix[i] = uint8(i * 7)
	}
	sub := ycc.(*image.YCbCr).SubImage(image.Rect(3, 5, 20, 17))
	cases := map[string]image.Image{"ycbcr": ycc, "ycbcr sub-image": sub, "gray": gray, "nrgba": src}
	for _, r := range []image.YCbCrSubsampleRatio{image.YCbCrSubsampleRatio444, image.YCbCrSubsampleRatio422,
		image.YCbCrSubsampleRatio440, image.YCbCrSubsampleRatio411} {
		m := image.NewYCbCr(image.Rect(1, 2, 30, 21), r)
		for i := range m.Y {
			m.Y[i] = uint8(i * 13)
		}
		for i := range m.Cb {
			m.Cb[i], m.Cr[i] = uint8(i*29), uint8(255-i*7)
		}
		cases[r.String()] = m
		cases[r.String()+" sub-image"] = m.SubImage(image.Rect(4, 3, 25, 20))
	}
	for name, img := range cases {
		for _, c := range []int{1, 3} {
			if got, want := toPixelsInto(img, c, nil), toPixels(img, c); !slices.Equal(got.pix, want.pix) || got.w != want.w {
				t.Errorf("%s, %d channels: the fast path differs from the generic conversion", name, c)
			}
		}
	}
}

// pilCropScript applies torchvision's resized_crop to PNG files and writes the uint8 HWC results.
const pilCropScript = `
import sys, json
import numpy as np
from PIL import Image
from torchvision.transforms import functional as F, InterpolationMode as I
for j in json.loads(sys.argv[1]):
    img = Image.open(j["src"]).convert("RGB")
    out = F.resized_crop(img, j["top"], j["left"], j["h"], j["w"], [j["size"], j["size"]],
                         interpolation=I.BICUBIC if j["bicubic"] else I.BILINEAR)
    np.asarray(out, dtype=np.uint8).tofile(j["dst"])
`

// Our crop + resize gives torchvision's bytes, bilinear and bicubic, down- and upscaling.
func TestResizedCropMatchesTorchvision(t *testing.T) {
	if testing.Short() {
		t.Skip("runs torchvision in a subprocess")
	}
	python := torchvisionPython()
	if python == "" {
		t.Skip("no python3 with torch, torchvision and PIL (set TRAINER_TORCH_PYTHON)")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "in.png")
	img := testImage(131, 97, 5)
	writePNG(t, src, img)
	boxes := [][5]int{{10, 20, 80, 60, 32}, {0, 0, 131, 97, 224}, {50, 30, 7, 9, 24}, {3, 1, 120, 90, 56}}
	var jobs []map[string]any
	for i, b := range boxes {
		for _, bicubic := range []bool{false, true} {
			jobs = append(jobs, map[string]any{"src": src, "left": b[0], "top": b[1], "w": b[2], "h": b[3], "size": b[4],
				"bicubic": bicubic, "dst": filepath.Join(dir, fmt.Sprintf("out%d%v.u8", i, bicubic))})
		}
	}
	arg, _ := json.Marshal(jobs)
	if out, err := exec.Command(python, "-c", pilCropScript, string(arg)).CombinedOutput(); err != nil {
		t.Fatalf("torchvision: %v\n%s", err, out)
	}
	p := toPixels(img, 3)
	for _, j := range jobs {
		want, err := os.ReadFile(j["dst"].(string))
		if err != nil {
			t.Fatal(err)
		}
		interp := Bilinear
		if j["bicubic"].(bool) {
			interp = Bicubic
		}
		var tmp, dst []uint8
		crop := cropPixels(p, j["left"].(int), j["top"].(int), j["w"].(int), j["h"].(int), nil)
		got := resize(crop, j["size"].(int), j["size"].(int), interp, &tmp, &dst)
		worst := 0.0
		for i := range want {
			worst = math.Max(worst, math.Abs(float64(got.pix[i])-float64(want[i])))
		}
		if len(got.pix) != len(want) || worst > 0 {
			t.Errorf("box %v %v -> %d: %d bytes, torchvision %d; largest difference %g levels",
				[]any{j["left"], j["top"], j["w"], j["h"]}, interp, j["size"], len(got.pix), len(want), worst)
		}
	}
}
