package trainer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/schedule"
)

// Series is one line of a chart.
type Series struct {
	Name  string
	X, Y  []float64
	Color color.RGBA
}

// Chart is one panel: lines over a shared x axis, the y range fitted to the data.
type Chart struct {
	Title  string
	XLabel string
	Series []Series
}

// Line colours, distinguishable on white.
var (
	Blue   = color.RGBA{31, 119, 180, 255}
	Orange = color.RGBA{255, 127, 14, 255}
	Green  = color.RGBA{44, 160, 44, 255}
	Red    = color.RGBA{214, 39, 40, 255}
)

const (
	panelW, panelH = 800, 300
	marginL        = 90
	marginR        = 20
	marginT        = 34
	marginB        = 40
	textScale      = 2
)

// WritePNG renders the charts stacked vertically as one PNG.
func WritePNG(w io.Writer, charts ...Chart) error {
	if len(charts) == 0 {
		return errors.New("plot: no charts")
	}
	img := image.NewRGBA(image.Rect(0, 0, panelW, panelH*len(charts)))
	fill(img, img.Bounds(), color.RGBA{255, 255, 255, 255})
	for i, c := range charts {
		c.draw(img, i*panelH)
	}
	return png.Encode(w, img)
}

// WritePNGFile writes the charts to path atomically.
func WritePNGFile(path string, charts ...Chart) error {
	var buf bytes.Buffer
	if err := WritePNG(&buf, charts...); err != nil {
		return err
	}
	return atomicfile.Write(path, buf.Bytes())
}

func (c Chart) draw(img *image.RGBA, top int) {
	x0, x1 := marginL, panelW-marginR
	y0, y1 := top+marginT, top+panelH-marginB
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for i := range s.X {
			if math.IsNaN(s.Y[i]) || math.IsInf(s.Y[i], 0) {
				continue
			}
			xmin, xmax = math.Min(xmin, s.X[i]), math.Max(xmax, s.X[i])
			ymin, ymax = math.Min(ymin, s.Y[i]), math.Max(ymax, s.Y[i])
		}
	}
	drawText(img, x0, top+8, c.Title, color.RGBA{0, 0, 0, 255})
	if math.IsInf(xmin, 0) {
		drawText(img, x0, y0+20, "no data", Red)
		return
	}
	if xmax == xmin {
		xmax = xmin + 1
	}
	if ymax == ymin {
		ymin, ymax = ymin-0.5*math.Max(math.Abs(ymin), 1e-12), ymax+0.5*math.Max(math.Abs(ymax), 1e-12)
	}
	pad := 0.04 * (ymax - ymin)
	ymin, ymax = ymin-pad, ymax+pad
	px := func(x float64) int { return x0 + int(math.Round((x-xmin)/(xmax-xmin)*float64(x1-x0))) }
	py := func(y float64) int { return y1 - int(math.Round((y-ymin)/(ymax-ymin)*float64(y1-y0))) }
	grid, axis, ink := color.RGBA{225, 225, 225, 255}, color.RGBA{60, 60, 60, 255}, color.RGBA{0, 0, 0, 255}
	const ticks = 5
	for i := 0; i <= ticks; i++ {
		yv := ymin + (ymax-ymin)*float64(i)/ticks
		y := py(yv)
		line(img, x0, y, x1, y, grid)
		label := formatTick(yv)
		drawText(img, x0-6-textWidth(label), y-5*textScale/2, label, ink)
		xv := xmin + (xmax-xmin)*float64(i)/ticks
		x := px(xv)
		line(img, x, y0, x, y1, grid)
		label = formatTick(xv)
		drawText(img, x-textWidth(label)/2, y1+6, label, ink)
	}
	line(img, x0, y0, x0, y1, axis)
	line(img, x0, y1, x1, y1, axis)
	drawText(img, x1-textWidth(c.XLabel), y1+6+7*textScale, c.XLabel, ink)
	legendX := x1
	for i := len(c.Series) - 1; i >= 0; i-- {
		s := c.Series[i]
		legendX -= textWidth(s.Name) + 30
		fill(img, image.Rect(legendX, top+10, legendX+16, top+14), s.Color)
		drawText(img, legendX+20, top+8, s.Name, ink)
	}
	for _, s := range c.Series {
		prevOK := false
		var lx, ly int
		for i := range s.X {
			if math.IsNaN(s.Y[i]) || math.IsInf(s.Y[i], 0) {
				prevOK = false
				continue
			}
			x, y := px(s.X[i]), py(s.Y[i])
			if prevOK {
				thickLine(img, lx, ly, x, y, s.Color)
			}
			if len(s.X) < 60 {
				fill(img, image.Rect(x-2, y-2, x+3, y+3), s.Color) // sparse series (evals) show their points
			}
			lx, ly, prevOK = x, y, true
		}
	}
}

