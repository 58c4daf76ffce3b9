// Package plot draws training charts as PNG files with gonum.org/v1/plot: a run's schedule (learning
// rate, EMA decay) and a run's metrics.jsonl (loss, learning rate, accuracy and a zoomed accuracy panel).
package plot

import (
	"bytes"
	"errors"
	"image/color"
	"io"
	"math"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/trainer/trainer/internal/atomicfile"
)

// Size of one panel in pixels, at DPI (gonum's fonts are sized in points); a file of n panels is n
// panels high.
const (
	PanelWidthPx, PanelHeightPx = 990, 374
	DPI                         = 110
)

// Line colours (the first of matplotlib's tab10), distinguishable on white and by most colour-blind eyes.
var (
	blue   = color.RGBA{31, 119, 180, 255}
	orange = color.RGBA{255, 127, 14, 255}
	green  = color.RGBA{44, 160, 44, 255}
)

// Chart is one panel: a gonum plot and the plotters drawn on it, listed here because gonum keeps its own
// list private and the tests look at what was drawn.
type Chart struct {
	Plot     *gplot.Plot
	Plotters []gplot.Plotter
}

// newChart starts a panel; stepAxis labels its x axis once the data is in.
func newChart(title, yLabel string) *Chart {
	p := gplot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(4)
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Legend.ThumbnailWidth = vg.Points(24)
	p.Legend.TextStyle.Font.Size = vg.Points(10)
	for _, st := range []*text.Style{&p.Title.TextStyle, &p.X.Label.TextStyle, &p.Y.Label.TextStyle,
		&p.X.Tick.Label, &p.Y.Tick.Label, &p.Legend.TextStyle} {
		st.Font.Variant = "Sans" // gonum's default serif face reads poorly at tick-label size
	}
	p.Title.TextStyle.Font.Size = vg.Points(13)
	c := &Chart{Plot: p}
	c.add(grid{})
	return c
}

// grid draws light lines at the major ticks and fainter ones at the minor ticks, so that values between
// the (few) labelled ticks can be read off.
type grid struct{}

func (grid) Plot(c draw.Canvas, p *gplot.Plot) {
	trX, trY := p.Transforms(&c)
	major := draw.LineStyle{Color: color.Gray{Y: 205}, Width: vg.Points(0.5)}
	minor := draw.LineStyle{Color: color.Gray{Y: 235}, Width: vg.Points(0.5)}
	style := func(t gplot.Tick) draw.LineStyle {
		if t.IsMinor() {
			return minor
		}
		return major
	}
	for _, t := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if x := trX(t.Value); x >= c.Min.X && x <= c.Max.X {
			c.StrokeLine2(style(t), x, c.Min.Y, x, c.Max.Y)
		}
	}
	for _, t := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if y := trY(t.Value); y >= c.Min.Y && y <= c.Max.Y {
			c.StrokeLine2(style(t), c.Min.X, y, c.Max.X, y)
		}
	}
}

func (c *Chart) add(ps ...gplot.Plotter) {
	c.Plot.Add(ps...)
	c.Plotters = append(c.Plotters, ps...)
}

