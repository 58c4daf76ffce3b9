package data

import (
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// benchJPEGs writes n ImageNet-like JPEGs (about 400x350, quality 90: smooth shapes plus noise, so
// they compress like photographs) into dir, once, and returns their paths.
func benchJPEGs(b *testing.B, dir string, n int) []string {
	b.Helper()
	var paths []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("img%03d.jpg", i))
		paths = append(paths, p)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		w, h := 380+rng.IntN(60), 330+rng.IntN(50)
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		fx, fy, ph := 0.01+0.05*rng.Float64(), 0.01+0.05*rng.Float64(), 6*rng.Float64()
		for y := range h {
			for x := range w {
				s := math.Sin(float64(x)*fx+ph) * math.Cos(float64(y)*fy)
				n := rng.IntN(24)
				img.Set(x, y, color.RGBA{uint8(120 + 90*s + float64(n)), uint8(100 + 60*math.Sin(float64(x+y)*0.02) + float64(n)),
					uint8(128 - 80*s + float64(n)), 255})
			}
		}
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		jpeg.Encode(f, img, &jpeg.Options{Quality: 90})
		f.Close()
	}
	return paths
}

// BenchmarkDecodeRandomResizedCrop is one core's rate of the training input pipeline at 224: read,
// decode (image/jpeg), RandomResizedCrop (bilinear), flip, normalise. TRAINER_BENCH_JPEGS keeps the
// generated JPEGs in that folder for the PIL peer (scripts/pil_augment_bench.py).
func BenchmarkDecodeRandomResizedCrop(b *testing.B) {
	paths := pipelineJPEGs(b)
	for _, interp := range []Interp{Bilinear, Bicubic} {
		b.Run(interp.String(), func(b *testing.B) {
			l, sc, dst := pipelineLoader(b, paths, interp)
			b.ResetTimer()
			for i := range b.N {
				if _, err := l.decode(sc, i/len(paths), i, i%len(paths), dst); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
		})
	}
}

// pipelineJPEGs writes (or, with TRAINER_BENCH_JPEGS, keeps in that folder for the PIL peer) the 64
// generated JPEGs of the input-pipeline benchmarks.
func pipelineJPEGs(b *testing.B) []string {
	dir := os.Getenv("TRAINER_BENCH_JPEGS")
	if dir == "" {
		dir = b.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return benchJPEGs(b, dir, 64)
}

// pipelineLoader is the training pipeline at 224 over paths (RandomResizedCrop with interp, flip,
// ImageNet normalisation), one example at a time, with its scratch grown by one decode.
func pipelineLoader(b *testing.B, paths []string, interp Interp) (*Loader, *augScratch, []float32) {
	files := &ImageFolder{Root: "/", Classes: []string{"x"}}
	for _, p := range paths {
		files.Files, files.Labels = append(files.Files, p), append(files.Labels, 0)
	}
	l, err := NewSourceLoader(files, LoaderOptions{BatchSize: 1, Shuffle: true, Mean: []float32{0.485, 0.456, 0.406},
		Std: []float32{0.229, 0.224, 0.225}, Transform: &Transform{Size: 224, Train: true, Scale: [2]float64{0.08, 1},
			Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5, Interp: interp}})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float32, 224*224*3)
	sc := &augScratch{}
	if _, err := l.decode(sc, 0, 0, 0, dst); err != nil {
		b.Fatal(err)
	}
	return l, sc, dst
}
