package trainer

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/recipe"
)

// imagenetteTree writes an Imagenette-shaped tree: root/{train,val}/<wnid>/<n>.png, 40x48 images whose
// colour depends on the class.
func imagenetteTree(t *testing.T, root string, classes, train, val int) {
	t.Helper()
	for split, n := range map[string]int{"train": train, "val": val} {
		for c := range classes {
			dir := filepath.Join(root, split, data.ImagenetteClasses[c])
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				img := image.NewNRGBA(image.Rect(0, 0, 40, 48))
				for y := range 48 {
					for x := range 40 {
						v := uint8((x*7 + y*3 + i*11) % 64)
						img.SetNRGBA(x, y, color.NRGBA{R: uint8(80*c) + v, G: v * 2, B: 255 - uint8(60*c) - v, A: 255})
					}
				}
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s_%d.png", split, i)))
				if err != nil {
					t.Fatal(err)
				}
				if err := png.Encode(f, img); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
		}
	}
}

// Pack a generated Imagenette-shaped tree, train a reduced ResNet-50 on the shards with
// RandomResizedCrop, flips, random erasing, mixup, cutmix, dropout, drop path and EMA, and resume
// mid-epoch: the resumed run ends with the same weights.
func TestRunFromShardsResumesExactly(t *testing.T) {
	tree, shards := t.TempDir(), t.TempDir()
	imagenetteTree(t, tree, 3, 6, 2)
	for _, split := range []string{"train", "val"} {
		src, err := data.OpenImageFolder(filepath.Join(tree, split))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := data.Pack(src, filepath.Join(shards, split), split, data.PackOptions{ShardSize: 20000}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := func(name string) config.Config {
		c := config.Defaults()
		c.Name, c.RunDir = name, t.TempDir()
		c.Net.Name, c.Net.Width, c.Net.ImageSize, c.Net.NumClasses = "resnet50", 1.0/16, 32, 3
		c.Data.Source, c.Data.Dir = "shards", shards
		c.Data.BatchSize, c.Data.EvalBatchSize, c.Data.Workers = 4, 4, 2
		c.Data.Augment.RandomResizedCropScale = []float64{0.35, 1}
		c.Data.Augment.HFlip = 0.5
		c.Data.Augment.RandomErasing = 0.5
		c.Data.Augment.RandAugment = "rand-m9-mstd0.5-inc1"
		c.Data.Augment.MixupAlpha, c.Data.Augment.CutmixAlpha = 0.8, 1
		// Every source of randomness a resume must restore: augmentation, mixing, dropout and
		// stochastic-depth masks (the graph RNG), and the EMA shadows.
		c.Net.Dropout, c.Net.DropPath = 0.2, 0.2
		c.Data.Augment.RepeatedAug = 2
		c.EMA = config.EMAConfig{Decay: 0.9, Warmup: true}
		c.Steps = 6 // 18 images / 4 = 4 steps per epoch: step 5 is mid-epoch 1
		c.Optimizer.LR = 0.002
		c.Checkpoint = config.CheckpointConfig{EverySteps: 5, Keep: 3}
		c.Eval.EveryEpochs = 0
		if err := recipe.Validate(c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	a := cfg("a")
	resA, err := Run(a, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if resA.Step != 6 || resA.Eval.Examples != 6 {
		t.Fatalf("ran %d steps, eval saw %d images; want 6 and all 6", resA.Step, resA.Eval.Examples)
	}
	b := cfg("b")
	resB := rerunFrom(t, b, 6)
	sameCheckpoints(t, resA.Checkpoint, resB.Checkpoint, 100)
	if resA.Eval != resB.Eval {
		t.Errorf("eval %+v after the uninterrupted run, %+v after the resumed one", resA.Eval, resB.Eval)
	}
}

func TestMissingDataPathSaysHowToPack(t *testing.T) {
	c := config.Defaults()
	c.Name, c.RunDir = "x", t.TempDir()
	c.Net.Name, c.Net.Width, c.Net.ImageSize = "resnet50", 1.0/16, 32
	c.Data.Source, c.Data.Train, c.Data.Eval = "shards", filepath.Join(t.TempDir(), "nowhere"), "/tmp/x"
	_, err := Run(c, RunOptions{Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "nowhere") || !strings.Contains(err.Error(), "trainer data pack") ||
		!strings.Contains(err.Error(), "data.train") {
		t.Errorf("missing shards: %v", err)
	}
	c.Data.Augment.HFlip = 0.5
	c.Data.Source = "mnist"
	if err := recipe.Validate(c); err == nil || !strings.Contains(err.Error(), "data.augment") {
		t.Errorf("augmenting MNIST: %v", err)
	}
}

// TestEvalAtAnotherResolution trains a convolutional net at 32 px and evaluates it at 48 px
// (data.eval_image_size, as RSB-A3 trains at 160 and evaluates at 224) straight from an ImageFolder.
func TestEvalAtAnotherResolution(t *testing.T) {
	tree := t.TempDir()
	imagenetteTree(t, tree, 3, 4, 2)
	c := config.Defaults()
	c.Name, c.RunDir = "evalsize", t.TempDir()
	c.Net.Name, c.Net.Width, c.Net.ImageSize, c.Net.NumClasses = "resnet50", 1.0/16, 32, 3
	c.Data.Source, c.Data.Dir = "imagefolder", tree
	c.Data.BatchSize, c.Data.EvalBatchSize, c.Data.EvalImageSize = 4, 4, 48
	c.Steps, c.Eval.EveryEpochs = 2, 0
	if err := recipe.Validate(c); err != nil {
		t.Fatal(err)
	}
	res, err := Run(c, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if res.Eval.Examples != 6 || math.IsNaN(res.Eval.Loss) {
		t.Errorf("eval at 48 px: %+v; want all 6 images scored", res.Eval)
	}
	s, err := newSession(c)
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.loader("test", 4, false)
	if err != nil {
		t.Fatal(err)
	}
	if h, w, _ := l.Shape(); h != 48 || w != 48 {
		t.Errorf("eval loader yields %dx%d images, want 48x48", h, w)
	}
}

// TestFlagshipWithoutDataStopsAtOnce: the EfficientNet-B0 recipe without ImageNet names the missing
// path, the key and how to pack one, and creates no run directory.
func TestFlagshipWithoutDataStopsAtOnce(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "imagenet")
	runDir := t.TempDir()
	cfg, err := recipe.Load(filepath.Join("..", "configs", "effnet_b0_rmsprop.yaml"), []string{"data.dir=" + missing, "run_dir=" + runDir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(cfg, RunOptions{Out: io.Discard})
	for _, want := range []string{"data.train", filepath.Join(missing, "train"), "not found", "trainer data pack"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
	}
	if entries, _ := os.ReadDir(runDir); len(entries) != 0 {
		t.Errorf("the failed run wrote %d entries under run_dir", len(entries))
	}
}

// TestRecipeWithoutDataSaysHowToGetIt: each dataset's recipe, without its data, says how to get that
// dataset: the fetch command for Imagenette, ImageNet's archives and the pack command, CIFAR-10's URL.
func TestRecipeWithoutDataSaysHowToGetIt(t *testing.T) {
	for file, want := range map[string][]string{
		"resnet50_sgd_imagenette.yaml": {"trainer data fetch imagenette DIRECTORY"},
		"resnet50_sgd.yaml":            {"ILSVRC2012_img_train.tar", "trainer data pack FOLDER DIRECTORY"},
		"cifar8_sgd.yaml":              {"cifar-10-binary.tar.gz", "-C DIRECTORY"},
	} {
		missing := filepath.Join(t.TempDir(), "DIRECTORY")
		cfg, err := recipe.Load(filepath.Join("..", "configs", file), []string{"data.dir=" + missing, "run_dir=" + t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Run(cfg, RunOptions{Out: io.Discard})
		for _, w := range append(want, "not found") {
			if err == nil || !strings.Contains(err.Error(), strings.ReplaceAll(w, "DIRECTORY", missing)) {
				t.Errorf("%s: got %v, want an error containing %q", file, err, strings.ReplaceAll(w, "DIRECTORY", missing))
			}
		}
	}
}

// A record whose bytes were damaged inside a shard stops the run naming the shard and the record
// (data.on_bad_record: stop); with skip the run trains to its end and metrics.jsonl counts the record.
func TestDamagedShardRecord(t *testing.T) {
	tree, shards := t.TempDir(), t.TempDir()
	imagenetteTree(t, tree, 2, 4, 2)
	for _, split := range []string{"train", "val"} {
		src, err := data.OpenImageFolder(filepath.Join(tree, split))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := data.Pack(src, filepath.Join(shards, split), split, data.PackOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := filepath.Glob(filepath.Join(shards, "train", "*.shard"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("train shards %v: %v", paths, err)
	}
	raw, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	info, err := data.ParseShard(strings.NewReader(string(raw)), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	raw[info.Offsets[3]+int64(info.Len(3)/2)] ^= 0x55 // one byte inside record 3
	if err := os.WriteFile(paths[0], raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := func(policy string) config.Config {
		c := config.Defaults()
		c.Name, c.RunDir = "damaged_"+policy, t.TempDir()
		c.Net.Name, c.Net.ImageSize, c.Net.NumClasses = "cifar_cnn", 32, 2
		c.Data.Source, c.Data.Dir, c.Data.OnBadRecord = "shards", shards, policy
		c.Data.BatchSize, c.Data.EvalBatchSize, c.Data.Workers = 2, 4, 1
		c.Epochs, c.Log.EverySteps = 1, 1
		if err := recipe.Validate(c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	_, err = Run(cfg(config.BadRecordStop), RunOptions{Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), paths[0]) || !strings.Contains(err.Error(), "record 3") {
		t.Errorf("stop: error %v, want one naming %s and record 3", err, paths[0])
	}
	skip := cfg(config.BadRecordSkip)
	res, err := Run(skip, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatalf("skip: %v", err)
	}
	if res.Step != 4 {
		t.Errorf("skip: ran %d steps, want the epoch's 4 (batches stay full)", res.Step)
	}
	log, err := os.ReadFile(filepath.Join(skip.Dir(), "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"skipped_records":1`) {
		t.Errorf("metrics.jsonl does not count the skipped record:\n%s", log)
	}
}

// TestHeadWiderThanTheDataIsRefused: a net with more outputs than the data has classes is refused
// before training (before: 2 classes trained into a 10-class head without a word).
func TestHeadWiderThanTheDataIsRefused(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := WriteSmokeData(dataDir); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := recipe.LoadSmoke("../configs/mnist_linear.yaml", []string{"run_dir=" + t.TempDir()}, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Net.NumClasses = 10
	_, err = Run(cfg, RunOptions{Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "has 2 classes") || !strings.Contains(err.Error(), "10 outputs") ||
		!strings.Contains(err.Error(), "net.num_classes") {
		t.Errorf("2 classes into a 10-class head: %v", err)
	}
}
