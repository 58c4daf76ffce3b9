package weights

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// Fixtures written by scripts/torch_reference.py: DIR/weights.safetensors (the reference's state_dict)
// and DIR/io.safetensors (an NHWC input batch, torch's eval logits in float32 and in float64).
//
// Two comparisons per fixture:
//   - float32: our net at float32 against torch at float32. Both sum in different orders, so the
//     logits differ by rounding: tolerance torchTolF32 of the largest |logit|.
//   - float64: our net at Precision "float64" against the same torch model in float64 (the stored
//     weights are exactly representable in both), where only float64 rounding remains: any layer that
//     computes something else shows up far above torchTolF64.
const (
	torchTolF32 = 1e-4
	torchTolF64 = 1e-10
)

// TestTorchFixturesCommitted compares the reduced-size fixtures under testdata/.
func TestTorchFixturesCommitted(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "*", "io.safetensors"))
	if len(dirs) == 0 {
		t.Fatal("no fixtures under testdata/*/io.safetensors")
	}
	for _, p := range dirs {
		dir := filepath.Dir(p)
		t.Run(filepath.Base(dir), func(t *testing.T) { compareFixture(t, dir, true) })
	}
}

// TestTorchFixtures compares fixtures from TRAINER_TORCH_FIXTURES: one fixture directory, or a directory
// of them (full-size nets, too large to commit: see scripts/torch_reference.py --check).
func TestTorchFixtures(t *testing.T) {
	root := os.Getenv("TRAINER_TORCH_FIXTURES")
	if root == "" {
		t.Skip("TRAINER_TORCH_FIXTURES is not set (scripts/torch_reference.py --check NET sets it)")
	}
	if _, err := os.Stat(filepath.Join(root, "io.safetensors")); err == nil {
		compareFixture(t, root, false)
		return
	}
	paths, _ := filepath.Glob(filepath.Join(root, "*", "io.safetensors"))
	if len(paths) == 0 {
		t.Fatalf("no fixture in %s (expected io.safetensors there or in its subdirectories)", root)
	}
	for _, p := range paths {
		dir := filepath.Dir(p)
		t.Run(filepath.Base(dir), func(t *testing.T) { compareFixture(t, dir, false) })
	}
}

// logitErrors returns the largest absolute difference and that difference relative to the largest
// |want|.
func logitErrors(got [][]float64, want []float64) (maxAbs, rel float64) {
	var scale float64
	for i, row := range got {
		for j, g := range row {
			w := want[i*len(row)+j]
			maxAbs = math.Max(maxAbs, math.Abs(g-w))
			scale = math.Max(scale, math.Abs(w))
		}
	}
	return maxAbs, maxAbs / math.Max(scale, 1e-30)
}

// fixtureRun is one comparison of our logits with a fixture's.
type fixtureRun struct {
	spec          graphs.Spec
	opts          graphs.Options
	n, h, w       int
	maxAbs, rel   float64
	elapsed       time.Duration
	tolerance     float64
	width         float64
	classes, size int
}