// segments splits a series at its non-finite values (a diverged loss is logged as null; a log axis has
// no place for zero), so that a gap is drawn where data is missing.
func segments(x, y []float64) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for i := range x {
		if !finite(x[i]) || !finite(y[i]) {
			if len(cur) > 0 {
				out = append(out, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, plotter.XY{X: x[i], Y: y[i]})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// thin keeps, of each of about buckets runs of consecutive points, the first, lowest, highest and last:
// the line looks the same at a panel's resolution (its steps and spikes stay), and a schedule of 1.7
// million steps draws in a fraction of a second instead of seconds.
func thin(xys plotter.XYs, buckets int) plotter.XYs {
	size := len(xys) / buckets
	if size < 8 {
		return xys
	}
	out := make(plotter.XYs, 0, 4*buckets+4)
	for start := 0; start < len(xys); start += size {
		run := xys[start:min(start+size, len(xys))]
		lo, hi := 0, 0
		for i, p := range run {
			if p.Y < run[lo].Y {
				lo = i
			}
			if p.Y > run[hi].Y {
				hi = i
			}
		}
		keep := []int{0, min(lo, hi), max(lo, hi), len(run) - 1}
		for j, i := range keep {
			if j == 0 || i != keep[j-1] {
				out = append(out, run[i])
			}
		}
	}
	return out
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// line draws a series as a solid line, named in the legend once.
func (c *Chart) line(name string, x, y []float64, col color.Color, width vg.Length) {
	for i, seg := range segments(x, y) {
		l, err := plotter.NewLine(thin(seg, 2000))
		if err != nil {
			panic(err) // segments holds only finite values
		}
		l.Color, l.Width = col, width
		c.add(l)
		if i == 0 && name != "" {
			c.Plot.Legend.Add(name, l)
		}
	}
}

// points draws a sparse series (evaluations) as markers joined by a thin line: a single evaluation is a
// visible marker, not an invisible line of length zero.
func (c *Chart) points(name string, x, y []float64, col color.Color, shape draw.GlyphDrawer) {
	for i, seg := range segments(x, y) {
		l, s, err := plotter.NewLinePoints(seg)
		if err != nil {
			panic(err)
		}
		l.Color, l.Width = col, vg.Points(1.2)
		s.Color, s.Shape, s.Radius = col, shape, vg.Points(3.5)
		c.add(l, s)
		if i == 0 {
			c.Plot.Legend.Add(name, l, s)
		}
	}
}

// noisy draws a noisy series (train loss or accuracy at each log step) as TensorBoard does: the raw values
// as a faded line and their debiased exponential moving average (Smooth) on top; weight 0 draws only
// the raw values. The axis's transform applies after the smoothing.
func (c *Chart) noisy(name string, x, y []float64, col color.RGBA, weight float64, axis transform) {
	if weight <= 0 {
		c.line(name, x, axis.apply(y), col, vg.Points(1.5))
		return
	}
	faded := color.NRGBA{R: col.R, G: col.G, B: col.B, A: 70}
	c.line("", x, axis.apply(y), faded, vg.Points(1))
	c.line(name+" (smoothed)", x, axis.apply(Smooth(y, weight)), col, vg.Points(1.8))
}

// Smooth returns the exponential moving average of y with weight w in [0, 1), debiased as TensorBoard's
// smoothing slider does so that the first values are not pulled towards zero: a = w·a + (1−w)·y from
// a = 0, and s = a / (1 − w^n) after n finite values. Non-finite values pass through and do not enter
// the average.
func Smooth(y []float64, weight float64) []float64 {
	out := make([]float64, len(y))
	avg, n := 0.0, 0
	for i, v := range y {
		if !finite(v) {
			out[i] = v
			continue
		}
		avg = weight*avg + (1-weight)*v
		n++
		out[i] = avg / (1 - math.Pow(weight, float64(n)))
	}
	return out
}

// WritePNG renders the charts stacked vertically, their data areas aligned, as one PNG.
func WritePNG(w io.Writer, charts ...*Chart) error {
	if len(charts) == 0 {
		return errors.New("plot: no charts")
	}
	inches := func(px int) vg.Length { return vg.Length(px) * vg.Inch / DPI }
	img := vgimg.NewWith(vgimg.UseWH(inches(PanelWidthPx), inches(len(charts)*PanelHeightPx)), vgimg.UseDPI(DPI),
		vgimg.UseBackgroundColor(color.White))
	plots := make([][]*gplot.Plot, len(charts))
	for i, c := range charts {
		plots[i] = []*gplot.Plot{c.Plot}
	}
	tiles := draw.Tiles{Rows: len(charts), Cols: 1, PadX: vg.Points(10), PadY: vg.Points(14),
		PadTop: vg.Points(8), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(14)}
	canvases := gplot.Align(plots, tiles, draw.New(img))
	for i, c := range charts {
		c.Plot.Draw(canvases[i][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// WritePNGFile writes the charts to path atomically.
func WritePNGFile(path string, charts ...*Chart) error {
	var buf bytes.Buffer
	if err := WritePNG(&buf, charts...); err != nil {
		return err
	}
	return atomicfile.Write(path, buf.Bytes())
}
