package trainer

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows how a run is going. On a terminal it redraws one line that fits the terminal's width:
// a spinner with the time spent while a slow phase lasts (compiling the train step, evaluating), then a
// bar with the step, epoch, loss, lr, images/s and the elapsed and remaining time, dropping the less
// important fields when the line is narrow. Elsewhere (a file, a pipe) each Update prints one plain line
// with every field and phases print nothing, so a log holds one line per log interval.
//
// The loop uses it so:
//
//	bar := newProgress(out, terminal, startStep, total, stepsPerEpoch) // before the first step
//	out = bar                            // messages go through it: each starts on a line of its own
//	bar.Phase("compiling train step…")   // shown until the next Update, Write, Phase or Done
//	bar.Update(step, loss, lr, imagesPerSec) // on a terminal after every step, elsewhere once per log interval
//	bar.Done()                           // ends the live line (a bar stays on screen, a spinner is erased)
type progress struct {
	out      io.Writer
	terminal bool
	columns  func() int // the terminal's width
	first    int        // the step the run (re)started at
	total    int
	perEpoch float64
	started  time.Time // when newProgress was called: the elapsed time counts from here

	// The remaining time is extrapolated from the first Update on, which leaves the compile out.
	rateFrom int
	rateAt   time.Time

	// Throughput: with imagesPerStep set, the images/s shown is measured here between Updates and
	// smoothed (time constant throughputTau), and an interval in which a phase ran (compiling,
	// evaluating) is left out, so that neither the compile, an eval nor the bursts in which the loop
	// reads back steps it ran ahead make the figure jump. Without it, the caller's figure is shown.
	imagesPerStep float64
	meanRate      float64   // images/s; 0 until the first measured interval
	measureStep   int       // the step and time the current interval started at
	measureAt     time.Time // zero: no interval started
	phased        bool      // a phase ran since measureAt

	// Terminal state.
	bar        *progressbar.ProgressBar // the live bar; nil when the line holds none
	barWidth   int
	drawnAt    time.Time
	pending    *progressUpdate          // the newest Update, when throttling left it undrawn
	spinner    *progressbar.ProgressBar // the live phase; nil when none
	fieldWidth []int                    // the widest each field has been, so fields neither jitter nor flicker
}

// progressUpdate is one Update's values.
type progressUpdate struct {
	step                   int
	loss, lr, imagesPerSec float64
}

// progressOption adjusts a progress at creation.
type progressOption func(*progress)

// progressImagesPerStep makes the bar measure and smooth the images/s itself, from the images one
// optimizer step trains.
func progressImagesPerStep(n int) progressOption {
	return func(p *progress) { p.imagesPerStep = float64(n) }
}

// progressWidth fixes the line width instead of asking the terminal (tests draw into a buffer).
func progressWidth(columns int) progressOption {
	return func(p *progress) { p.columns = func() int { return columns } }
}

const (
	fallbackColumns = 80                     // when the output is not a terminal that tells its size
	minBarWidth     = 10                     // fields are dropped before the bar gets narrower
	barOverhead     = 11                     // the library's " NNN% [", "]" and the spaces around the fields
	spinnerOverhead = 12                     // spinner, spaces and "[1h2m3s]" around a phase's message
	fieldSep        = "  "                   // between fields
	redrawEvery     = 100 * time.Millisecond // a terminal line is redrawn at most this often
	// throughputTau is the time constant of the images/s average; throughputMinInterval the shortest
	// interval measured (the loop reads back the steps it ran ahead in bursts).
	throughputTau         = 5 * time.Second
	throughputMinInterval = 500 * time.Millisecond
)

// fieldRank lists the fields (indices into progress.fields) in the order they get room on a narrow
// line: the step counter first, the learning rate last.
var fieldRank = []int{1, 2, 6, 0, 4, 5, 3}

// timeFields (indices into progress.fields) come last and are not padded: they only shrink as the
// run goes on.
const timeFields = 5

