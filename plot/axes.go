package plot

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	gplot "gonum.org/v1/plot"
)

// stepAxis labels the x axis, which is in optimizer steps from 0, in steps and epochs: the step is what
// the loop counts and checkpoints are named by, the epoch what recipes speak in. Over two epochs or more
// the ticks fall on round epochs (step below); over less, on round steps (epoch below).
func stepAxis(a *gplot.Axis, perEpoch float64) {
	a.Min = 0
	a.Label.Text = "optimizer step"
	if !(perEpoch > 0) {
		return
	}
	byEpoch := a.Max/perEpoch >= 2
	if byEpoch {
		a.Label.Text = fmt.Sprintf("epoch, and optimizer step below it (%.4g steps per epoch)", perEpoch)
	} else {
		a.Label.Text = fmt.Sprintf("optimizer step, and epoch below it (%.4g steps per epoch)", perEpoch)
	}
	a.Tick.Marker = gplot.TickerFunc(func(min, max float64) []gplot.Tick {
		if !byEpoch {
			ticks := gplot.DefaultTicks{}.Ticks(min, max)
			for i, t := range ticks {
				if !t.IsMinor() {
					ticks[i].Label = formatStep(t.Value) + "\nep " + strconv.FormatFloat(t.Value/perEpoch, 'g', 3, 64)
				}
			}
			return ticks
		}
		ticks := wholeTicks(min/perEpoch, max/perEpoch, 8)
		for i, t := range ticks {
			ticks[i].Value = t.Value * perEpoch
			if !t.IsMinor() {
				ticks[i].Label = "ep " + t.Label + "\n" + formatStep(math.Round(ticks[i].Value))
			}
		}
		return ticks
	})
}