// formatTick writes a tick value compactly: %.4g, with the exponent spelled out.
func formatTick(v float64) string {
	if math.Abs(v) < 1e-300 {
		return "0"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

// line draws with Bresenham's algorithm.
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		if (image.Point{x0, y0}).In(img.Bounds()) {
			img.SetRGBA(x0, y0, c)
		}
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func thickLine(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	line(img, x0, y0, x1, y1, c)
	line(img, x0, y0+1, x1, y1+1, c)
	line(img, x0+1, y0, x1+1, y1, c)
}

func abs(v int) int { return max(v, -v) }

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// glyphs is a 3×5 pixel font: enough for numbers, lower-case labels and a few signs.
var glyphs = map[rune]string{
	'0': "###|#.#|#.#|#.#|###", '1': ".#.|##.|.#.|.#.|###", '2': "###|..#|###|#..|###", '3': "###|..#|.##|..#|###",
	'4': "#.#|#.#|###|..#|..#", '5': "###|#..|###|..#|###", '6': "###|#..|###|#.#|###", '7': "###|..#|.#.|.#.|.#.",
	'8': "###|#.#|###|#.#|###", '9': "###|#.#|###|..#|###", '.': "...|...|...|...|.#.", '-': "...|...|###|...|...",
	'+': "...|.#.|###|.#.|...", ':': "...|.#.|...|.#.|...", '(': "..#|.#.|.#.|.#.|..#", ')': "#..|.#.|.#.|.#.|#..",
	'/': "..#|..#|.#.|#..|#..", '%': "#.#|..#|.#.|#..|#.#", '_': "...|...|...|...|###", ',': "...|...|...|.#.|#..",
	'=': "...|###|...|###|...", '*': "...|#.#|.#.|#.#|...", ' ': "...|...|...|...|...", '@': "###|#.#|#.#|#..|###",
	'a': "...|##.|..#|###|###", 'b': "#..|#..|###|#.#|###", 'c': "...|...|###|#..|###", 'd': "..#|..#|###|#.#|###",
	'e': "...|###|###|#..|###", 'f': ".##|#..|##.|#..|#..", 'g': "...|###|#.#|.##|##.", 'h': "#..|#..|###|#.#|#.#",
	'i': ".#.|...|.#.|.#.|.#.", 'j': "..#|...|..#|#.#|###", 'k': "#..|#.#|##.|#.#|#.#", 'l': "##.|.#.|.#.|.#.|###",
	'm': "...|###|###|#.#|#.#", 'n': "...|##.|#.#|#.#|#.#", 'o': "...|###|#.#|#.#|###", 'p': "...|###|#.#|###|#..",
	'q': "...|###|#.#|###|..#", 'r': "...|###|#..|#..|#..", 's': "...|.##|#..|..#|##.", 't': "#..|###|#..|#..|.##",
	'u': "...|#.#|#.#|#.#|###", 'v': "...|#.#|#.#|#.#|.#.", 'w': "...|#.#|#.#|###|###", 'x': "...|#.#|.#.|.#.|#.#",
	'y': "...|#.#|###|..#|###", 'z': "...|###|.#.|#..|###",
}

// textWidth is the width in pixels of s drawn by drawText.
func textWidth(s string) int { return len([]rune(s)) * 4 * textScale }

// drawText writes s (upper case folded to lower) with its top-left corner at (x, y).
func drawText(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, r := range strings.ToLower(s) {
		g, ok := glyphs[r]
		if !ok {
			g = glyphs['*']
		}
		for row, bits := range strings.Split(g, "|") {
			for col, b := range bits {
				if b == '#' {
					fill(img, image.Rect(x+col*textScale, y+row*textScale, x+(col+1)*textScale, y+(row+1)*textScale), c)
				}
			}
		}
		x += 4 * textScale
	}
}

// ScheduleCharts are the learning rate and (with ema.decay) the EMA decay over every optimizer step of
// the run, exactly as the loop computes them.
func ScheduleCharts(cfg config.Config, total int, perEpoch float64) []Chart {
	steps := make([]float64, total)
	lrs := make([]float64, total)
	decays := make([]float64, total)
	for t := range total {
		steps[t] = float64(t)
		lrs[t] = schedule.LearningRate(cfg, t, total, perEpoch)
		decays[t] = schedule.EMADecay(cfg.EMA, t)
	}
	charts := []Chart{{Title: fmt.Sprintf("%s: learning rate (%s, peak %g)", cfg.Name, cfg.Schedule.Name, cfg.PeakLR()),
		XLabel: "optimizer step", Series: []Series{{Name: "lr", X: steps, Y: lrs, Color: Blue}}}}
	if cfg.EMA.Decay > 0 {
		charts = append(charts, Chart{Title: fmt.Sprintf("ema decay (%g)", cfg.EMA.Decay), XLabel: "optimizer step",
			Series: []Series{{Name: "ema decay", X: steps, Y: decays, Color: Green}}})
	}
	return charts
}

// ScheduleLength returns the run's optimizer steps and optimizer steps per epoch, from the training
// split's size as the loop sees it.
func ScheduleLength(cfg config.Config) (total int, perEpoch float64, err error) {
	s, err := newSession(cfg)
	if err != nil {
		return 0, 0, err
	}
	loader, err := s.loader("train", cfg.Data.BatchSize, true)
	if err != nil {
		return 0, 0, err
	}
	micro := loader.StepsPerEpoch()
	if micro == 0 {
		return 0, 0, fmt.Errorf("data.batch_size %d is larger than the training split", cfg.Data.BatchSize)
	}
	total, perEpoch = schedule.Length(cfg, micro)
	return total, perEpoch, cfg.CheckScheduleLength(total, perEpoch)
}

// RunCharts reads a run directory's metrics.jsonl and returns its charts by file name: loss.png
// (train loss, eval loss), lr.png and accuracy.png (train, eval top-1, EMA top-1), against the epoch.
func RunCharts(dir string) (map[string]Chart, error) {
	f, err := os.Open(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var trainEpoch, trainLoss, trainAcc, lr, evalEpoch, evalLoss, evalTop1, emaTop1, emaEpoch []float64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", f.Name(), n, err)
		}
		num := func(key string) (float64, bool) {
			v, ok := rec[key].(float64)
			return v, ok
		}
		epoch, _ := num("epoch")
		switch rec["type"] {
		case "train":
			loss, _ := num("loss")
			acc, _ := num("accuracy")
			rate, _ := num("lr")
			trainEpoch, trainLoss, trainAcc, lr = append(trainEpoch, epoch), append(trainLoss, loss), append(trainAcc, acc), append(lr, rate)
		case "eval":
			loss, _ := num("loss")
			top1, _ := num("top1")
			evalEpoch, evalLoss, evalTop1 = append(evalEpoch, epoch), append(evalLoss, loss), append(evalTop1, top1)
			if v, ok := num("ema_top1"); ok {
				emaEpoch, emaTop1 = append(emaEpoch, epoch), append(emaTop1, v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(trainEpoch) == 0 && len(evalEpoch) == 0 {
		return nil, fmt.Errorf("%s: no train or eval records", f.Name())
	}
	name := filepath.Base(dir)
	acc := Chart{Title: name + ": accuracy", XLabel: "epoch", Series: []Series{
		{Name: "train", X: trainEpoch, Y: trainAcc, Color: Blue}, {Name: "eval top-1", X: evalEpoch, Y: evalTop1, Color: Orange}}}
	if len(emaTop1) > 0 {
		acc.Series = append(acc.Series, Series{Name: "ema top-1", X: emaEpoch, Y: emaTop1, Color: Green})
	}
	return map[string]Chart{
		"loss.png": {Title: name + ": loss", XLabel: "epoch", Series: []Series{
			{Name: "train", X: trainEpoch, Y: trainLoss, Color: Blue}, {Name: "eval", X: evalEpoch, Y: evalLoss, Color: Orange}}},
		"lr.png":       {Title: name + ": learning rate", XLabel: "epoch", Series: []Series{{Name: "lr", X: trainEpoch, Y: lr, Color: Blue}}},
		"accuracy.png": acc,
	}, nil
}
