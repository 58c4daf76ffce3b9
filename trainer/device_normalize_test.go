package trainer

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/trainstep"
)

// deviceNormConfig trains a narrow VGG with BatchNorm (cifar8_bn, 3 channels at 16 px) from a
// generated ImageFolder with crop, flip and RandAugment, and EMA, so the train step, the eval and the
// EMA eval all take the batches device_normalize says.
func deviceNormConfig(t *testing.T, name, runDir, root string, dn config.Switch) config.Config {
	t.Helper()
	c := config.Defaults()
	c.Name, c.RunDir = name, runDir
	c.Net.Name, c.Net.Width, c.Net.ImageSize, c.Net.NumClasses = "cifar8_bn", 1.0/16, 16, 3
	c.Data.Source, c.Data.Dir = "imagefolder", root
	c.Data.BatchSize, c.Data.EvalBatchSize, c.Data.Workers = 4, 4, 2
	c.Data.Augment.RandomResizedCropScale = []float64{0.35, 1}
	c.Data.Augment.HFlip = 0.5
	c.Data.Augment.RandAugment = "rand-m9-mstd0.5"
	c.Data.DeviceNormalize = dn
	c.EMA = config.EMAConfig{Decay: 0.9, Warmup: true}
	c.Steps = 4 // 12 images / 4: step 4 is in epoch 1
	c.Optimizer.LR = 0.05
	c.Checkpoint = config.CheckpointConfig{EverySteps: 2, Keep: 3}
	c.Eval.EveryEpochs = 1
	c.Log.EverySteps = 1
	if err := recipe.Validate(c); err != nil {
		t.Fatal(err)
	}
	return c
}

// trainLosses returns the loss of every train record of a run's log.
func trainLosses(t *testing.T, dir string) []float64 {
	t.Helper()
	var out []float64
	for _, r := range recordsOfType(metricsRecords(t, dir), "train") {
		out = append(out, r["loss"].(float64))
	}
	return out
}