// runFixture imports the fixture's weights into our net at precision prec (edit, when set, changes
// the options first) and compares its eval logits with torch's.
func runFixture(t *testing.T, dir, prec string, committed bool, edit func(*graphs.Options)) fixtureRun {
	t.Helper()
	io, err := Read(filepath.Join(dir, "io.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	meta := io.Metadata
	spec, err := graphs.Get(meta["net"])
	if err != nil {
		if committed {
			t.Fatalf("fixture %s: %v", dir, err)
		}
		t.Skipf("fixture %s: %v", dir, err)
	}
	r := fixtureRun{spec: spec}
	var err1, err2, err3 error
	r.width, err1 = strconv.ParseFloat(meta["width"], 64)
	r.size, err2 = strconv.Atoi(meta["size"])
	r.classes, err3 = strconv.Atoi(meta["classes"])
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("fixture %s: bad metadata %v", dir, meta)
	}
	input := io.Tensors["input"]
	images, err := input.Float32s()
	if err != nil || len(input.Shape) != 4 {
		t.Fatalf("fixture %s: input %v: %v", dir, input.Shape, err)
	}
	n, h, w, c := input.Shape[0], input.Shape[1], input.Shape[2], input.Shape[3]
	r.n, r.h, r.w = n, h, w
	key, tol := "logits", torchTolF32
	if prec == "float64" {
		key, tol = "logits_f64", torchTolF64
	}
	r.tolerance = tol
	want, err := io.Tensors[key].Float64s()
	if err != nil {
		t.Fatalf("fixture %s: %s: %v", dir, key, err)
	}
	r.opts = graphs.Options{Width: r.width, NumClasses: r.classes, ImageSize: r.size, Precision: prec}
	if edit != nil {
		edit(&r.opts)
	}
	start := time.Now()
	ctx := context.New()
	if _, err := Load(ctx, testBackend(), spec, r.opts, filepath.Join(dir, "weights.safetensors")); err != nil {
		t.Fatal(err)
	}
	ev, err := NewEvaluator(testBackend(), ctx, spec, r.opts, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ev.Logits(images, n, h, w, c)
	ev.Finalize()
	if err != nil {
		t.Fatal(err)
	}
	if len(got)*len(got[0]) != len(want) {
		t.Fatalf("%s: %d×%d logits, torch has %d", prec, len(got), len(got[0]), len(want))
	}
	got = asReferenceOutput(t, got, meta["output"])
	r.maxAbs, r.rel = logitErrors(got, want)
	r.elapsed = time.Since(start)
	return r
}

func compareFixture(t *testing.T, dir string, committed bool) {
	for _, prec := range []string{"float32", "float64"} {
		r := runFixture(t, dir, prec, committed, nil)
		t.Logf("%s width %g, %dx%d, %d classes, batch %d, %s: max abs logit error %.3g, relative to max |logit| %.3g (tolerance %g; %v)",
			r.spec.Name, r.width, r.h, r.w, r.classes, r.n, prec, r.maxAbs, r.rel, r.tolerance, r.elapsed.Round(time.Millisecond))
		if !(r.rel <= r.tolerance) {
			t.Errorf("%s %s: logits differ from torch's by %.3g relative (max abs %.3g), tolerance %g",
				r.spec.Name, prec, r.rel, r.maxAbs, r.tolerance)
		}
	}
}

// The comparison can fail: the resnet50 fixture with the TF/XLA padding phase instead of PyTorch's
// (one pixel's shift in the stem, the max-pool and every strided conv) misses by far more than the
// tolerance.
func TestTorchFixtureDetectsAPaddingShift(t *testing.T) {
	r := runFixture(t, filepath.Join("testdata", "resnet50"), "float64", true,
		func(o *graphs.Options) { o.Padding = graphs.PadSame })
	t.Logf("resnet50 with SAME padding: relative logit error %.3g", r.rel)
	if r.rel < 100*torchTolF32 {
		t.Errorf("a padding shift changes the logits by only %.3g relative", r.rel)
	}
}

// TestExportLoadsInTorch is the other direction: our nets' weights (own initialisers, with random norm
// statistics and affine parameters) are exported, loaded into the reference with
// load_state_dict(strict=True) by scripts/torch_reference.py --eval, and torch's logits on our input
// must match ours.
func TestExportLoadsInTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PyTorch in a subprocess")
	}
	python := torchPython()
	if python == "" {
		t.Skip("no python3 with torch and torchvision (set TRAINER_TORCH_PYTHON)")
	}
	cases := []struct {
		net  string
		opts graphs.Options
	}{
		{"mnist_cnn", graphs.Options{Width: 0.25, NumClasses: 10}},
		{"cifar8_bn", graphs.Options{Width: 0.125, NumClasses: 10}},
		{"resnet50", graphs.Options{Width: 1.0 / 16, NumClasses: 10, ImageSize: 32}},
		{"efficientnet_b0", graphs.Options{Width: 0.25, NumClasses: 10, ImageSize: 32}},
		{"convnext_tiny", graphs.Options{Width: 1.0 / 16, NumClasses: 10, ImageSize: 32}},
		{"vit_tiny", graphs.Options{Width: 1.0 / 3, NumClasses: 10, ImageSize: 32}},
		{"mobilenetv4_conv_medium", graphs.Options{Width: 0.25, NumClasses: 10, ImageSize: 32}},
		{"shufflenet_v2_x1_0", graphs.Options{Width: 0.25, NumClasses: 10, ImageSize: 32}},
		{"densenet121", graphs.Options{Width: 0.125, NumClasses: 10, ImageSize: 32}},
		{"googlenet", graphs.Options{Width: 0.125, NumClasses: 10, ImageSize: 32}},
		// Swin's export also writes its relative_position_index buffers (Spec.TorchBuffers).
		{"swin_t", graphs.Options{Width: 0.0625, NumClasses: 10, ImageSize: 64}},
	}
	root := t.TempDir()
	type result struct {
		dir    string
		images []float32
		ours   [][]float64
	}
	var results []result
	args := []string{"scripts/torch_reference.py", "--eval"}
	for _, c := range cases {
		spec, err := graphs.Get(c.net)
		if err != nil {
			t.Fatal(err)
		}
		ctx := normRandomised(t, spec, c.opts)
		dir := filepath.Join(root, c.net)
		os.MkdirAll(dir, 0o755)
		if err := Save(filepath.Join(dir, "weights.safetensors"), spec, ctx, nil); err != nil {
			t.Fatal(err)
		}
		in := InputShape(spec, c.opts)
		in[0] = 2
		images := randomImages(2, in[1], in[2], in[3], 11)
		st, _ := FromFloat64s(F32, in, float32sTo64(images))
		meta := map[string]string{"net": c.net, "width": strconv.FormatFloat(c.opts.Width, 'g', -1, 64),
			"size": strconv.Itoa(in[1]), "classes": strconv.Itoa(c.opts.NumClasses)}
		if err := Write(filepath.Join(dir, "input.safetensors"), map[string]*Tensor{"input": st}, meta); err != nil {
			t.Fatal(err)
		}
		results = append(results, result{dir: dir, images: images})
		args = append(args, dir)
	}
	cmd := exec.Command(python, args...)
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("torch_reference.py --eval: %v\n%s", err, out)
	}
	for i, c := range cases {
		t.Run(c.net, func(t *testing.T) {
			spec, _ := graphs.Get(c.net)
			ref, err := Read(filepath.Join(results[i].dir, "torch.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			in := InputShape(spec, c.opts)
			for _, prec := range []string{"float32", "float64"} {
				key, tol := "logits", torchTolF32
				if prec == "float64" {
					key, tol = "logits_f64", torchTolF64
				}
				opts := c.opts
				opts.Precision = prec
				ctx := context.New()
				if _, err := Load(ctx, testBackend(), spec, opts, filepath.Join(results[i].dir, "weights.safetensors")); err != nil {
					t.Fatal(err)
				}
				ev, err := NewEvaluator(testBackend(), ctx, spec, opts, true)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ev.Logits(results[i].images, 2, in[1], in[2], in[3])
				ev.Finalize()
				if err != nil {
					t.Fatal(err)
				}
				want, _ := ref.Tensors[key].Float64s()
				got = asReferenceOutput(t, got, ref.Metadata["output"])
				maxAbs, rel := logitErrors(got, want)
				t.Logf("%s %s: torch on our exported weights differs by %.3g (max abs %.3g)", c.net, prec, rel, maxAbs)
				if !(rel <= tol) {
					t.Errorf("%s %s: relative logit error %.3g > %g", c.net, prec, rel, tol)
				}
			}
		})
	}
}

// asReferenceOutput applies to our logits what the reference's forward applies to its own (metadata
// "output" of a fixture): pytorch/examples' mnist Net returns log_softmax.
func asReferenceOutput(t *testing.T, logits [][]float64, output string) [][]float64 {
	t.Helper()
	switch output {
	case "", "logits":
		return logits
	case "log_softmax":
		out := make([][]float64, len(logits))
		for i, row := range logits {
			peak := math.Inf(-1)
			for _, v := range row {
				peak = math.Max(peak, v)
			}
			var sum float64
			for _, v := range row {
				sum += math.Exp(v - peak)
			}
			out[i] = make([]float64, len(row))
			for j, v := range row {
				out[i][j] = v - peak - math.Log(sum)
			}
		}
		return out
	}
	t.Fatalf("fixture output %q: expected logits or log_softmax", output)
	return nil
}

// TestExportMatchesTorchFixtures is the export direction without Python: each committed fixture's
// state_dict is imported into our net and exported again, and the export must be that state_dict
// exactly (every key, nothing more, same shapes and values). The import direction
// (TestTorchFixturesCommitted) shows our net with those variables computes the reference's logits, and
// import is a bijection onto the net's variables, so for any weights of ours the export is the
// state_dict that, loaded with load_state_dict(strict=True) into the PyTorch reference, computes our
// logits. A layout wrong in both directions alike (an fc1 flattened in another order) fails the import
// comparison, as the reference is the upstream module itself.
func TestExportMatchesTorchFixtures(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "*", "io.safetensors"))
	if len(dirs) == 0 {
		t.Fatal("no fixtures under testdata/*/io.safetensors")
	}
	for _, p := range dirs {
		dir := filepath.Dir(p)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			io, err := Read(p)
			if err != nil {
				t.Fatal(err)
			}
			meta := io.Metadata
			spec, err := graphs.Get(meta["net"])
			if err != nil {
				t.Fatal(err)
			}
			width, err1 := strconv.ParseFloat(meta["width"], 64)
			size, err2 := strconv.Atoi(meta["size"])
			classes, err3 := strconv.Atoi(meta["classes"])
			if err1 != nil || err2 != nil || err3 != nil {
				t.Fatalf("fixture %s: bad metadata %v", dir, meta)
			}
			opts := graphs.Options{Width: width, NumClasses: classes, ImageSize: size}
			ctx := context.New()
			src := filepath.Join(dir, "weights.safetensors")
			if _, err := Load(ctx, testBackend(), spec, opts, src); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "export.safetensors")
			if err := Save(out, spec, ctx, nil); err != nil {
				t.Fatal(err)
			}
			want, err := Read(src)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Read(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range want.Names() {
				if _, ok := got.Tensors[key]; !ok {
					t.Errorf("export lacks %s", key)
				}
			}
			for _, key := range got.Names() {
				w, ok := want.Tensors[key]
				if !ok {
					t.Errorf("export has %s, which the reference's state_dict has not", key)
					continue
				}
				g := got.Tensors[key]
				if !slices.Equal(g.Shape, w.Shape) {
					t.Errorf("%s: exported shape %v, reference %v", key, g.Shape, w.Shape)
					continue
				}
				if strings.HasSuffix(key, BatchTrackedKey) {
					continue // a counter eval does not read; export writes 0
				}
				gv, err1 := g.Float64s()
				wv, err2 := w.Float64s()
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: %v %v", key, err1, err2)
				}
				if !slices.Equal(gv, wv) {
					t.Errorf("%s: exported values differ from the reference's state_dict", key)
				}
			}
			t.Logf("%s: %d tensors exported as the reference's state_dict", spec.Name, len(got.Tensors))
		})
	}
}

