package plot

import (
	"fmt"
	"math"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Schedule is what a run's optimizer uses at each of its steps, as the loop computes it.
type Schedule struct {
	// LRTitle and EMATitle head the two panels.
	LRTitle, EMATitle string
	// StepsPerEpoch labels the x axis in epochs too; 0: steps only.
	StepsPerEpoch float64
	// Steps[i] is the optimizer step LR[i] and EMADecay[i] are at, increasing; nil: every step, 0 to
	// len(LR)−1. A long run is drawn from samples (a run of 10^9 steps would need 8 GB per series).
	Steps []float64
	// Total is the run's length in optimizer steps, where the x axis ends; 0: len(LR).
	Total int
	// LR[i] is the learning rate of optimizer step Steps[i].
	LR []float64
	// EMADecay[i] is the EMA decay at step Steps[i]; nil when the run keeps no EMA (then there is no panel).
	EMADecay []float64
}

// ScheduleCharts are the learning-rate panel and, with an EMA, the EMA-decay panel.
func ScheduleCharts(s Schedule) []*Chart {
	steps := s.Steps
	if steps == nil {
		steps = make([]float64, len(s.LR))
		for t := range steps {
			steps[t] = float64(t)
		}
	}
	total := float64(s.Total)
	if s.Total == 0 {
		total = float64(len(s.LR))
	}
	lr := newChart(s.LRTitle, "learning rate")
	lr.line("", steps, s.LR, blue, vg.Points(1.8))
	lr.Plot.X.Max = total // the run's length, its last step included
	fromZero(&lr.Plot.Y)
	stepAxis(&lr.Plot.X, s.StepsPerEpoch)
	charts := []*Chart{lr}
	if len(s.EMADecay) == 0 {
		return charts
	}
	ema := newChart(s.EMATitle, "")
	ema.line("", steps, transform(nines).apply(s.EMADecay), green, vg.Points(1.8))
	lo, hi := bounds(func(d float64) bool { return d < 1 }, s.EMADecay)
	decayAxis(&ema.Plot.Y, lo, hi, s.EMADecay[len(s.EMADecay)-1])
	ema.Plot.X.Max = total
	stepAxis(&ema.Plot.X, s.StepsPerEpoch)
	return append(charts, ema)
}

// RunOptions say how to draw a run's metrics.
type RunOptions struct {
	// Name heads every panel (the run directory's name).
	Name string
	// LogLoss draws the loss on a log axis, where a loss falling from 2 to 0.02 stays readable to its end.
	LogLoss bool
	// Smooth is the weight of the train curves' smoothing (Smooth), in [0, 1); 0 draws them raw.
	Smooth float64
	// TrainLoss names the train loss in the legend; "" says "train". A run whose train loss is not
	// the eval loss's (label smoothing, mixed targets) says so, as that loss sits above the eval loss.
	TrainLoss string
}

// RunCharts are the panels of each file `plot run` writes: loss.png (train and eval loss), lr.png (the
// learning rate) and accuracy.png (train, eval and EMA top-1 over [0, 100%], then zoomed on the
// evaluations of the run's second half).
func RunCharts(m Metrics, o RunOptions) map[string][]*Chart {
	perEpoch := m.StepsPerEpoch()
	tr, ev := m.Train, m.Eval
	hasEMA := m.HasEMA()

	loss := newChart(o.Name+": loss", "loss (nats)")
	height := transform(linear)
	if o.LogLoss {
		height = log10
		loss.Plot.Y.Label.Text = "loss (nats, log scale)"
	}
	trainLoss := o.TrainLoss
	if trainLoss == "" {
		trainLoss = "train"
	}
	loss.noisy(trainLoss, tr.Step, tr.Loss, blue, o.Smooth, height)
	loss.points("eval", ev.Step, height.apply(ev.Loss), orange, draw.CircleGlyph{})
	if hasEMA {
		loss.points("eval, EMA weights", ev.Step, height.apply(ev.EMALoss), green, draw.PyramidGlyph{})
	}
	if o.LogLoss {
		lo, hi := bounds(positive, tr.Loss, ev.Loss, ev.EMALoss)
		logAxis(&loss.Plot.Y, lo, hi)
	} else {
		fromZero(&loss.Plot.Y)
	}

	lr := newChart(o.Name+": learning rate", "learning rate")
	lr.line("", tr.Step, tr.LR, blue, vg.Points(1.8))
	fromZero(&lr.Plot.Y)

	acc := newChart(o.Name+": top-1 accuracy", "top-1 accuracy (%)")
	acc.noisy("train", tr.Step, tr.Accuracy, blue, o.Smooth, linear)
	acc.points("eval", ev.Step, ev.Top1, orange, draw.CircleGlyph{})
	if hasEMA {
		acc.points("eval, EMA weights", ev.Step, ev.EMATop1, green, draw.PyramidGlyph{})
	}
	percentAxis(&acc.Plot.Y, 0, 1)
	acc.Plot.Legend.Top = false

	// The zoom shows the second half of the run, its y range fitted to the evaluations there (the last
	// is always there: the loop evaluates at the end), which may lie above or below the train curve;
	// a run without evaluations gets the smoothed train accuracy instead.
	zoom := newChart(o.Name+": top-1 accuracy, second half of the run, zoomed on its evaluations", "top-1 accuracy (%)")
	mid := math.Max(maxOf(tr.Step), maxOf(ev.Step)) / 2
	focus := secondHalf(mid, ev.Step, ev.Top1, ev.EMATop1)
	if len(ev.Step) == 0 {
		zoom.Plot.Title.Text = o.Name + ": top-1 accuracy, second half of the run"
		zoom.noisy("train", tr.Step, tr.Accuracy, blue, o.Smooth, linear)
		focus = secondHalf(mid, tr.Step, Smooth(tr.Accuracy, o.Smooth))
	}
	zoom.points("eval"+lastAndBest(ev.Top1), ev.Step, ev.Top1, orange, draw.CircleGlyph{})
	if hasEMA {
		zoom.points("eval, EMA weights"+lastAndBest(ev.EMATop1), ev.Step, ev.EMATop1, green, draw.PyramidGlyph{})
	}
	lo, hi := zoomRange(focus)
	percentAxis(&zoom.Plot.Y, lo, hi)
	zoom.Plot.Legend.Top = false

	for _, c := range []*Chart{loss, lr, acc, zoom} {
		stepAxis(&c.Plot.X, perEpoch) // after the data, whose length picks the ticks
	}
	zoom.Plot.X.Min = mid
	return map[string][]*Chart{"loss.png": {loss}, "lr.png": {lr}, "accuracy.png": {acc, zoom}}
}

// lastAndBest describes an accuracy series in a legend: " (last 98.33%, best 98.37%)".
func lastAndBest(v []float64) string {
	last, best := math.NaN(), math.Inf(-1)
	for _, x := range v {
		if finite(x) {
			last, best = x, math.Max(best, x)
		}
	}
	if !finite(last) {
		return ""
	}
	return fmt.Sprintf(" (last %.2f%%, best %.2f%%)", 100*last, 100*best)
}

// secondHalf gathers the values of the series at steps from mid on.
func secondHalf(mid float64, steps []float64, series ...[]float64) []float64 {
	var out []float64
	for i, s := range steps {
		if s >= mid {
			for _, y := range series {
				out = append(out, y[i])
			}
		}
	}
	return out
}

func positive(v float64) bool { return v > 0 }

// bounds is the smallest and largest finite value of the series that keep accepts.
func bounds(keep func(float64) bool, series ...[]float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s {
			if finite(v) && keep(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	return lo, hi
}

func maxOf(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		if finite(x) {
			m = math.Max(m, x)
		}
	}
	return m
}