func newProgress(out io.Writer, terminal bool, startStep, total int, stepsPerEpoch float64, opts ...progressOption) *progress {
	p := &progress{out: out, terminal: terminal, first: startStep, total: total, perEpoch: stepsPerEpoch,
		started: time.Now(), columns: func() int { return terminalColumns(out) }}
	for _, o := range opts {
		o(p)
	}
	// The counter and the epoch start as wide as they will get, the times as wide as for an hour's run,
	// so that a growing field rarely pushes another out.
	p.fieldWidth = make([]int, timeFields+2)
	for i, f := range p.fields(&progressUpdate{step: total}, p.started)[:timeFields] {
		p.fieldWidth[i] = len(f)
	}
	p.fieldWidth[timeFields], p.fieldWidth[timeFields+1] = len("elapsed 59m59s"), len("eta 59m59s")
	return p
}

// terminalColumns is out's width when out is a terminal, else fallbackColumns.
func terminalColumns(out io.Writer) int {
	if f, ok := out.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	return fallbackColumns
}

// Phase shows msg with a spinner and its running time until the next Update, Write, Phase or Done.
// Off a terminal it prints nothing.
func (p *progress) Phase(msg string) {
	p.phased = true
	if !p.terminal {
		return
	}
	p.endLine()
	p.spinner = progressbar.NewOptions(-1,
		progressbar.OptionSetWriter(p.out),
		progressbar.OptionSetDescription(truncate(msg, p.columns()-1-spinnerOverhead)),
		progressbar.OptionSpinnerType(9), // ASCII, like the bar: any terminal font shows it
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionUseANSICodes(true))
	p.spinner.RenderBlank() // starts the clock and the spinner's redraws
}

// Update reports the state after an optimizer step: the average loss and the images/s over the
// steps since the last Update, and the learning rate. On a terminal it redraws the bar (at most every
// redrawEvery, and always at the last step); elsewhere it prints one line.
func (p *progress) Update(step int, loss, lr, imagesPerSec float64) {
	now := time.Now()
	if p.rateAt.IsZero() {
		p.rateFrom, p.rateAt = step, now
	}
	if p.imagesPerStep > 0 {
		imagesPerSec = p.measure(step, now)
	}
	u := &progressUpdate{step: step, loss: loss, lr: lr, imagesPerSec: imagesPerSec}
	if !p.terminal {
		fmt.Fprintln(p.out, strings.Join(p.fields(u, now), fieldSep))
		return
	}
	p.stopSpinner()
	if p.bar != nil && step < p.total && now.Sub(p.drawnAt) < redrawEvery {
		p.pending = u
		return
	}
	p.draw(u, now)
}

// measure adds the interval since the last measured Update to the images/s average and returns the
// average (0: none yet). An interval in which a phase ran starts afresh instead.
func (p *progress) measure(step int, now time.Time) float64 {
	if p.measureAt.IsZero() || p.phased || step < p.measureStep {
		p.measureStep, p.measureAt, p.phased = step, now, false
		return p.meanRate
	}
	dt := now.Sub(p.measureAt)
	if dt < throughputMinInterval {
		return p.meanRate
	}
	rate := float64(step-p.measureStep) * p.imagesPerStep / dt.Seconds()
	if p.meanRate == 0 {
		p.meanRate = rate
	} else {
		p.meanRate += (1 - math.Exp(-dt.Seconds()/throughputTau.Seconds())) * (rate - p.meanRate)
	}
	p.measureStep, p.measureAt = step, now
	return p.meanRate
}

// Write prints a message: it ends the live line first, so the message starts on a line of its own.
func (p *progress) Write(b []byte) (int, error) {
	p.endLine()
	return p.out.Write(b)
}

// Done ends the live line: the bar stays on screen as it was last drawn, a phase's spinner is erased.
func (p *progress) Done() { p.endLine() }

func (p *progress) endLine() {
	p.stopSpinner()
	if p.bar == nil {
		return
	}
	if p.pending != nil {
		p.draw(p.pending, time.Now())
	}
	fmt.Fprintln(p.out)
	p.bar = nil
}

