package plot

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// TestSmoothMatchesAHandComputation: weight 0.5 over 1, 2, NaN, 4. The averages are 0.5, 1.25 and
// 2.625, divided by 1-0.5^n for the n-th finite value: 1, 1.25/0.75, and 2.625/0.875 = 3; the NaN
// passes through without entering the average.
func TestSmoothMatchesAHandComputation(t *testing.T) {
	got := Smooth([]float64{1, 2, math.NaN(), 4}, 0.5)
	want := []float64{1, 1.25 / 0.75, math.NaN(), 3}
	for i := range want {
		if math.IsNaN(want[i]) != math.IsNaN(got[i]) || !math.IsNaN(want[i]) && math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("Smooth[%d] = %g, want %g", i, got[i], want[i])
		}
	}
	raw := []float64{3, 1, 2}
	if got := Smooth(raw, 0); got[0] != 3 || got[1] != 1 || got[2] != 2 {
		t.Errorf("weight 0 changed the values: %v", got)
	}
}

// TestThinKeepsTheShape: a million-step staircase with one spike keeps its first and last points, its
// spike and both levels of every step, in far fewer points.
func TestThinKeepsTheShape(t *testing.T) {
	xys := make(plotter.XYs, 1_000_000)
	for i := range xys {
		xys[i] = plotter.XY{X: float64(i), Y: float64(i / 100_000)}
	}
	xys[123_457].Y = 50
	got := thin(xys, 2000)
	if len(got) > 4*2000+4 || got[0] != xys[0] || got[len(got)-1] != xys[len(xys)-1] {
		t.Fatalf("%d points, ends %v %v", len(got), got[0], got[len(got)-1])
	}
	levels := map[float64]bool{}
	for i, p := range got {
		levels[p.Y] = true
		if i > 0 && p.X <= got[i-1].X {
			t.Fatalf("x not increasing at %d: %v after %v", i, p, got[i-1])
		}
	}
	if len(levels) != 11 || !levels[50] {
		t.Errorf("levels %v, want the 10 steps and the spike", levels)
	}
	if short := xys[:5000]; len(thin(short, 2000)) != len(short) {
		t.Error("a short series was thinned")
	}
}

// warmupCosine is a schedule with 50 warmup steps over 300 and an EMA whose decay warms up as
// (1+t)/(10+t) to 0.999.
func warmupCosine() Schedule {
	const total, warmup = 300, 50
	s := Schedule{LRTitle: "lr", EMATitle: "ema", StepsPerEpoch: 30}
	for t := range total {
		lr := 0.1 * float64(t+1) / warmup
		if t >= warmup {
			lr = 0.05 * (1 + math.Cos(math.Pi*float64(t-warmup)/float64(total-warmup)))
		}
		s.LR = append(s.LR, lr)
		s.EMADecay = append(s.EMADecay, math.Min(0.999, float64(1+t)/float64(10+t)))
	}
	return s
}

func lines(c *Chart) []*plotter.Line {
	var out []*plotter.Line
	for _, p := range c.Plotters {
		if l, ok := p.(*plotter.Line); ok {
			out = append(out, l)
		}
	}
	return out
}

func scatters(c *Chart) []*plotter.Scatter {
	var out []*plotter.Scatter
	for _, p := range c.Plotters {
		if s, ok := p.(*plotter.Scatter); ok {
			out = append(out, s)
		}
	}
	return out
}

// labels are the labelled ticks gonum would draw on the axis.
func labels(a gplot.Axis) []gplot.Tick {
	var out []gplot.Tick
	for _, t := range a.Tick.Marker.Ticks(a.Min, a.Max) {
		if !t.IsMinor() {
			out = append(out, t)
		}
	}
	return out
}

