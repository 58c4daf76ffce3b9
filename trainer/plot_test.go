package trainer

import (
	"bytes"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/trainer/trainer/config"
)

// TestScheduleChartPeaksAtTheEndOfWarmup renders the lr and EMA panels and finds the lr line's highest
// pixel where the warmup ends.
func TestScheduleChartPeaksAtTheEndOfWarmup(t *testing.T) {
	cfg := config.Defaults()
	cfg.Name = "plot"
	cfg.Optimizer.LR = 0.1
	cfg.Schedule = config.ScheduleConfig{Name: "cosine", WarmupSteps: 50}
	cfg.EMA = config.EMAConfig{Decay: 0.999, Warmup: true}
	const total = 300
	charts := ScheduleCharts(cfg, total, 30)
	if len(charts) != 2 || len(charts[0].Series[0].Y) != total {
		t.Fatalf("%d charts", len(charts))
	}
	if got := charts[1].Series[0].Y[0]; got != 0.1 {
		t.Errorf("EMA decay at step 0: %g, want 0.1", got)
	}
	var buf bytes.Buffer
	if err := WritePNG(&buf, charts...); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != panelW || b.Dy() != 2*panelH {
		t.Fatalf("image %v, want %dx%d", b, panelW, 2*panelH)
	}
	peakX, peakY := -1, math.MaxInt
	for y := marginT + 1; y < panelH-marginB; y++ {
		for x := marginL + 1; x < panelW-marginR; x++ {
			if isColor(img, x, y, Blue) && y < peakY {
				peakX, peakY = x, y
			}
		}
	}
	want := marginL + int(math.Round(float64(49)/float64(total-1)*float64(panelW-marginR-marginL)))
	if peakX < want-2 || peakX > want+2 {
		t.Errorf("lr line peaks at x=%d (y=%d), want the end of warmup at x≈%d", peakX, peakY, want)
	}
}

func isColor(img image.Image, x, y int, c interface{ RGBA() (r, g, b, a uint32) }) bool {
	r1, g1, b1, _ := img.At(x, y).RGBA()
	r2, g2, b2, _ := c.RGBA()
	return r1 == r2 && g1 == g2 && b1 == b2
}

func TestRunChartsReadMetrics(t *testing.T) {
	dir := t.TempDir()
	log := `{"type":"train","step":10,"epoch":0.5,"loss":1.5,"accuracy":0.5,"lr":0.1,"images_per_sec":100}
{"type":"train","step":20,"epoch":1,"loss":0.9,"accuracy":0.7,"lr":0.05,"images_per_sec":100}
{"type":"eval","step":20,"epoch":1,"top1":0.8,"top5":0.95,"loss":0.7,"examples":100,"ema_top1":0.75,"ema_top5":0.9,"ema_loss":0.8}
`
	if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	charts, err := RunCharts(dir)
	if err != nil {
		t.Fatal(err)
	}
	acc := charts["accuracy.png"]
	if len(acc.Series) != 3 || acc.Series[2].Y[0] != 0.75 || acc.Series[0].Y[1] != 0.7 {
		t.Errorf("accuracy chart %+v", acc.Series)
	}
	if lr := charts["lr.png"].Series[0]; len(lr.Y) != 2 || lr.Y[1] != 0.05 || lr.X[1] != 1 {
		t.Errorf("lr series %+v", lr)
	}
	if _, err := RunCharts(t.TempDir()); err == nil {
		t.Error("a directory without metrics.jsonl gave no error")
	}
}