func (p *progress) stopSpinner() {
	if p.spinner != nil {
		p.spinner.Finish() // erases the line (OptionClearOnFinish) and stops its redraws
		p.spinner = nil
	}
}

// draw renders the bar line for u at the terminal's current width.
func (p *progress) draw(u *progressUpdate, now time.Time) {
	columns := p.columns()
	// The line is the library's percentage and bar, then the fields; it leaves the last column free,
	// since writing there makes some terminals wrap.
	desc, reserved := p.describe(p.fields(u, now), columns-1-barOverhead-minBarWidth)
	width := max(columns-1-barOverhead-reserved, 1)
	if p.bar == nil || width != p.barWidth {
		p.bar = progressbar.NewOptions(p.total,
			progressbar.OptionSetWriter(p.out),
			progressbar.OptionSetTheme(progressbar.ThemeASCII),
			progressbar.OptionSetWidth(width),
			progressbar.OptionSetPredictTime(false), // the fields hold the times (see eta)
			progressbar.OptionUseANSICodes(true),    // redraw in place: "\r", the line, erase to its end
			progressbar.OptionShowDescriptionAtLineEnd(),
			progressbar.OptionSetDescription(desc))
		p.barWidth = width
		p.bar.Set(u.step)
		p.bar.RenderBlank() // Set draws only when the percentage moves
	} else {
		p.bar.Describe(desc) // before Set: the last step's Set finishes the bar, which then draws no more
		p.bar.Set(u.step)
	}
	p.drawnAt, p.pending = now, nil
}

// fields are the line's parts in display order (fieldRank says which matter most).
func (p *progress) fields(u *progressUpdate, now time.Time) []string {
	return []string{
		fmt.Sprintf("epoch %.2f", float64(u.step)/p.perEpoch),
		fmt.Sprintf("%d/%d", u.step, p.total),
		fmt.Sprintf("loss %.4f", u.loss),
		fmt.Sprintf("lr %.4g", u.lr),
		imagesPerSecField(u.imagesPerSec),
		"elapsed " + now.Sub(p.started).Round(time.Second).String(),
		"eta " + p.eta(u.step, now),
	}
}

// imagesPerSecField is the throughput field; "? img/s" before the first measurement.
func imagesPerSecField(v float64) string {
	if v <= 0 {
		return "? img/s"
	}
	return fmt.Sprintf("%.0f img/s", v)
}

// describe joins the most important fields that fit in room columns and says how many columns it
// reserved for them: each field's room is the widest it has been, so the choice of fields and the bar's
// width hold still from one redraw to the next. Fields before the time fields are padded to that room
// (right-aligned) so that the ones after them stay put.
func (p *progress) describe(fields []string, room int) (string, int) {
	keep := make([]bool, len(fields))
	used := -len(fieldSep)
	for _, i := range fieldRank {
		p.fieldWidth[i] = max(p.fieldWidth[i], len(fields[i]))
		if need := used + len(fieldSep) + p.fieldWidth[i]; need <= room {
			keep[i], used = true, need
		}
	}
	var parts []string
	for i, f := range fields {
		switch {
		case !keep[i]:
		case i < timeFields:
			parts = append(parts, fmt.Sprintf("%*s", p.fieldWidth[i], f))
		default:
			parts = append(parts, f)
		}
	}
	return strings.Join(parts, fieldSep), max(used, 0)
}

// eta extrapolates the remaining time from the steps since the first Update (the first step compiles,
// which would inflate it). Until a second Update a terminal shows "?" (a redraw comes within
// redrawEvery), while a plain line, which stands for a whole log interval, uses the time since the start.
func (p *progress) eta(step int, now time.Time) string {
	from, at := p.rateFrom, p.rateAt
	if step <= from && !p.terminal {
		from, at = p.first, p.started
	}
	if step <= from || !now.After(at) {
		return "?"
	}
	perStep := now.Sub(at) / time.Duration(step-from)
	return (perStep * time.Duration(p.total-step)).Round(time.Second).String()
}

// truncate shortens s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n < 1 {
		return ""
	}
	return string(r[:n-1]) + "…"
}