// The uint8 batches normalised in the graph give the float batches' run bit for bit: every train
// loss, every tensor of the final checkpoint (weights, BatchNorm statistics, momentum, EMA shadows),
// the evals of the live and the EMA weights. A run resumed with the other setting continues it
// exactly too: device_normalize is not part of the state.
func TestDeviceNormalizeIsBitIdentical(t *testing.T) {
	root := t.TempDir()
	imagenetteTree(t, root, 3, 4, 2) // 12 train, 6 eval images: the last eval batch is padded
	var floatSteps, byteSteps int
	counted := func(f feed) feed {
		return watchedFeed{feed: f, k: 1, see: func(_, _ int, sh shards) {
			if sh.images[0].DType() == dtypes.Uint8 {
				byteSteps++ // the batch holds uint8 pixels
			} else {
				floatSteps++
			}
		}}
	}

	results := map[config.Switch]Result{}
	for _, dn := range []config.Switch{"true", "false"} {
		floatSteps, byteSteps = 0, 0
		cfg := deviceNormConfig(t, "dn_"+string(dn), t.TempDir(), root, dn)
		res, err := runWith(t, cfg, RunOptions{Out: io.Discard}, counted)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[config.Switch][2]int{"true": {0, 4}, "false": {4, 0}}[dn]; floatSteps != want[0] || byteSteps != want[1] {
			t.Fatalf("device_normalize %s: %d float and %d uint8 batches, want %v", dn, floatSteps, byteSteps, want)
		}
		if res.Eval.Examples != 6 || res.EMAEval.Examples != 6 {
			t.Fatalf("device_normalize %s: eval saw %d and %d images, want 6", dn, res.Eval.Examples, res.EMAEval.Examples)
		}
		results[dn] = res
	}
	on, off := results["true"], results["false"]
	lossOn, lossOff := trainLosses(t, on.Dir), trainLosses(t, off.Dir)
	if len(lossOn) != 4 || !slices.Equal(lossOn, lossOff) {
		t.Errorf("train losses %v with device_normalize, %v without", lossOn, lossOff)
	}
	if on.Eval != off.Eval || on.EMAEval != off.EMAEval {
		t.Errorf("evals %+v / EMA %+v with device_normalize, %+v / %+v without", on.Eval, on.EMAEval, off.Eval, off.EMAEval)
	}
	ckOn, ckOff := loadBoth(t, on.Checkpoint, off.Checkpoint)
	if len(ckOn.Tensors) < 40 || len(ckOn.Tensors) != len(ckOff.Tensors) {
		t.Fatalf("checkpoints hold %d and %d tensors", len(ckOn.Tensors), len(ckOff.Tensors))
	}
	if diff := differingTensors(ckOn, ckOff); len(diff) > 0 {
		t.Errorf("tensors differ between device_normalize true and false: %v", diff)
	}
	start, _ := loadBoth(t, filepath.Join(on.Dir, "checkpoints", checkpoint.FileName(2)), on.Checkpoint)
	if diff := differingTensors(start, ckOn); len(diff) < 20 {
		t.Fatalf("only %d tensors moved between steps 2 and 4: the comparison would not see a difference", len(diff))
	}

	// Resume the uint8 run from step 2 with host normalisation: accepted, and the same end.
	runDir := filepath.Dir(on.Dir)
	if err := os.Remove(on.Checkpoint); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	resumed, err := Run(deviceNormConfig(t, "dn_true", runDir, root, "false"), RunOptions{Out: &out, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "config change accepted on resume: data.device_normalize: true -> false") {
		t.Errorf("resume output lacks the accepted change:\n%s", out.String())
	}
	ckResumed, _ := loadBoth(t, resumed.Checkpoint, on.Checkpoint)
	if diff := differingTensors(ckResumed, ckOff); len(diff) > 0 || resumed.Eval != off.Eval {
		t.Errorf("resumed with the other setting: tensors %v differ, eval %+v vs %+v", diff, resumed.Eval, off.Eval)
	}
}

// With device_normalize a train step sends its batch as uint8: exactly a quarter of the float32
// pixel bytes, plus the same labels and scalars; eval batches likewise. Nothing else moves.
func TestDeviceNormalizeSendsBytes(t *testing.T) {
	root := t.TempDir()
	imagenetteTree(t, root, 3, 4, 2)
	const n, h, w, c = 4, 16, 16, 3
	const floatPixels, bytePixels = n * h * w * c * 4, n * h * w * c // 12288 and 3072
	perStep := map[config.Switch]int64{}
	perEval := map[config.Switch]int64{}
	for _, dn := range []config.Switch{"true", "false"} {
		goBackend, err := gobackend.New("")
		if err != nil {
			t.Fatal(err)
		}
		counter := backend.CountTransfers(goBackend)
		cfg := deviceNormConfig(t, "bytes", t.TempDir(), root, dn)
		cfg.EMA.Decay = 0
		s, err := sessionOn(cfg, counter)
		if err != nil {
			t.Fatal(err)
		}
		train, err := s.loader("train", n, true)
		if err != nil {
			t.Fatal(err)
		}
		eval, err := s.loader("test", n, false)
		if err != nil {
			t.Fatal(err)
		}
		if train.Uint8() != (dn == "true") || eval.Uint8() != (dn == "true") {
			t.Fatalf("device_normalize %s: loaders give uint8 %v (train), %v (eval)", dn, train.Uint8(), eval.Uint8())
		}
		step, err := s.newStep()
		if err != nil {
			t.Fatal(err)
		}
		it := train.Iterate(0, 0)
		i := 0
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			i++
			sc := trainstep.Scalars{LR: 0.05, Update: i, Apply: true}
			images, labels := imagesTensor(train, b), targetsTensor(b)
			in0, _ := counter.Transferred()
			if _, err := step.Run(images, labels, sc); err != nil {
				t.Fatal(err)
			}
			in1, _ := counter.Transferred()
			images.FinalizeAll()
			labels.FinalizeAll()
			if i == 1 {
				continue // the variables go over once
			}
			sent := in1 - in0 - int64(n*4+4*step.NumScalars())
			if prev, seen := perStep[dn]; seen && prev != sent {
				t.Errorf("device_normalize %s: step %d sent %d pixel bytes, an earlier one %d", dn, i, sent, prev)
			}
			perStep[dn] = sent
		}
		it.Close()
		if i != 3 {
			t.Fatalf("%d steps, want 3", i)
		}
		if _, err := s.evaluate(eval); err != nil { // compiles and sends the variables once
			t.Fatal(err)
		}
		in0, _ := counter.Transferred()
		if _, err := s.evaluate(eval); err != nil {
			t.Fatal(err)
		}
		in1, _ := counter.Transferred()
		perEval[dn] = in1 - in0
		step.Finalize()
		s.evalExec.Finalize()
		counter.Finalize()
	}
	if perStep["false"] != floatPixels || perStep["true"] != bytePixels {
		t.Errorf("a step sent %d pixel bytes with host normalisation, %d with device_normalize; want %d and %d",
			perStep["false"], perStep["true"], floatPixels, bytePixels)
	}
	// Eval: two batches of 4 (6 images, the second padded).
	if perEval["false"] != 2*floatPixels || perEval["true"] != 2*bytePixels {
		t.Errorf("an eval sent %d bytes with host normalisation, %d with device_normalize; want %d and %d",
			perEval["false"], perEval["true"], 2*floatPixels, 2*bytePixels)
	}
}
