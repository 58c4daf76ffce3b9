package data

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testImage is a w×h RGBA picture with gradients, stripes, noise and a partly transparent corner.
func testImage(w, h int, seed uint64) *image.NRGBA {
	rng := rand.New(rand.NewPCG(seed, 9))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			r := uint8(255 * x / max(w-1, 1))
			g := uint8(255 * y / max(h-1, 1))
			b := uint8(rng.IntN(256))
			if (x/3+y/5)%2 == 0 {
				r = 255 - r
			}
			a := uint8(255)
			if x < w/4 && y < h/4 {
				a = 100
			}
			img.SetNRGBA(x, y, color.NRGBA{R: r, G: g, B: b, A: a})
		}
	}
	return img
}

func writePNG(t testing.TB, path string, img image.Image) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

// ImageNet's channel statistics and torchvision's eval crop (resize 256, crop 224), the RGB nets'
// eval preprocessing in the graphs registry.
var (
	imageNetMean = []float64{0.485, 0.456, 0.406}
	imageNetStd  = []float64{0.229, 0.224, 0.225}
)

func imageNetEval(size int) EvalTransform {
	return EvalTransform{Size: size, CropPct: 0.875, Mean: imageNetMean, Std: imageNetStd}
}

func TestResizeSize(t *testing.T) {
	for size, want := range map[int]int{224: 256, 32: 36, 256: 292, 288: 329} {
		if got := imageNetEval(size).ResizeSize(); got != want {
			t.Errorf("size %d: resize to %d, want %d", size, got, want)
		}
	}
	if got := (EvalTransform{Size: 28, CropPct: 1}).ResizeSize(); got != 28 {
		t.Errorf("crop_pct 1: resize to %d", got)
	}
}

func TestConstantImageNormalises(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 50, 37))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = 200, 100, 0, 255
	}
	out, err := imageNetEval(16).Apply(img)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 16*16*3 {
		t.Fatalf("%d values", len(out))
	}
	for i, v := range out {
		c := i % 3
		want := (float32([]float64{200, 100, 0}[c])/255 - float32(imageNetMean[c])) / float32(imageNetStd[c])
		if v != want {
			t.Fatalf("value %d (channel %d) = %v, want %v", i, c, v, want)
		}
	}
}

func TestEvalTransformErrors(t *testing.T) {
	img := image.NewGray(image.Rect(0, 0, 8, 8))
	for _, tr := range []EvalTransform{
		{Size: 0, CropPct: 1, Mean: []float64{0}, Std: []float64{1}},
		{Size: 4, CropPct: 1.5, Mean: []float64{0}, Std: []float64{1}},
		{Size: 4, CropPct: 1, Mean: []float64{0, 0}, Std: []float64{1, 1}},
		{Size: 4, CropPct: 1, Mean: []float64{0}, Std: []float64{0}},
	} {
		if _, err := tr.Apply(img); err == nil {
			t.Errorf("%+v accepted", tr)
		}
	}
	path := filepath.Join(t.TempDir(), "x.png")
	os.WriteFile(path, []byte("not an image"), 0o644)
	if _, err := imageNetEval(4).LoadFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("undecodable file: %v", err)
	}
}

// pilScript applies torchvision's eval transform to PNG files and writes the float32 results; its
// argument is a JSON list of jobs.
const pilScript = `
import sys, json
from PIL import Image
from torchvision import transforms as T
for j in json.loads(sys.argv[1]):
    interp = T.InterpolationMode.BICUBIC if j["interp"] == "bicubic" else T.InterpolationMode.BILINEAR
    tf = T.Compose([T.Resize(j["resize"], interp), T.CenterCrop(j["size"]), T.ToTensor(), T.Normalize(j["mean"], j["std"])])
    x = tf(Image.open(j["src"]).convert(j["mode"]))
    x.permute(1, 2, 0).contiguous().numpy().astype("<f4").tofile(j["dst"])
`

func torchvisionPython() string {
	for _, p := range []string{os.Getenv("TRAINER_TORCH_PYTHON"), "/usr/bin/python3"} {
		if p != "" && exec.Command(p, "-c", "import torch, torchvision, PIL").Run() == nil {
			return p
		}
	}
	return ""
}

