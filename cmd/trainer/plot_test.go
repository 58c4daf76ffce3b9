package main

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlotRunWritesThreePNGs(t *testing.T) {
	dir := t.TempDir()
	log := `{"type":"train","step":10,"epoch":0.5,"loss":1.5,"accuracy":0.5,"lr":0.1}
{"type":"eval","step":20,"epoch":1,"top1":0.8,"loss":0.7,"ema_top1":0.75}
`
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := cmdPlot([]string{"run", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("%v (%s)", err, stderr.String())
	}
	for _, name := range []string{"loss.png", "lr.png", "accuracy.png"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(data)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !strings.Contains(stdout.String(), name) {
			t.Errorf("stdout %q does not list %s", stdout.String(), name)
		}
	}
	if err := cmdPlot([]string{"histogram"}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "schedule or run") {
		t.Errorf("unknown plot: %v", err)
	}
}

func TestPlotScheduleOfARecipe(t *testing.T) {
	out := filepath.Join(t.TempDir(), "s.png")
	var stdout, stderr bytes.Buffer
	err := cmdPlot([]string{"schedule", "../../configs/mnist_cnn_adamw_ema.yaml", "--out", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v (%s)", err, stderr.String())
	}
	// 60000 images / 64 = 937 steps per epoch, 2 epochs.
	if !strings.Contains(stdout.String(), "1874 optimizer steps") {
		t.Errorf("stdout %q, want 1874 optimizer steps", stdout.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds().Dy() != 600 {
		t.Errorf("schedule PNG is %v, want two 300-px panels (lr and EMA decay)", img.Bounds())
	}
}
