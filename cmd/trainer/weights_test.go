package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/trainer"
	"github.com/trainer/trainer/weights"
)

// tinyNet is mnist_cnn at a quarter width (75k parameters): small enough for end-to-end CLI tests.
var tinyArgs = []string{"--width", "0.25"}

func call(t *testing.T, fn func([]string, *bytes.Buffer, *bytes.Buffer) error, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := fn(args, &out, &errOut)
	return out.String() + errOut.String(), err
}

func exportCmd(a []string, o, e *bytes.Buffer) error  { return cmdExport(a, o, e) }
func importCmd(a []string, o, e *bytes.Buffer) error  { return cmdImport(a, o, e) }
func predictCmd(a []string, o, e *bytes.Buffer) error { return cmdPredict(a, o, e) }

// tinyWeights writes mnist_cnn's (quarter width) initial weights as a safetensors state_dict.
func tinyWeights(t *testing.T, dir string) string {
	t.Helper()
	spec, _ := graphs.Get("mnist_cnn")
	opts := graphs.Options{Width: 0.25, Seed: 3}
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
	path := filepath.Join(dir, "tiny.safetensors")
	if err := weights.Save(path, spec, ctx, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// digitPNG draws a light ring on black, 40x36 (not square, so resize and crop both act).
func digitPNG(t *testing.T, path string) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 36))
	for y := range 36 {
		for x := range 40 {
			r := math.Hypot(float64(x)-20, float64(y)-18)
			v := uint8(0)
			if r > 7 && r < 12 {
				v = 230
			}
			img.Set(x, y, color.RGBA{v, v, v, 255})
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := png.Encode(f, img); err != nil {
		t.Fatal(err)
	}
}

var predictLine = regexp.MustCompile(`^  (\d)\s+([0-9.]+)%  (.+)$`)

func TestPredictEndToEnd(t *testing.T) {
	dir := t.TempDir()
	w := tinyWeights(t, dir)
	img := filepath.Join(dir, "ring.png")
	digitPNG(t, img)
	names := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
	classesFile := filepath.Join(dir, "classes.txt")
	os.WriteFile(classesFile, []byte(strings.Join(names, "\n")+"\n"), 0o644)

	out, err := call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", w, "--classes", classesFile, img}, tinyArgs...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || lines[0] != img {
		t.Fatalf("expected the image path and 5 classes:\n%s", out)
	}
	// The expected ranking: the same net and weights on the same preprocessing (MNIST statistics,
	// no crop for a grey net), evaluated directly.
	spec, _ := graphs.Get("mnist_cnn")
	opts := graphs.Options{Width: 0.25}
	backend, _ := gobackend.New("")
	ctx := context.New()
	if _, err := weights.Load(ctx, backend, spec, opts, w); err != nil {
		t.Fatal(err)
	}
	ev, _ := weights.NewEvaluator(backend, ctx, spec, opts, true)
	defer ev.Finalize()
	x, err := data.EvalTransform{Size: 28, CropPct: 1, Mean: []float64{0.1307}, Std: []float64{0.3081}}.LoadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ev.Logits(x, 1, 28, 28, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := trainer.TopK(trainer.Probabilities(rows[0]), 5)
	prev := 2.0
	for i, line := range lines[1:] {
		m := predictLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %q is not 'rank  p%%  name'", line)
		}
		p, _ := strconv.ParseFloat(m[2], 64)
		if m[1] != strconv.Itoa(i+1) || m[3] != names[want[i].Index] || math.Abs(p-100*want[i].P) > 0.0006 || p/100 > prev {
			t.Errorf("rank %d: got %q, want %s at %.3f%%", i+1, line, names[want[i].Index], 100*want[i].P)
		}
		prev = p / 100
	}

	// Without names: class indices; two images in one batch give the same answer for each.
	out2, err := call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", w, "--top", "2", img, img}, tinyArgs...)...)
	if err != nil {
		t.Fatal(err)
	}
	l2 := strings.Split(strings.TrimSpace(out2), "\n")
	if len(l2) != 6 || l2[1] != l2[4] || !strings.HasSuffix(l2[1], "class "+strconv.Itoa(want[0].Index)) {
		t.Errorf("two images, top 2:\n%s", out2)
	}

	// An image above the pixel limit is refused from its header, naming the file.
	_, err = call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", w, "--max-image-pixels", "1439", img}, tinyArgs...)...)
	if err == nil || !strings.Contains(err.Error(), img) || !strings.Contains(err.Error(), "40x36 is 1440 pixels, more than 1439") {
		t.Errorf("--max-image-pixels 1439: %v", err)
	}

	// What the resize would make is bounded too: a 20000x1 strip (20,000 pixels) would become
	// 560000x28, above a limit of a million pixels; a crop fraction of NaN or 1e-300 is refused as
	// the flag's range, not in the resampler.
	strip := filepath.Join(dir, "strip.png")
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 20000, 1))); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(strip, b.Bytes(), 0o644)
	_, err = call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", w, "--max-image-pixels", "1000000", strip}, tinyArgs...)...)
	if err == nil || !strings.Contains(err.Error(), strip) || !strings.Contains(err.Error(), "560000x28") {
		t.Errorf("a 20000x1 image: %v, want an error naming it and the resize's size", err)
	}
	// An 80000000x1 PNG (53.8 GB once resized for an RGB net) is refused from its header alone: this
	// one has no pixel data, so only the header check can name the resize.
	var hdr bytes.Buffer
	hdr.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte("IHDR"), 80_000_000), 1)
	ihdr = append(ihdr, 8, 0, 0, 0, 0)
	binary.Write(&hdr, binary.BigEndian, uint32(len(ihdr)-4))
	hdr.Write(ihdr)
	binary.Write(&hdr, binary.BigEndian, crc32.ChecksumIEEE(ihdr))
	wide := filepath.Join(dir, "wide.png")
	os.WriteFile(wide, hdr.Bytes(), 0o644)
	_, err = call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", w, wide}, tinyArgs...)...)
	if err == nil || !strings.Contains(err.Error(), wide) || !strings.Contains(err.Error(), "80000000x1 image's shorter side") {
		t.Errorf("an 80000000x1 PNG: %v, want the resize refused from the header naming the image", err)
	}
	for _, pct := range []string{"nan", "1.5", "-0.5"} {
		_, err = call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", w, "--crop-pct", pct, img}, tinyArgs...)...)
		if err == nil || !strings.Contains(err.Error(), "--crop-pct") {
			t.Errorf("--crop-pct %s: %v, want the flag refused", pct, err)
		}
	}
	// --width and --size take a recipe's bounds (--size 100000 would build a net for 10^10 pixels).
	for _, args := range [][]string{{"--size", "100000", "--width", "0.25"}, {"--width", "Inf"}, {"--width", "NaN"}} {
		_, err = call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", w, img}, args...)...)
		if err == nil || !strings.Contains(err.Error(), "expected a width in (0, 16], a size of at most 4096") {
			t.Errorf("predict %v: %v, want the bounds named", args, err)
		}
	}
	_, err = call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", w, "--crop-pct", "1e-300", img}, tinyArgs...)...)
	if err == nil || !strings.Contains(err.Error(), img) || !errors.Is(err, data.ErrTooManyPixels) {
		t.Errorf("--crop-pct 1e-300: %v, want the resize refused naming the image", err)
	}
}

func TestImportExportThroughCheckpoint(t *testing.T) {
	dir := t.TempDir()
	w := tinyWeights(t, dir)
	ckpt := filepath.Join(dir, "imported.tckpt")
	out, err := call(t, importCmd, append([]string{"mnist_cnn", w, "--out", ckpt}, tinyArgs...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "8 variables") {
		t.Errorf("import output: %s", out)
	}
	back := filepath.Join(dir, "back.safetensors")
	if out, err := call(t, exportCmd, append([]string{"mnist_cnn", "--checkpoint", ckpt, "--out", back}, tinyArgs...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	a, _ := weights.Read(w)
	b, err := weights.Read(back)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Tensors) != 8 || len(b.Tensors) != len(a.Tensors) {
		t.Fatalf("%d tensors exported, %d imported", len(b.Tensors), len(a.Tensors))
	}
	for name, ta := range a.Tensors {
		if tb := b.Tensors[name]; tb == nil || !bytes.Equal(ta.Data, tb.Data) {
			t.Errorf("%s changed through import and export", name)
		}
	}
	if b.Metadata["step"] != "0" || b.Metadata["net"] != "mnist_cnn" {
		t.Errorf("metadata %v", b.Metadata)
	}

	// A config gives the net and its width instead of the flags.
	cfg := filepath.Join(dir, "tiny.yaml")
	os.WriteFile(cfg, []byte("net:\n  name: mnist_cnn\n  width: 0.25\n"), 0o644)
	ckpt2 := filepath.Join(dir, "from-config.tckpt")
	if out, err := call(t, importCmd, cfg, w, "--out", ckpt2); err != nil {
		t.Fatalf("import with a config: %v\n%s", err, out)
	}
	back2 := filepath.Join(dir, "back2.safetensors")
	if out, err := call(t, exportCmd, cfg, "--checkpoint", ckpt2, "--out", back2); err != nil {
		t.Fatalf("export with a config: %v\n%s", err, out)
	}
	if c, _ := weights.Read(back2); c == nil || c.Metadata["config_hash"] == "" || !bytes.Equal(c.Tensors["fc1.weight"].Data, a.Tensors["fc1.weight"].Data) {
		t.Errorf("export through a config: %+v", c)
	}

	// The checkpoint predicts like the state_dict it came from.
	img := filepath.Join(dir, "ring.png")
	digitPNG(t, img)
	p1, err1 := call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", w, img}, tinyArgs...)...)
	p2, err2 := call(t, predictCmd, append([]string{"--net", "mnist_cnn", "--weights", ckpt, img}, tinyArgs...)...)
	if err1 != nil || err2 != nil || p1 != p2 {
		t.Errorf("predict from safetensors and from the imported checkpoint differ:\n%s%v\n%s%v", p1, err1, p2, err2)
	}
}

// A config names the net and its width; `trainer eval` scores an imported checkpoint on MNIST's test
// split (10,000 images: about 45 s on two cores).
func TestEvalOfImportedCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("evaluates 10,000 MNIST images")
	}
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "imported.tckpt")
	if out, err := call(t, importCmd, append([]string{"mnist_cnn", tinyWeights(t, dir), "--out", ckpt}, tinyArgs...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "tiny.yaml")
	os.WriteFile(cfg, []byte("net:\n  name: mnist_cnn\n  width: 0.25\ndata:\n  eval_batch_size: 2500\nrun_dir: "+dir+"\n"), 0o644)
	var o, e bytes.Buffer
	if err := cmdEval([]string{cfg, "--checkpoint", ckpt}, &o, &e); err != nil {
		if strings.Contains(err.Error(), "MNIST") || strings.Contains(err.Error(), "GoMNIST") {
			t.Skipf("no MNIST here: %v", err)
		}
		t.Fatalf("eval of the imported checkpoint: %v\n%s", err, e.String())
	}
	if !strings.Contains(o.String(), "10000 images") {
		t.Errorf("eval output: %s", o.String())
	}
}