// Our transform reproduces torchvision's (PIL's bilinear resampling included) on PNG input: the
// decoded pixels are the same, so any difference is in the resize, the crop or the normalisation.
func TestEvalTransformMatchesTorchvision(t *testing.T) {
	if testing.Short() {
		t.Skip("runs torchvision in a subprocess")
	}
	python := torchvisionPython()
	if python == "" {
		t.Skip("no python3 with torch, torchvision and PIL (set TRAINER_TORCH_PYTHON)")
	}
	dir := t.TempDir()
	cases := []struct {
		name string
		w, h int
		tr   EvalTransform
	}{
		{"landscape 224", 500, 375, imageNetEval(224)},
		{"portrait 64", 97, 131, imageNetEval(64)},
		{"upscale", 20, 30, imageNetEval(32)},
		{"bicubic", 131, 97, EvalTransform{Size: 48, CropPct: 0.9, Mean: imageNetMean, Std: imageNetStd, Interp: Bicubic}},
		{"grey crop 1", 61, 45, EvalTransform{Size: 28, CropPct: 1, Mean: []float64{0.1307}, Std: []float64{0.3081}}},
	}
	var jobs []map[string]any
	for i, c := range cases {
		src := filepath.Join(dir, fmt.Sprintf("in%d.png", i))
		writePNG(t, src, testImage(c.w, c.h, uint64(i)))
		mode := "RGB"
		if len(c.tr.Mean) == 1 {
			mode = "L"
		}
		jobs = append(jobs, map[string]any{"size": c.tr.Size, "resize": c.tr.ResizeSize(), "mode": mode,
			"interp": c.tr.Interp.String(), "mean": c.tr.Mean, "std": c.tr.Std, "src": src, "dst": src + ".f32"})
	}
	arg, _ := json.Marshal(jobs)
	if out, err := exec.Command(python, "-c", pilScript, string(arg)).CombinedOutput(); err != nil {
		t.Fatalf("torchvision: %v\n%s", err, out)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := jobs[i]["src"].(string)
			raw, err := os.ReadFile(src + ".f32")
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.tr.LoadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) != 4*len(got) {
				t.Fatalf("torchvision gives %d values, we give %d", len(raw)/4, len(got))
			}
			var worst float64
			for j := range got {
				want := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
				// Differences in units of one 8-bit level of the channel.
				level := math.Abs(float64(got[j]-want)) * c.tr.Std[j%len(c.tr.Std)] * 255
				worst = math.Max(worst, level)
			}
			t.Logf("%dx%d -> %d: largest difference %.3g of an 8-bit level", c.w, c.h, c.tr.Size, worst)
			if worst > 1e-3 {
				t.Errorf("differs from torchvision by up to %.3g of an 8-bit level", worst)
			}
		})
	}
}

// TestResizeOutputBoundedBeforeAllocation: what a resize makes of an image is computed and checked
// against the pixel limit before anything is allocated. A 20000×1 image, 20000 pixels, resized to a
// shorter side of 256 would be 5,120,000×256 (3.9 GB as RGB): the eval transform (predict), the
// loader's resize-and-crop and a NaN or 1e-300 crop fraction (which panicked in the resampler) are
// refused with an error wrapping ErrTooManyPixels (a bad record in the loader), and an ordinary image
// still resizes.
func TestResizeOutputBoundedBeforeAllocation(t *testing.T) {
	strip := image.NewGray(image.Rect(0, 0, 20000, 1))
	tr := imageNetEval(224)
	if _, err := tr.Apply(strip); !errors.Is(err, ErrTooManyPixels) || !strings.Contains(err.Error(), "20000x1") {
		t.Errorf("eval transform of a 20000x1 image: %v, want ErrTooManyPixels naming its size", err)
	}
	for _, pct := range []float64{math.NaN(), 1e-300} {
		tr.CropPct = pct
		if _, err := tr.Apply(testImage(40, 30, 3)); err == nil {
			t.Errorf("crop_pct %g: no error", pct)
		}
	}
	tf := Transform{Size: 224, CropPct: 0.875}
	var sc augScratch
	if _, err := tf.apply(toPixels(strip, 3), &sc.rng, &sc); !errors.Is(err, ErrTooManyPixels) || !errors.Is(err, ErrBadRecord) {
		t.Errorf("loader resize of a 20000x1 image: %v, want a bad record wrapping ErrTooManyPixels", err)
	}
	tf.CropPct = 1e-300
	if _, err := tf.apply(toPixels(testImage(40, 30, 3), 3), &sc.rng, &sc); !errors.Is(err, ErrTooManyPixels) {
		t.Errorf("loader resize at crop_pct 1e-300: %v, want ErrTooManyPixels", err)
	}
	tf = Transform{Size: 16, CropPct: 0.875, MaxPixels: 18 * 36}
	if out, err := tf.apply(toPixels(testImage(40, 80, 3), 3), &sc.rng, &sc); err != nil || out.w != 16 || out.h != 16 {
		t.Errorf("a 40x80 image to 18x36 under a limit of exactly that: %dx%d, %v; want 16x16", out.w, out.h, err)
	}
	tf.MaxPixels--
	if _, err := tf.apply(toPixels(testImage(40, 80, 3), 3), &sc.rng, &sc); !errors.Is(err, ErrTooManyPixels) {
		t.Errorf("a 40x80 image to 18x36 under a limit one pixel short: %v, want ErrTooManyPixels", err)
	}
}
