package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"

	"github.com/trainer/trainer/data"
)

// TestDataBenchPrintsCoresNeeded: data bench states its rate, its rate per CPU-second, the cores a
// target rate needs at that rate (rounded up), and the decoder it ran.
func TestDataBenchPrintsCoresNeeded(t *testing.T) {
	dir := t.TempDir()
	for c := range 2 {
		class := filepath.Join(dir, fmt.Sprintf("c%d", c))
		if err := os.MkdirAll(class, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			img := image.NewRGBA(image.Rect(0, 0, 120+i, 100))
			for p := range img.Pix {
				img.Pix[p] = uint8(p*7 + i*31 + c)
			}
			img.Set(0, 0, color.RGBA{255, 0, 0, 255})
			var b bytes.Buffer
			if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(class, fmt.Sprintf("%d.jpg", i)), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	f := dataBenchFlags{Source: "imagefolder", Interpolation: "bilinear", Size: 32, Batch: 4, Batches: 6, Workers: 1,
		FastDecode: true, TargetImagesPerSec: 50000}
	target := f.TargetImagesPerSec
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0)) // data bench raises it for its workers' foreign calls
	var out bytes.Buffer
	if err := dataBenchMain(f, []string{dir}, &out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !regexp.MustCompile(`\(16 images\): decode \(.*fast decode\) \+ RandomResizedCrop\(32, bilinear\) \+ flip \+ normalise: \d+ images/s with 1 workers on \d+ cores \(GOMAXPROCS \d+\)`).MatchString(text) ||
		!bytes.Contains(out.Bytes(), []byte(data.JPEGDecoderNote())) {
		t.Fatalf("output:\n%s", text)
	}
	m := regexp.MustCompile(`per core: (\d+) images per CPU-second .*\n50000 images/s needs (\d+) cores at this rate per core`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no per-core rate or cores needed in:\n%s", text)
	}
	perCore, _ := strconv.ParseFloat(m[1], 64)
	cores, _ := strconv.Atoi(m[2])
	// The printed rate is rounded: the cores must agree with it to within that rounding.
	if lo, hi := math.Ceil(target/(perCore+0.5)), math.Ceil(target/math.Max(perCore-0.5, 1)); float64(cores) < lo || float64(cores) > hi {
		t.Errorf("%d cores for %g images/s at %g per core, want %g..%g", cores, target, perCore, lo, hi)
	}
	// --device-normalize: the loader hands over uint8 pixels, and the line says so.
	f.DeviceNormalize = true
	out.Reset()
	if err := dataBenchMain(f, []string{dir}, &out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\+ flip \+ uint8 \(normalised on the device\): \d+ images/s`).Match(out.Bytes()) {
		t.Fatalf("--device-normalize output:\n%s", out.String())
	}
	f.DeviceNormalize = false
	f.TargetImagesPerSec = -1
	if err := dataBenchMain(f, []string{dir}, &out); err == nil {
		t.Error("a negative --target-images-per-sec was accepted")
	}
}