func float32sTo64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// normRandomised builds the net with its own initialisers and gives the norms' statistics and affine
// parameters, biases, layer scales and the class token random values (their initial values are
// constants that would hide a mislaid tensor).
func normRandomised(t *testing.T, spec graphs.Spec, opts graphs.Options) *context.Context {
	t.Helper()
	ctx := context.New()
	ev, err := NewEvaluator(testBackend(), ctx, spec, opts, false)
	if err != nil {
		t.Fatal(err)
	}
	in := InputShape(spec, opts)
	if _, err := ev.Logits(make([]float32, in[1]*in[2]*in[3]), 1, in[1], in[2], in[3]); err != nil {
		t.Fatal(err)
	}
	ev.Finalize()
	rng := rand.New(rand.NewPCG(7, 8))
	ctx.EnumerateVariables(func(v *context.Variable) {
		dims := v.Shape().Dimensions
		var draw func() float64
		switch {
		case v.Name() == "running_var" || v.Name() == "weight" && len(dims) == 1:
			draw = func() float64 { return 0.5 + rng.Float64() }
		case v.Name() == "layer_scale":
			draw = func() float64 { return 0.1 + 0.4*rng.Float64() }
		case v.Name() == "running_mean" || v.Name() == "bias" || v.Name() == "cls_token":
			draw = func() float64 { return 0.1 * rng.NormFloat64() }
		default:
			return
		}
		vals := make([]float32, v.Shape().Size())
		for i := range vals {
			vals[i] = float32(draw())
		}
		v.MustSetValue(tensors.FromFlatDataAndDimensions(vals, dims...))
	})
	return ctx
}

// torchPython finds a python3 with torch and torchvision (Debian's /usr/bin/python3 here), or "".
func torchPython() string {
	for _, p := range []string{os.Getenv("TRAINER_TORCH_PYTHON"), "/usr/bin/python3"} {
		if p != "" && exec.Command(p, "-c", "import torch, torchvision, numpy").Run() == nil {
			return p
		}
	}
	return ""
}
