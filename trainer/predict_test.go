package trainer

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/weights"
)

// TestPredictTransformReadsTheNetsEval: predict preprocesses with the net's registry entry (its
// mean, std, crop fraction and filter, at its input size), and the caller's overrides replace only
// what they set.
func TestPredictTransformReadsTheNetsEval(t *testing.T) {
	spec, err := graphs.Get("resnet50")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := PredictTransform(spec, graphs.Options{}, PredictOverrides{}, 99)
	if err != nil {
		t.Fatal(err)
	}
	want := data.EvalTransform{Size: 224, CropPct: 0.875, Mean: graphs.ImageNetEval.Mean, Std: graphs.ImageNetEval.Std,
		Interp: data.Bilinear, MaxPixels: 99}
	if !reflect.DeepEqual(tr, want) {
		t.Errorf("resnet50: %+v, want %+v", tr, want)
	}

	spec, _ = graphs.Get("mnist_cnn")
	spec.Eval = graphs.EvalPreprocessing{Mean: []float64{0.5}, Std: []float64{0.25}, CropPct: 0.5, Interpolation: "bicubic"}
	tr, err = PredictTransform(spec, graphs.Options{ImageSize: 32}, PredictOverrides{}, 0)
	want = data.EvalTransform{Size: 32, CropPct: 0.5, Mean: []float64{0.5}, Std: []float64{0.25}, Interp: data.Bicubic}
	if err != nil || !reflect.DeepEqual(tr, want) {
		t.Errorf("mnist_cnn with its own eval at 32: %+v, %v; want %+v", tr, err, want)
	}
	tr, err = PredictTransform(spec, graphs.Options{}, PredictOverrides{CropPct: 0.75, Std: []float64{2}}, 0)
	want = data.EvalTransform{Size: 28, CropPct: 0.75, Mean: []float64{0.5}, Std: []float64{2}, Interp: data.Bicubic}
	if err != nil || !reflect.DeepEqual(tr, want) {
		t.Errorf("overrides: %+v, %v; want %+v", tr, err, want)
	}
	if _, err := PredictTransform(spec, graphs.Options{}, PredictOverrides{Mean: graphs.ImageNetEval.Mean}, 0); err == nil ||
		!strings.Contains(err.Error(), "3 and 1 values for a net with 1 input channels") {
		t.Errorf("three means for a grey net: %v", err)
	}
	spec.Eval = graphs.EvalPreprocessing{}
	if _, err := PredictTransform(spec, graphs.Options{}, PredictOverrides{}, 0); err == nil || !strings.Contains(err.Error(), "net mnist_cnn") {
		t.Errorf("a net without eval preprocessing: %v", err)
	}
}

// TestPredictorUsesItsTransform: the predictor's classes and probabilities are those of the eval
// forward on its transform's output, image by image and in order across more than one chunk; another
// eval preprocessing gives other probabilities.
func TestPredictorUsesItsTransform(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for k := range 2 {
		img := image.NewRGBA(image.Rect(0, 0, 40+7*k, 36))
		for y := range 36 {
			for x := range 40 + 7*k {
				v := uint8((x*(5+k) + y*3) % 251)
				img.Set(x, y, color.RGBA{v, 255 - v, uint8(40 * k), 255})
			}
		}
		p := filepath.Join(dir, "img"+string(rune('a'+k))+".png")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := png.Encode(f, img); err != nil {
			t.Fatal(err)
		}
		f.Close()
		paths = append(paths, p)
	}
	spec, _ := graphs.Get("mnist_cnn")
	opts := graphs.Options{Width: 0.25, Seed: 5}
	backend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	ev, err := weights.NewEvaluator(backend, ctx, spec, opts, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ev.Logits(make([]float32, 28*28), 1, 28, 28, 1); err != nil { // creates the variables
		t.Fatal(err)
	}
	ev.Finalize()

	predict := func(eval graphs.EvalPreprocessing, images []string) []Prediction {
		t.Helper()
		s := spec
		s.Eval = eval
		tr, err := PredictTransform(s, opts, PredictOverrides{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []Prediction
		p := Predictor{Backend: backend, Variables: ctx, Spec: s, Options: opts, Transform: tr, Top: 3}
		if err := p.Predict(images, func(pr Prediction) error { got = append(got, pr); return nil }); err != nil {
			t.Fatal(err)
		}
		// The same forward on the transform's output, one image at a time.
		direct, err := weights.NewEvaluator(backend, ctx, s, opts, true)
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Finalize()
		for _, path := range paths {
			x, err := tr.LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := direct.Logits(x, 1, 28, 28, 1)
			if err != nil {
				t.Fatal(err)
			}
			want := TopK(Probabilities(rows[0]), 3)
			for i, pr := range got {
				if pr.Path != path {
					continue
				}
				if len(pr.Classes) != 3 {
					t.Fatalf("image %d: %d classes", i, len(pr.Classes))
				}
				for r, c := range pr.Classes {
					if c.Index != want[r].Index || !sameProb(c.P, want[r].P) {
						t.Errorf("image %d (%s) rank %d: %+v, want %+v", i, filepath.Base(path), r+1, c, want[r])
					}
				}
			}
		}
		return got
	}

	// 17 images: a chunk of predictBatch and one of 1, alternating the two pictures.
	var images []string
	for i := range predictBatch + 1 {
		images = append(images, paths[i%2])
	}
	mnist := predict(graphs.MNISTEval, images)
	if len(mnist) != len(images) {
		t.Fatalf("%d predictions for %d images", len(mnist), len(images))
	}
	for i, pr := range mnist {
		if pr.Path != images[i] {
			t.Errorf("prediction %d is of %s, want %s", i, pr.Path, images[i])
		}
	}
	other := predict(graphs.EvalPreprocessing{Mean: []float64{0.6}, Std: []float64{0.1}, CropPct: 0.5, Interpolation: "bicubic"}, paths)
	if reflect.DeepEqual(other[0].Classes, mnist[0].Classes) {
		t.Errorf("another eval preprocessing gave the same prediction %+v", other[0].Classes)
	}
}

func sameProb(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }
