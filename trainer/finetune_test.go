package trainer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/weights"
)

// stripesTree writes an ImageFolder root/{train,val}/<class>/*.png of 32 px stripes, drawn as
// scripts/torch_pth_fixtures.py draws the task testdata/finetune/stripes4.pth was trained on: class
// k's stripes run along directions[k], with a random period in [6, 12) px, phase and two colours at
// least 0.3 apart on average, plus noise.
func stripesTree(t *testing.T, root string, classes []string, directions [][2]float64, train, val int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	const size = 32
	for split, n := range map[string]int{"train": train, "val": val} {
		for c, class := range classes {
			dir := filepath.Join(root, split, class)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			dx, dy := directions[c][0], directions[c][1]
			for i := range n {
				period, phase := 6+6*rng.Float64(), 2*math.Pi*rng.Float64()
				var fg, bg [3]float64
				for {
					var diff float64
					for ch := range 3 {
						fg[ch], bg[ch] = rng.Float64(), rng.Float64()
						diff += math.Abs(fg[ch]-bg[ch]) / 3
					}
					if diff >= 0.3 {
						break
					}
				}
				img := image.NewNRGBA(image.Rect(0, 0, size, size))
				for y := range size {
					for x := range size {
						col := bg
						if math.Sin(2*math.Pi*(float64(x)*dx+float64(y)*dy)/period+phase) >= 0 {
							col = fg
						}
						var px [3]uint8
						for ch := range 3 {
							px[ch] = uint8(math.Round(255 * min(1, max(0, col[ch]+0.05*rng.NormFloat64()))))
						}
						img.SetNRGBA(x, y, color.NRGBA{R: px[0], G: px[1], B: px[2], A: 255})
					}
				}
				var buf bytes.Buffer
				if err := png.Encode(&buf, img); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.png", i)), buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestFineTuneLearnsFasterThanScratch fine-tunes the reduced ResNet-50 that torch trained on 4
// classes of stripes (net.pretrained: a .pth) on a 3-class stripes ImageFolder: the classifier is
// re-initialised (a line names the skipped tensors), the rest loaded, and after the same few steps
// from the same seed it scores far better than the same net trained from scratch.
func TestFineTuneLearnsFasterThanScratch(t *testing.T) {
	tree := t.TempDir()
	d := 1 / math.Sqrt2
	stripesTree(t, tree, []string{"diagonal", "horizontal", "vertical"}, [][2]float64{{d, d}, {0, 1}, {1, 0}}, 24, 16)
	pretrained, err := filepath.Abs(filepath.Join("testdata", "finetune", "stripes4.pth"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(name, weights string, edit func(*config.OptimizerConfig)) (Result, string) {
		c := config.Defaults()
		c.Name, c.RunDir = name, t.TempDir()
		c.Net.Name, c.Net.Width, c.Net.ImageSize, c.Net.NumClasses = "resnet50", 1.0/16, 32, 3
		c.Net.Pretrained = weights
		c.Data.Source, c.Data.Dir = "imagefolder", tree
		c.Data.BatchSize, c.Data.EvalBatchSize, c.Data.EvalCropPct = 12, 48, 1
		c.Optimizer = config.OptimizerConfig{Name: "adamw", LR: 2e-3, Momentum: -1, Beta1: -1, Beta2: -1, Epsilon: -1, Rho: -1,
			AccumulateSteps: 1}
		if edit != nil {
			edit(&c.Optimizer)
		}
		c.Steps, c.Eval.EveryEpochs, c.Seed = 12, 0, 3
		if err := recipe.Validate(c); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		res, err := Run(c, RunOptions{Out: &out})
		if err != nil {
			t.Fatal(err)
		}
		return res, out.String()
	}
	tunedRun, log := run("tuned", pretrained, nil)
	scratchRun, _ := run("scratch", "", nil)
	tuned, scratch := tunedRun.Eval, scratchRun.Eval
	t.Logf("after 12 steps: fine-tuned top-1 %.3f loss %.3f; from scratch top-1 %.3f loss %.3f", tuned.Top1, tuned.Loss, scratch.Top1, scratch.Loss)
	for _, want := range []string{"pretrained weights: 265 of the net's 267 tensors from " + pretrained,
		"classifier re-initialised for 3 classes; skipped: fc.bias [4] (the net's is [3]), fc.weight [4 128] (the net's is [3 128])"} {
		if !strings.Contains(log, want) {
			t.Errorf("the run's output lacks %q:\n%s", want, log)
		}
	}
	if !(tuned.Top1 >= 0.8 && tuned.Top1 >= scratch.Top1+0.3 && tuned.Loss < scratch.Loss-0.3) {
		t.Errorf("fine-tuned top-1 %.3f loss %.3f, from scratch %.3f and %.3f: want >= 0.8, 0.3 better, loss 0.3 lower",
			tuned.Top1, tuned.Loss, scratch.Top1, scratch.Loss)
	}
}

// TestFineTuneFrozenBackbone trains only layer4 (at half the rate) and the new classifier of the
// pretrained net: it learns as fast, and its checkpoint holds the frozen weights exactly as the .pth
// gave them, with optimizer slots for the trained variables only.
func TestFineTuneFrozenBackbone(t *testing.T) {
	tree := t.TempDir()
	d := 1 / math.Sqrt2
	stripesTree(t, tree, []string{"diagonal", "horizontal", "vertical"}, [][2]float64{{d, d}, {0, 1}, {1, 0}}, 24, 16)
	pth := filepath.Join("testdata", "finetune", "stripes4.pth")
	c := config.Defaults()
	c.Name, c.RunDir = "frozen", t.TempDir()
	c.Net.Name, c.Net.Width, c.Net.ImageSize, c.Net.NumClasses, c.Net.Pretrained = "resnet50", 1.0/16, 32, 3, pth
	c.Data.Source, c.Data.Dir = "imagefolder", tree
	c.Data.BatchSize, c.Data.EvalBatchSize, c.Data.EvalCropPct = 12, 48, 1
	c.Optimizer.LR, c.Optimizer.Momentum = 0.05, 0.9
	c.Optimizer.Freeze = []string{"conv1", "bn1", "layer[1-3]"}
	c.Optimizer.LRMult = map[string]float64{"layer4": 0.5}
	c.Steps, c.Eval.EveryEpochs, c.Seed = 12, 0, 3
	if err := recipe.Validate(c); err != nil {
		t.Fatal(err)
	}
	res, err := Run(c, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("frozen backbone, after 12 steps: top-1 %.3f loss %.3f", res.Eval.Top1, res.Eval.Loss)
	if res.Eval.Top1 < 0.8 {
		t.Errorf("frozen backbone: top-1 %.3f after 12 steps, want >= 0.8", res.Eval.Top1)
	}
	ckpt, err := checkpoint.Load(res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	f, err := weights.ReadStateDict(pth)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := f.Tensors["layer2.1.conv2.weight"].Float64s() // OIHW; the checkpoint holds HWIO
	got := tensors.MustCopyFlatData[float32](ckpt.Tensors["/model/layer2/1/conv2/weight"])
	dims := ckpt.Tensors["/model/layer2/1/conv2/weight"].Shape().Dimensions
	kh, kw, in, out := dims[0], dims[1], dims[2], dims[3]
	for o := range out {
		for i := range in {
			for y := range kh {
				for x := range kw {
					if g, w := got[((y*kw+x)*in+i)*out+o], want[((o*in+i)*kh+y)*kw+x]; float64(g) != w {
						t.Fatalf("frozen layer2.1.conv2.weight[%d,%d,%d,%d] is %g after training, the .pth's %g", o, i, y, x, g, w)
					}
				}
			}
		}
	}
	var slots []string
	for name := range ckpt.Tensors {
		if strings.HasPrefix(name, "/optimizer/") {
			slots = append(slots, name)
			if !strings.HasPrefix(name, "/optimizer/model/layer4/") && !strings.HasPrefix(name, "/optimizer/model/fc/") {
				t.Errorf("optimizer slot %s of a frozen variable", name)
			}
		}
	}
	if len(slots) == 0 {
		t.Error("no optimizer slots at all")
	}
}

// net.pretrained by URL: the run downloads the weights into the cache once and checks them against the
// net before anything trains; weights of another width are refused with every mismatch listed.
func TestPretrainedURLIsCachedAndChecked(t *testing.T) {
	pth, err := os.ReadFile(filepath.Join("testdata", "finetune", "stripes4.pth"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(pth)
	name := "stripes4-" + hex.EncodeToString(sum[:])[:8] + ".pth"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(pth))
	}))
	defer srv.Close()
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	tree := t.TempDir()
	stripesTree(t, tree, []string{"h", "v"}, [][2]float64{{0, 1}, {1, 0}}, 4, 2)
	c := config.Defaults()
	c.Name, c.RunDir = "url", t.TempDir()
	c.Net.Name, c.Net.Width, c.Net.ImageSize, c.Net.NumClasses = "resnet50", 1.0/8, 32, 2
	c.Net.Pretrained = srv.URL + "/weights/" + name
	c.Data.Source, c.Data.Dir, c.Data.BatchSize, c.Data.EvalBatchSize = "imagefolder", tree, 4, 4
	c.Steps = 1
	if err := recipe.Validate(c); err != nil {
		t.Fatal(err)
	}
	_, err = Run(c, RunOptions{Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "net.pretrained: weights "+filepath.Join(cache, "trainer", "weights", name)) ||
		!strings.Contains(err.Error(), "shape mismatches") || !strings.Contains(err.Error(), "conv1.weight: file [4 3 7 7], net expects [8 3 7 7]") {
		t.Errorf("weights of another width: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cache, "trainer", "weights", name)); err != nil {
		t.Errorf("the download is not in the cache: %v", err)
	}
}