// TestScheduleChartsAxes: the lr line peaks at the end of warmup on an axis from 0; the decay axis
// (drawn as -log10(1-d)) spans decays in [0, 1) that hold every decay of the run, and its labels are decays.
func TestScheduleChartsAxes(t *testing.T) {
	charts := ScheduleCharts(warmupCosine())
	if len(charts) != 2 {
		t.Fatalf("%d charts, want lr and EMA decay", len(charts))
	}
	lr := charts[0]
	ls := lines(lr)
	if len(ls) != 1 || len(ls[0].XYs) != 300 {
		t.Fatalf("lr lines %v", ls)
	}
	peak := 0
	for i, p := range ls[0].XYs {
		if p.Y > ls[0].XYs[peak].Y {
			peak = i
		}
	}
	if x := ls[0].XYs[peak].X; x != 49 {
		t.Errorf("lr line peaks at step %g, want the end of warmup at 49", x)
	}
	if y := lr.Plot.Y; y.Min != 0 || y.Max < 0.1 {
		t.Errorf("lr axis [%g, %g], want from 0 to at least the peak 0.1", y.Min, y.Max)
	}
	if x := lr.Plot.X; x.Min != 0 || x.Max != 300 {
		t.Errorf("step axis [%g, %g], want the whole run [0, 300]", x.Min, x.Max)
	}

	// The decay warms up from 0.1 to 300/309 by the last step.
	y := charts[1].Plot.Y
	bottom, top := 1-math.Pow(10, -y.Min), 1-math.Pow(10, -y.Max)
	if !(bottom >= 0 && bottom <= 0.1 && top >= 300.0/309 && top < 1) {
		t.Errorf("decay axis spans decays [%g, %g], want within [0, 1) and holding [0.1, 0.971]", bottom, top)
	}
	for _, tick := range labels(y) {
		d, err := strconv.ParseFloat(tick.Label, 64)
		if err != nil || d < 0 || d >= 1 || math.Abs(math.Pow(10, -tick.Value)/(1-d)-1) > 0.02 {
			t.Errorf("decay tick %q at height %g: want a decay in [0, 1) at -log10(1-d)", tick.Label, tick.Value)
		}
	}
	var buf bytes.Buffer
	if err := WritePNG(&buf, charts...); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != PanelWidthPx || b.Dy() != 2*PanelHeightPx {
		t.Errorf("image %v, want %dx%d", b, PanelWidthPx, 2*PanelHeightPx)
	}
	if err := WritePNG(&buf); err == nil {
		t.Error("no charts gave no error")
	}
}

// TestStepAxisLabelsEpochs: over two epochs or more ticks fall on whole epochs, the step below;
// over less, on round steps, the epoch below.
func TestStepAxisLabelsEpochs(t *testing.T) {
	var a gplot.Axis
	a.Max = 2340
	stepAxis(&a, 468)
	got := labels(a)
	if len(got) != 6 || got[1].Label != "ep 1\n468" || got[5].Label != "ep 5\n2340" {
		t.Errorf("ticks over 5 epochs: %v", got)
	}
	a = gplot.Axis{Max: 300}
	stepAxis(&a, 937)
	for _, tick := range labels(a) {
		step, epoch, ok := strings.Cut(tick.Label, "\nep ")
		if !ok || step != strconv.FormatFloat(tick.Value, 'f', -1, 64) || epoch != strconv.FormatFloat(tick.Value/937, 'g', 3, 64) {
			t.Errorf("tick %q at step %g", tick.Label, tick.Value)
		}
	}
	if got := formatStep(1751400); got != "1,751,400" {
		t.Errorf("formatStep = %q", got)
	}
}

const metricsLog = `{"type":"train","step":10,"epoch":0.5,"loss":1.5,"accuracy":0.5,"lr":0.1,"images_per_sec":100}
{"type":"train","step":20,"epoch":1,"loss":0.9,"accuracy":0.7,"lr":0.05,"images_per_sec":100}
{"type":"eval","step":20,"epoch":1,"top1":0.8,"top5":0.95,"loss":0.7,"examples":100,"ema_top1":0.75,"ema_top5":0.9,"ema_loss":0.8}
{"type":"resume","step":20,"from":"ckpt"}
`

