package trainer

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// screenLines splits terminal output into what each redraw leaves on a line: the text between
// carriage returns and newlines, without the escape sequences.
func screenLines(out string) []string {
	return strings.FieldsFunc(ansiEscape.ReplaceAllString(out, ""), func(r rune) bool { return r == '\r' || r == '\n' })
}

// drawRun drives a terminal bar the way the loop does (a compile phase, steps, an eval phase and its
// message, the last step) at a fixed width and returns what it wrote.
func drawRun(width, total int, loss, lr, imagesPerSec float64) string {
	var out strings.Builder
	p := newProgress(&out, true, 0, total, float64(total)/6, progressWidth(width))
	p.Phase("compiling train step… and a message long enough to need cutting at any of these widths")
	time.Sleep(250 * time.Millisecond) // the spinner redraws on its own meanwhile
	for step := 1; step < total; step += total / 5 {
		p.Update(step, loss, lr, imagesPerSec)
		time.Sleep(redrawEvery) // so that each Update draws
	}
	p.Phase("evaluating…")
	fmt.Fprintln(p, "epoch 6: eval top-1 98.00%")
	p.Update(total, loss, lr, imagesPerSec)
	p.Done()
	return out.String()
}

// TestProgressFitsTheTerminal: every line the terminal bar draws (phases, redraws, messages between)
// fits the width, even with the widest values a run shows, and narrow lines keep the most important
// fields.
func TestProgressFitsTheTerminal(t *testing.T) {
	for _, width := range []int{60, 80, 120} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			t.Parallel()
			widest := drawRun(width, 123456, 12345.678901, 1.2345678e-5, 123456.7)
			for _, l := range screenLines(widest) {
				if n := utf8.RuneCountInString(l); n > width {
					t.Errorf("a %d-column line at width %d: %q", n, width, l)
				}
			}
			if !strings.Contains(widest, "compiling train step") || !strings.Contains(widest, "epoch 6: eval") {
				t.Errorf("the phase or the message is missing:\n%q", widest)
			}
			// The bar before the eval message, the message and the final bar each end a line.
			if n := strings.Count(widest, "\n"); n != 3 {
				t.Errorf("%d newlines, want 3 (bar, message, final bar):\n%q", n, widest)
			}

			typical := screenLines(drawRun(width, 2810, 0.1234, 0.01, 5120))
			last := typical[len(typical)-1]
			shown := map[int][]string{
				60:  {"100% [", "2810/2810", "loss 0.1234", "eta 0s"},
				80:  {"100% [", "2810/2810", "loss 0.1234", "eta 0s", "epoch 6.00", "5120 img/s"},
				120: {"100% [", "2810/2810", "loss 0.1234", "eta 0s", "epoch 6.00", "5120 img/s", "elapsed ", "lr 0.01"},
			}[width]
			for _, want := range shown {
				if !strings.Contains(last, want) {
					t.Errorf("the final line %q lacks %q", last, want)
				}
			}
			if width < 120 && strings.Contains(last, "lr ") {
				t.Errorf("the final line %q shows the learning rate before more important fields", last)
			}
		})
	}
}

// TestProgressPlainLines: off a terminal each Update is one full line, phases print nothing, and there
// are no redraws.
func TestProgressPlainLines(t *testing.T) {
	var out strings.Builder
	p := newProgress(&out, false, 4, 10, 5)
	p.Phase("compiling train step…")
	p.Update(6, 0.25, 0.01, 512)
	p.Update(10, 0.125, 0.001, 640)
	fmt.Fprintln(p, "final eval")
	p.Done()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || strings.ContainsAny(out.String(), "\r\x1b") {
		t.Fatalf("want 3 plain lines, got:\n%q", out.String())
	}
	for _, want := range []string{"epoch 1.20", "6/10", "loss 0.2500", "lr 0.01", "512 img/s", "elapsed ", "eta "} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line %q lacks %q", lines[0], want)
		}
	}
	if !strings.Contains(lines[1], "10/10") || !strings.Contains(lines[1], "eta 0s") {
		t.Errorf("last line %q: want step 10/10 and eta 0s", lines[1])
	}
}

// TestProgressThroughputLeavesOutPhases: with the images per step known, the bar measures images/s
// itself: "?" before a measured interval, then the steps' rate, and an eval between two Updates
// (however long) does not pull the figure down, as it did when the window's time included it.
func TestProgressThroughputLeavesOutPhases(t *testing.T) {
	var out strings.Builder
	p := newProgress(&out, false, 0, 1000, 100, progressImagesPerStep(100))
	rate := func() float64 {
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		m := regexp.MustCompile(`(\S+) img/s`).FindStringSubmatch(lines[len(lines)-1])
		if m == nil {
			t.Fatalf("no img/s in %q", lines[len(lines)-1])
		}
		if m[1] == "?" {
			return 0
		}
		var v float64
		fmt.Sscan(m[1], &v)
		return v
	}
	p.Phase("compiling train step…")
	p.Update(1, 1, 0.1, 1) // the first step: it compiled, and the caller's figure is not shown
	if r := rate(); r != 0 {
		t.Errorf("first Update shows %g img/s, want ?", r)
	}
	step := 1
	for range 3 { // 50 steps of 100 images per 0.6 s: about 8,333 images/s
		time.Sleep(600 * time.Millisecond)
		step += 50
		p.Update(step, 1, 0.1, 1)
	}
	before := rate()
	if before < 2000 || before > 9000 {
		t.Errorf("measured %g img/s, want about 8,333 (at most 9,000; a loaded machine only lowers it)", before)
	}
	p.Phase("evaluating…")
	time.Sleep(2 * time.Second) // an eval four times longer than the steps' interval
	step += 50
	p.Update(step, 1, 0.1, 1)
	if after := rate(); after != before {
		t.Errorf("after an eval: %g img/s, want the figure before it (%g): the eval's interval is left out", after, before)
	}
	time.Sleep(600 * time.Millisecond)
	step += 50
	p.Update(step, 1, 0.1, 1)
	if after := rate(); after < before/2 {
		t.Errorf("the first interval after the eval: %g img/s, before it %g", after, before)
	}
}
