package trainer

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progress shows training progress: on a terminal one redrawn bar, elsewhere one line per log interval.
type progress struct {
	out     io.Writer
	redraw  bool
	started time.Time
	first   int // the step the run (re)started at, for the ETA
	drawn   bool
}

func newProgress(out io.Writer, redraw bool, first int) *progress {
	return &progress{out: out, redraw: redraw, started: time.Now(), first: first}
}

func (p *progress) update(step, total, perEpoch int, loss, lr, imagesPerSec float64) {
	const width = 24
	filled := width * step / max(total, 1)
	bar := strings.Repeat("=", filled) + strings.Repeat(" ", width-filled)
	eta := time.Duration(0)
	if done := step - p.first; done > 0 {
		eta = time.Duration(float64(time.Since(p.started)) / float64(done) * float64(total-step))
	}
	line := fmt.Sprintf("epoch %.2f [%s] %d/%d  loss %.4f  lr %.4g  %.0f img/s  eta %s",
		float64(step)/float64(perEpoch), bar, step, total, loss, lr, imagesPerSec, eta.Round(time.Second))
	if p.redraw {
		fmt.Fprintf(p.out, "\r%s\x1b[K", line)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.out, line)
}

// done ends a redrawn line so the next message starts on its own line.
func (p *progress) done() {
	if p.drawn {
		fmt.Fprintln(p.out)
		p.drawn = false
	}
}