func TestImportRefusesWithEveryProblem(t *testing.T) {
	dir := t.TempDir()
	w := tinyWeights(t, dir)
	// At full width every kernel and matrix has another shape.
	out, err := call(t, importCmd, "mnist_cnn", w, "--out", filepath.Join(dir, "x.tckpt"))
	if err == nil {
		t.Fatalf("full-width import of quarter-width weights succeeded:\n%s", out)
	}
	msg := err.Error()
	for _, want := range []string{"shape mismatches (7)", "conv1.weight: file [8 1 3 3], net expects [32 1 3 3]", "fc2.weight: file [10 32]", "--width"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.tckpt")); err == nil {
		t.Error("a refused import wrote a checkpoint")
	}
	if _, err := call(t, importCmd, "no_such_net", w, "--out", "x"); err == nil || !strings.Contains(err.Error(), "registered") {
		t.Errorf("unknown net: %v", err)
	}
	if _, err := call(t, exportCmd, "mnist_cnn", "--checkpoint", w, "--out", filepath.Join(dir, "y.safetensors")); err == nil ||
		!strings.Contains(err.Error(), "not a trainer checkpoint") {
		t.Errorf("exporting a safetensors file as a checkpoint: %v", err)
	}
}

// `trainer import NET URL` downloads a torchvision .pth into the cache (progress on stderr), checks
// its hash prefix, and writes the checkpoint the same weights give as safetensors; a second import
// takes the cached copy.
func TestImportPthFromURL(t *testing.T) {
	pth, err := os.ReadFile(filepath.Join("..", "..", "weights", "testdata", "mobilenet_v2", "weights.pth"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pth)
	name := "mobilenet_v2-" + hex.EncodeToString(sum[:])[:8] + ".pth"
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(pth))
	}))
	defer srv.Close()
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	dir := t.TempDir()
	net := []string{"--width", "0.25", "--num-classes", "10", "--size", "32"}
	fromURL := filepath.Join(dir, "url.tckpt")
	var o, e bytes.Buffer
	if err := cmdImport(append([]string{"mobilenet_v2", srv.URL + "/models/" + name, "--out", fromURL}, net...), &o, &e); err != nil {
		t.Fatalf("%v\n%s%s", err, o.String(), e.String())
	}
	cached := filepath.Join(cache, "trainer", "weights", name)
	if !strings.Contains(o.String(), "262 variables of mobilenet_v2 from "+cached) || !strings.Contains(e.String(), name) {
		t.Errorf("import output %q, progress %q", o.String(), e.String())
	}
	if out, err := call(t, importCmd, append([]string{"mobilenet_v2", srv.URL + "/models/" + name, "--out", filepath.Join(dir, "again.tckpt")}, net...)...); err != nil || requests != 1 {
		t.Errorf("second import: %v, %d requests (want the cached copy)\n%s", err, requests, out)
	}
	fromST := filepath.Join(dir, "st.tckpt")
	if out, err := call(t, importCmd, append([]string{"mobilenet_v2", filepath.Join("..", "..", "weights", "testdata", "mobilenet_v2", "weights.safetensors"), "--out", fromST}, net...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	a, err := checkpoint.Load(fromURL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := checkpoint.Load(fromST)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Tensors) != len(b.Tensors) {
		t.Fatalf("%d tensors from the .pth, %d from the safetensors file", len(a.Tensors), len(b.Tensors))
	}
	for name, ta := range a.Tensors {
		if !slices.Equal(tensors.MustCopyFlatData[float32](ta), tensors.MustCopyFlatData[float32](b.Tensors[name])) {
			t.Errorf("%s differs between the .pth and the safetensors import", name)
		}
	}
	if _, err := call(t, importCmd, append([]string{"mobilenet_v2", srv.URL + "/models/mobilenet_v2.pth", "--out", filepath.Join(dir, "x.tckpt")}, net...)...); err == nil ||
		!strings.Contains(err.Error(), "--sha256") {
		t.Errorf("a URL without a hash prefix or --sha256: %v", err)
	}
}

// TestOldMNISTCNNCheckpointIsRefused: a checkpoint of mnist_cnn's first layout (fc1 reading features
// flattened channel-last, revision 0) loads into today's net without a shape error and would answer
// wrong, so export (and resume and eval, which check the same header field) refuse it by name.
func TestOldMNISTCNNCheckpointIsRefused(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "imported.tckpt")
	if out, err := call(t, importCmd, append([]string{"mnist_cnn", tinyWeights(t, dir), "--out", ckpt}, tinyArgs...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	loaded, err := checkpoint.Load(ckpt)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := graphs.Get("mnist_cnn")
	if loaded.Header.NetRevision != spec.Revision || spec.Revision < 1 {
		t.Fatalf("imported checkpoint records net revision %d, the net is revision %d", loaded.Header.NetRevision, spec.Revision)
	}
	ctx := context.New()
	for path, value := range loaded.Tensors {
		scope, name := path[:strings.LastIndex(path, "/")], path[strings.LastIndex(path, "/")+1:]
		ctx.InAbsPath(scope).VariableWithValue(name, value)
	}
	old := loaded.Header
	old.NetRevision = 0
	oldPath := filepath.Join(dir, "old.tckpt")
	if err := checkpoint.SaveFile(oldPath, ctx, old); err != nil {
		t.Fatal(err)
	}
	_, err = call(t, exportCmd, append([]string{"mnist_cnn", "--checkpoint", oldPath, "--out", filepath.Join(dir, "x.safetensors")}, tinyArgs...)...)
	if err == nil || !strings.Contains(err.Error(), "revision 0 of net mnist_cnn") || !strings.Contains(err.Error(), "channel-major") {
		t.Errorf("export of a revision-0 mnist_cnn checkpoint: %v", err)
	}
}
