package trainer

import (
	"encoding/csv"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/stats"
	"github.com/trainer/trainer/tensorboard"
)

// boardRun is 3 epochs of 4 steps on packed generated images, with an EMA, evaluating each epoch.
func boardRun(t *testing.T, shards, name string) config.Config {
	c := config.Defaults()
	c.Name, c.RunDir = name, t.TempDir()
	c.Net.Name, c.Net.ImageSize, c.Net.NumClasses = "cifar_cnn", 32, 3
	c.Data.Source, c.Data.Dir = "shards", shards
	c.Data.BatchSize, c.Data.EvalBatchSize, c.Data.Workers = 4, 4, 1
	c.EMA = config.EMAConfig{Decay: 0.9, Warmup: true}
	c.Epochs, c.Log.EverySteps = 3, 2
	c.Optimizer.LR = 0.01
	c.Checkpoint = config.CheckpointConfig{EverySteps: 5, Keep: 5}
	if err := recipe.Validate(c); err != nil {
		t.Fatal(err)
	}
	return c
}

func packedTree(t *testing.T) string {
	tree, shards := t.TempDir(), t.TempDir()
	imagenetteTree(t, tree, 3, 6, 2)
	for _, split := range []string{"train", "val"} {
		src, err := data.OpenImageFolder(filepath.Join(tree, split))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := data.Pack(src, filepath.Join(shards, split), split, data.PackOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return shards
}

func eventFiles(t *testing.T, dir string) []string {
	paths, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func readSummary(t *testing.T, dir string) [][]string {
	f, err := os.Open(filepath.Join(dir, SummaryName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestRunWritesTensorBoardAndSummary: a run writes one event file beside metrics.jsonl holding the
// resolved config as text and every train and eval record's numbers as scalars at their steps (the
// same values as metrics.jsonl, in float32), and summary.csv with one row per eval whose numbers are
// metrics.jsonl's; without log.tensorboard, summary.csv alone.
func TestRunWritesTensorBoardAndSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 12 steps")
	}
	shards := packedTree(t)
	cfg := boardRun(t, shards, "board")
	res, err := Run(cfg, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	files := eventFiles(t, res.Dir)
	if len(files) != 1 {
		t.Fatalf("%d event files, want 1", len(files))
	}
	events, err := tensorboard.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if events[0].FileVersion != tensorboard.FileVersion {
		t.Errorf("first event %+v", events[0])
	}
	type key struct {
		step int64
		tag  string
	}
	scalars := map[key]float32{}
	var text string
	for _, e := range events[1:] {
		for _, v := range e.Values {
			if v.Plugin == "text" {
				text = v.Text
			} else if v.IsSimple {
				scalars[key{e.Step, v.Tag}] = v.Simple
			}
		}
	}
	if want := "    name: board\n"; !strings.HasPrefix(text, want) || strings.Count(text, "\n")+1 != strings.Count(strings.TrimRight(string(cfg.YAML()), "\n"), "\n")+1 {
		t.Errorf("config text %q, want the resolved config indented as a code block", text)
	}
	records := metricsRecords(t, res.Dir)
	checked := 0
	for _, r := range records {
		typ, _ := r["type"].(string)
		fields := map[string][]string{"train": {"loss", "accuracy", "lr", "images_per_sec", "ema_decay"},
			"eval": {"top1", "top5", "loss", "ema_top1", "ema_top5", "ema_loss"}}[typ]
		for _, f := range fields {
			got, ok := scalars[key{int64(r["step"].(float64)), typ + "/" + f}]
			if !ok || got != float32(r[f].(float64)) {
				t.Errorf("%s/%s at step %v: event %v (%v), metrics.jsonl %v", typ, f, r["step"], got, ok, r[f])
			}
			checked++
		}
	}
	if checked != 6*5+3*6 {
		t.Errorf("%d values checked, want 6 train records of 5 and 3 evals of 6", checked)
	}
	rows := readSummary(t, res.Dir)
	evals := recordsOfType(records, "eval")
	if len(rows) != 1+len(evals) || strings.Join(rows[0], ",") != "epoch,step,train_loss,eval_loss,eval_top1,eval_top5,ema_top1,ema_top5,lr,eval_top1_lo,eval_top1_hi,ema_top1_lo,ema_top1_hi" {
		t.Fatalf("summary.csv:\n%v", rows)
	}
	trains := recordsOfType(records, "train")
	for i, ev := range evals {
		row := rows[i+1]
		num := func(col int) float64 { v, _ := strconv.ParseFloat(row[col], 64); return v }
		// Train records every 2 steps, evals every 4: each eval's train loss is the mean of its two records.
		wantLoss := (trains[2*i]["loss"].(float64) + trains[2*i+1]["loss"].(float64)) / 2
		if num(0) != ev["epoch"].(float64) || num(1) != ev["step"].(float64) || num(3) != ev["loss"].(float64) ||
			num(4) != 100*ev["top1"].(float64) || num(6) != 100*ev["ema_top1"].(float64) || num(8) != trains[2*i+1]["lr"].(float64) {
			t.Errorf("summary row %v, eval record %v", row, ev)
		}
		// The Wilson bounds are the log's and are the interval of the eval's hits.
		examples := ev["examples"].(float64)
		lo, hi := stats.Wilson(int(math.Round(ev["top1"].(float64)*examples)), int(examples), stats.Z95)
		if ev["top1_lo"].(float64) != lo || ev["top1_hi"].(float64) != hi || num(9) != 100*lo || num(10) != 100*hi ||
			num(11) != 100*ev["ema_top1_lo"].(float64) || num(12) != 100*ev["ema_top1_hi"].(float64) || !(num(11) <= num(6) && num(6) <= num(12)) {
			t.Errorf("summary row %v, eval record %v: want the 95%% Wilson interval [%v, %v] of top-1", row, ev, lo, hi)
		}
		if d := num(2) - wantLoss; d > 1e-12 || d < -1e-12 {
			t.Errorf("row %d train loss %v, want %v", i, row[2], wantLoss)
		}
	}

	off := boardRun(t, shards, "off")
	off.Log.TensorBoard = false
	off.Epochs = 1
	res, err = Run(off, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(eventFiles(t, res.Dir)); n != 0 {
		t.Errorf("log.tensorboard false wrote %d event files", n)
	}
	if rows := readSummary(t, res.Dir); len(rows) != 2 {
		t.Errorf("summary.csv without TensorBoard: %v", rows)
	}
}

// TestResumedRunBoardAndSummary: each process's event file starts with a session start just past the
// step it starts from (TensorBoard drops the older file's events from there on), and the resumed run's summary.csv,
// rebuilt from metrics.jsonl, equals the uninterrupted run's.
func TestResumedRunBoardAndSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 12 steps twice")
	}
	shards := packedTree(t)
	a := boardRun(t, shards, "a")
	resA, err := Run(a, RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	b := boardRun(t, shards, "b")
	if _, err := Run(b, RunOptions{Out: io.Discard}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(b.Dir(), "checkpoints", checkpoint.FileName(12)))
	os.Remove(filepath.Join(b.Dir(), "checkpoints", checkpoint.BestName))
	os.WriteFile(filepath.Join(b.Dir(), SummaryName), []byte("stale\n"), 0o644)
	resB, err := Run(b, RunOptions{Out: io.Discard, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if ra, rb := readSummary(t, resA.Dir), readSummary(t, resB.Dir); strings.Join(flatten(ra), "|") != strings.Join(flatten(rb), "|") {
		t.Errorf("summary.csv of the resumed run\n%v\nwant the uninterrupted run's\n%v", rb, ra)
	}
	files := eventFiles(t, resB.Dir)
	if len(files) != 2 {
		t.Fatalf("%d event files, want one per process", len(files))
	}
	var starts []int64
	for _, f := range files {
		events, err := tensorboard.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if e.SessionStatus == 1 {
				starts = append(starts, e.Step)
			}
		}
	}
	slices.Sort(starts)
	if !slices.Equal(starts, []int64{1, 11}) {
		t.Errorf("session starts at steps %v, want one at step 1 (the first process) and one past the resumed step 10", starts)
	}
}

func flatten(rows [][]string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, strings.Join(r, ","))
	}
	return out
}