func writeMetrics(t *testing.T, log string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadMetrics(t *testing.T) {
	m, err := ReadMetrics(writeMetrics(t, metricsLog))
	if err != nil {
		t.Fatal(err)
	}
	if tr := m.Train; len(tr.Step) != 2 || tr.LR[1] != 0.05 || tr.Step[1] != 20 || tr.Epoch[1] != 1 || tr.Accuracy[1] != 0.7 {
		t.Errorf("train columns %+v", tr)
	}
	if ev := m.Eval; len(ev.Step) != 1 || ev.Top1[0] != 0.8 || ev.EMATop1[0] != 0.75 || ev.EMALoss[0] != 0.8 {
		t.Errorf("eval columns %+v", ev)
	}
	if m.StepsPerEpoch() != 20 || !m.HasEMA() {
		t.Errorf("steps per epoch %g, EMA %v", m.StepsPerEpoch(), m.HasEMA())
	}

	missing := filepath.Join(t.TempDir(), "metrics.jsonl")
	empty := writeMetrics(t, `{"type":"resume","step":0}`+"\n")
	// A damaged line followed by more records is corruption, not an interrupted append.
	corrupt := writeMetrics(t, metricsLog+`{"type":"tra`+"\n"+`{"type":"train","step":30,"loss":0.5}`+"\n")
	long := writeMetrics(t, metricsLog+strings.Repeat(" ", 2<<20)+"\n")
	for path, want := range map[string]string{missing: missing, empty: empty + ": no train or eval records", corrupt: corrupt + " line 5",
		long: long + " line 5: longer than"} {
		if _, err := ReadMetrics(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadMetrics(%s): %v, want an error naming %q", path, err, want)
		}
	}
}

// TestReadMetricsIgnoresATornLastLine: a full disk or a crash while appending leaves the last line cut
// short and without its newline; the records before it are read, the fragment is ignored with a note.
// A complete last line without a newline is a record like any other.
func TestReadMetricsIgnoresATornLastLine(t *testing.T) {
	for _, tail := range []string{`{"type":"tra`, `{"type":"train","step":30,"loss":0.`, "\x00\x00\x00"} {
		path := writeMetrics(t, metricsLog+tail)
		m, err := ReadMetrics(path)
		if err != nil {
			t.Fatalf("torn last line %q: %v", tail, err)
		}
		if len(m.Train.Step) != 2 || len(m.Eval.Step) != 1 {
			t.Errorf("torn last line %q: %d train and %d eval records, want 2 and 1", tail, len(m.Train.Step), len(m.Eval.Step))
		}
		if len(m.Notes) != 1 || !strings.Contains(m.Notes[0], path+" line 5: ignored a torn last line") {
			t.Errorf("torn last line %q: notes %q, want one naming line 5", tail, m.Notes)
		}
	}
	m, err := ReadMetrics(writeMetrics(t, metricsLog+`{"type":"train","step":30,"loss":0.5}`))
	if err != nil || len(m.Train.Step) != 3 || len(m.Notes) != 0 {
		t.Errorf("complete last line without a newline: %d train records, notes %q, %v", len(m.Train.Step), m.Notes, err)
	}
}

// run is a log of 10 epochs of 10 steps: train loss falling from 2 to about 0.02, accuracy rising to
// 99%, an evaluation at every epoch with EMA, and one diverged (null) train loss.
func run(t *testing.T) Metrics {
	var b strings.Builder
	for s := 1; s <= 100; s++ {
		loss := strconv.FormatFloat(2*math.Exp(-float64(s)/20)+0.01, 'g', -1, 64)
		if s == 50 {
			loss = "null"
		}
		b.WriteString(`{"type":"train","step":` + strconv.Itoa(s) + `,"epoch":` + strconv.FormatFloat(float64(s)/10, 'g', -1, 64) +
			`,"loss":` + loss + `,"accuracy":` + strconv.FormatFloat(0.99-0.9*math.Exp(-float64(s)/10), 'g', -1, 64) + `,"lr":0.1}` + "\n")
		if s%10 == 0 {
			top1 := strconv.FormatFloat(0.98+0.001*float64(s/10), 'g', -1, 64)
			b.WriteString(`{"type":"eval","step":` + strconv.Itoa(s) + `,"epoch":` + strconv.Itoa(s/10) + `,"loss":0.05,"top1":` + top1 +
				`,"ema_top1":` + top1 + `,"ema_loss":0.04}` + "\n")
		}
	}
	m, err := ReadMetrics(writeMetrics(t, b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRunChartsAxes: loss and lr axes never below 0 on a linear scale, a log loss axis holding every
// loss; the accuracy panel spans [0, 1], the zoom holds the evaluations of the second half on a range
// narrower than [0, 1].
func TestRunChartsAxes(t *testing.T) {
	m := run(t)
	charts := RunCharts(m, RunOptions{Name: "r", LogLoss: true, Smooth: 0.6})
	if len(charts) != 3 || len(charts["loss.png"]) != 1 || len(charts["lr.png"]) != 1 || len(charts["accuracy.png"]) != 2 {
		t.Fatalf("charts %v, want loss.png, lr.png and accuracy.png (full and zoomed)", charts)
	}
	if y := charts["lr.png"][0].Plot.Y; y.Min != 0 || y.Max != 0.1 {
		t.Errorf("lr axis [%g, %g], want [0, 0.1]", y.Min, y.Max)
	}
	logLoss := charts["loss.png"][0].Plot.Y
	for _, v := range append(m.Train.Loss, m.Eval.Loss...) {
		if finite(v) && (math.Log10(v) < logLoss.Min || math.Log10(v) > logLoss.Max) {
			t.Errorf("loss %g outside the log axis [%g, %g]", v, math.Pow(10, logLoss.Min), math.Pow(10, logLoss.Max))
		}
	}
	if y := RunCharts(m, RunOptions{Name: "r"})["loss.png"][0].Plot.Y; y.Min != 0 || y.Max != m.Train.Loss[0] {
		t.Errorf("linear loss axis [%g, %g], want from 0", y.Min, y.Max)
	}
	if y := charts["accuracy.png"][0].Plot.Y; y.Min != 0 || y.Max != 1 {
		t.Errorf("accuracy axis [%g, %g], want [0, 1]", y.Min, y.Max)
	}
	zoom := charts["accuracy.png"][1].Plot
	if zoom.Y.Min < 0 || zoom.Y.Max > 1 || zoom.Y.Max-zoom.Y.Min > 0.05 {
		t.Errorf("zoom [%g, %g], want a narrow range inside [0, 1]", zoom.Y.Min, zoom.Y.Max)
	}
	for i, s := range m.Eval.Step {
		if s >= zoom.X.Min && (m.Eval.Top1[i] < zoom.Y.Min || m.Eval.Top1[i] > zoom.Y.Max) {
			t.Errorf("eval top-1 %g at step %g outside the zoom [%g, %g]", m.Eval.Top1[i], s, zoom.Y.Min, zoom.Y.Max)
		}
	}
	for _, tick := range labels(zoom.Y) {
		if pct, err := strconv.ParseFloat(tick.Label, 64); err != nil || math.Abs(pct-100*tick.Value) > 1e-9 {
			t.Errorf("zoom tick %q at %g: want the percentage", tick.Label, tick.Value)
		}
	}
}

// TestTrainCurvesSmoothedAndSplitAtNull: the raw train loss is a faded line, split where the log holds
// null rather than drawn through 0, under the smoothed line; with smoothing 0 only the raw line.
func TestTrainCurvesSmoothedAndSplitAtNull(t *testing.T) {
	m := run(t)
	ls := lines(RunCharts(m, RunOptions{Smooth: 0.6})["loss.png"][0])
	// raw before and after the null, smoothed before and after it, then the eval lines.
	if len(ls) < 4 || len(ls[0].XYs) != 49 || len(ls[1].XYs) != 50 {
		t.Fatalf("%d lines; first two of %d and %d points, want the raw loss split at the null", len(ls), len(ls[0].XYs), len(ls[1].XYs))
	}
	if _, _, _, a := ls[0].Color.RGBA(); a == 0xffff {
		t.Error("the raw line is not faded")
	}
	if got, want := ls[2].XYs[1].Y, Smooth(m.Train.Loss, 0.6)[1]; got != want {
		t.Errorf("smoothed line at step 2: %g, want %g", got, want)
	}
	if raw := lines(RunCharts(m, RunOptions{})["loss.png"][0]); raw[0].XYs[1].Y != m.Train.Loss[1] {
		t.Errorf("smoothing 0 draws %g, want the raw %g", raw[0].XYs[1].Y, m.Train.Loss[1])
	}
}

// TestSingleEvalIsAVisibleMarker: one evaluation is drawn as a marker inside the axes of every panel
// that shows it, not as a line of length zero.
func TestSingleEvalIsAVisibleMarker(t *testing.T) {
	m, err := ReadMetrics(writeMetrics(t, metricsLog))
	if err != nil {
		t.Fatal(err)
	}
	charts := RunCharts(m, RunOptions{LogLoss: true, Smooth: 0.6})
	for _, c := range append(charts["accuracy.png"], charts["loss.png"]...) {
		ss := scatters(c)
		if len(ss) != 2 { // eval and EMA
			t.Errorf("%q: %d marker series, want 2", c.Plot.Title.Text, len(ss))
			continue
		}
		for _, s := range ss {
			p := c.Plot
			if len(s.XYs) != 1 || s.Shape == nil || s.Radius <= 0 {
				t.Errorf("%q: markers %+v", p.Title.Text, s.GlyphStyle)
				continue
			}
			if x, y := s.XYs[0].X, s.XYs[0].Y; x < p.X.Min || x > p.X.Max || y < p.Y.Min || y > p.Y.Max {
				t.Errorf("%q: marker (%g, %g) outside the axes [%g, %g]×[%g, %g]", p.Title.Text, x, y, p.X.Min, p.X.Max, p.Y.Min, p.Y.Max)
			}
		}
	}
}

// TestLogTicks: 1, 2, 5 of each decade over a few decades, only the decades over many, gonum's linear
// ticks over a range too short for two of them.
func TestLogTicks(t *testing.T) {
	cases := []struct {
		min, max float64
		want     string
	}{
		{0.015, 2.5, "0.02 0.05 0.1 0.2 0.5 1 2"},
		{1e-4, 10, "0.0001 0.001 0.01 0.1 1 10"},
	}
	for _, c := range cases {
		var got []string
		for _, tick := range logTicks(c.min, c.max) {
			if tick.Label != "" {
				got = append(got, tick.Label)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("logTicks(%g, %g) labels %q, want %q", c.min, c.max, got, c.want)
		}
	}
	if ticks := logTicks(0.051, 0.058); len(ticks) == 0 || ticks[0].Value < 0.051 {
		t.Errorf("narrow range: %v", ticks)
	}
}