// wholeTicks labels about want round whole numbers in [min, max] (a step of 1, 2 or 5 × 10^k, at least
// 1: gonum's ticks may fall on epoch 2.5) and marks the numbers between them.
func wholeTicks(min, max float64, want int) []gplot.Tick {
	step := 1.0
	for mag := 1.0; step*float64(want) < max-min; mag *= 10 {
		for _, m := range []float64{1, 2, 5, 10} {
			if step = m * mag; step*float64(want) >= max-min {
				break
			}
		}
	}
	minor := step / 5 // 10 → 2, 5 → 1
	if mantissa := step / math.Pow(10, math.Floor(math.Log10(step))); mantissa == 2 || step == 1 {
		minor = step / 2 // 20 → 10, 2 → 1, 1 → 0.5
	}
	var ticks []gplot.Tick
	for v := math.Ceil(min/minor) * minor; v <= max+minor/1e6; v += minor {
		t := gplot.Tick{Value: v}
		if r := math.Round(v / step); math.Abs(v-r*step) < minor/1e3 {
			t.Label = strconv.FormatFloat(r*step, 'f', -1, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// formatStep writes a step with thousands separators, 1,251,000: exact, as checkpoints are named by it.
func formatStep(v float64) string {
	digits := strconv.FormatFloat(v, 'f', -1, 64)
	if len(digits) <= 4 || v != math.Trunc(v) {
		return digits
	}
	var out []byte
	for i := range len(digits) {
		if i > 0 && (len(digits)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, digits[i])
	}
	return string(out)
}

// fromZero fits a linear axis to a quantity that is never negative (a learning rate, a loss): from 0 to
// the largest value, so the axis shows no impossible negative range.
func fromZero(a *gplot.Axis) {
	a.Min = 0
	if !(a.Max > 0) {
		a.Max = 1
	}
}

// transform maps a value to its height on a y axis; NaN leaves the value out. Log axes are drawn this
// way, as logarithms on gonum's linear scale, not with gonum's LogScale: gonum v0.17 places the y-axis
// label's glyph box at the data midpoint (Min+Max)/2 normalised by the scale, which on a log axis lies
// near the top, and then shrinks the panel to make room for a label that is not there.
type transform func(float64) float64

func (t transform) apply(y []float64) []float64 {
	out := make([]float64, len(y))
	for i, v := range y {
		out[i] = t(v)
	}
	return out
}

func linear(v float64) float64 { return v }

// log10 is the height of v on a log axis; zero and negative values have none.
func log10(v float64) float64 {
	if v > 0 {
		return math.Log10(v)
	}
	return math.NaN()
}

// nines is the height of an EMA decay d on the decay axis, -log10(1-d): 0.9 → 1, 0.99 → 2, 0.999 → 3.
func nines(d float64) float64 { return -math.Log10(1 - d) }

// logAxis fits a log axis (of log10 heights) to the positive values in [lo, hi], with a little room at
// both ends, labelled with the values themselves.
func logAxis(a *gplot.Axis, lo, hi float64) {
	if !(lo > 0) || !(hi >= lo) {
		lo, hi = 0.1, 1
	}
	a.Min, a.Max = math.Log10(lo/1.15), math.Log10(hi*1.15)
	a.Tick.Marker = gplot.TickerFunc(func(min, max float64) []gplot.Tick {
		ticks := logTicks(math.Pow(10, min), math.Pow(10, max))
		for i := range ticks {
			ticks[i].Value = math.Log10(ticks[i].Value)
		}
		return ticks
	})
}

// logTicks marks every 1..9 × 10^k and labels 1 (over more than three decades) or 1, 2 and 5 (over fewer)
// of each decade; over a range too narrow for two of those labels it falls back to gonum's linear ticks,
// which read well on a short stretch of a log axis.
func logTicks(min, max float64) []gplot.Tick {
	span := math.Log10(max / min)
	labelled := map[int]bool{1: true}
	if span <= 3 {
		labelled[2], labelled[5] = true, true
	}
	var ticks []gplot.Tick
	inRange := 0
	for k := int(math.Floor(math.Log10(min))); k <= int(math.Ceil(math.Log10(max))); k++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(k)
			if v < min || v > max {
				continue // gonum would leave room for the labels of ticks it does not draw
			}
			t := gplot.Tick{Value: v}
			if labelled[m] {
				t.Label = formatValue(v, k)
				inRange++
			}
			ticks = append(ticks, t)
		}
	}
	if inRange < 2 {
		return gplot.DefaultTicks{}.Ticks(min, max)
	}
	return ticks
}

// formatValue writes m·10^k plainly for k in [-4, 4], and in exponent form beyond.
func formatValue(v float64, k int) string {
	if k < -4 || k > 4 {
		return strconv.FormatFloat(v, 'g', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', max(0, -k), 64)
}

// percentAxis shows fractions in [0, 1] as percentages, with gonum's ticks chosen on the percentages.
func percentAxis(a *gplot.Axis, lo, hi float64) {
	a.Min, a.Max = lo, hi
	a.Tick.Marker = gplot.TickerFunc(func(min, max float64) []gplot.Tick {
		ticks := gplot.DefaultTicks{}.Ticks(100*min, 100*max)
		for i := range ticks {
			ticks[i].Value /= 100
		}
		return ticks
	})
}

// zoomRange returns a y range around the given accuracies: their span with 15% margins, at least ±0.2
// percentage points, clipped to [0, 1] (all of it without values); on it, 98.8% against 99.06% is plain
// to see.
func zoomRange(values []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range values {
		if finite(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if lo > hi {
		return 0, 1
	}
	pad := math.Max(0.15*(hi-lo), 0.002)
	return math.Max(0, lo-pad), math.Min(1, hi+pad)
}

// decayAxis fits the axis of an EMA decay d, drawn as nines(d) = -log10(1-d) and labelled with d itself:
// 0.9, 0.99, 0.999 lie evenly spaced, a higher decay is higher up, a decay close to 1 stays readable
// (on a linear axis 0.999 and 0.9999 are one line), and no height on it means a decay of 1 or more.
// lo and hi are the smallest and largest decay; final, the run's last, is labelled too when no
// decade's label is near it.
func decayAxis(a *gplot.Axis, lo, hi, final float64) {
	bottom := math.Max(0, math.Floor(nines(lo)-0.15))
	top := math.Ceil(nines(hi) + 0.15)
	a.Min, a.Max = bottom, top
	a.Label.Text = "EMA decay (axis: −log10(1 − decay))"
	a.Tick.Marker = gplot.TickerFunc(func(min, max float64) []gplot.Tick {
		var ticks []gplot.Tick
		for k := int(bottom); k <= int(top); k++ {
			ticks = append(ticks, gplot.Tick{Value: float64(k), Label: strconv.FormatFloat(1-math.Pow10(-k), 'f', k, 64)})
			for _, m := range []float64{5, 2} { // unlabelled: 0.95 and 0.98, 0.995 and 0.998, ...
				if k < int(top) {
					ticks = append(ticks, gplot.Tick{Value: nines(1 - m*math.Pow10(-k-1))})
				}
			}
		}
		if f := nines(final); math.Abs(f-math.Round(f)) > 0.2 {
			label := strconv.FormatFloat(final, 'f', int(f)+2, 64) // 0.99522039 → 0.9952
			ticks = append(ticks, gplot.Tick{Value: f, Label: strings.TrimRight(label, "0")})
		}
		return ticks
	})
}
