package data

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// RandomErasing is timm's RandomErasing with one box (count 1), applied to the normalised example:
// with probability Prob, up to 10 tries of an area fraction uniform in [0.02, 1/3] and a log-uniform
// aspect ratio (height/width) in [0.3, 1/0.3]; the first box that fits strictly inside the image is
// filled, and a try that does not fit is dropped (no fallback).
type RandomErasing struct {
	Prob float64
	// Mode fills the box: "pixel" (timm's re_mode default in its recipes) a standard normal draw per
	// value, "rand" one normal draw per channel, "const" zeros (the mean pixel). Empty means pixel.
	Mode string
}

// timm's defaults.
const (
	eraseMinArea   = 0.02
	eraseMaxArea   = 1.0 / 3
	eraseMinAspect = 0.3
)

// Validate checks the probability and the mode.
func (e RandomErasing) Validate() error {
	if e.Prob < 0 || e.Prob > 1 {
		return fmt.Errorf("random erasing: probability %g, want [0, 1]", e.Prob)
	}
	switch e.Mode {
	case "", "pixel", "rand", "const":
		return nil
	}
	return fmt.Errorf("random erasing: mode %q, want pixel, rand or const", e.Mode)
}

// Box draws the erased box (top, left, h, w) of a height×width image; ok is false when the image is
// left alone (the probability, or ten boxes that did not fit).
func (e RandomErasing) Box(height, width int, rng *rand.PCG) (top, left, h, w int, ok bool) {
	if e.Prob <= 0 || uniform(rng) > e.Prob {
		return 0, 0, 0, 0, false
	}
	area := float64(height * width)
	logLo, logHi := math.Log(eraseMinAspect), math.Log(1/eraseMinAspect)
	for range 10 {
		target := (eraseMinArea + (eraseMaxArea-eraseMinArea)*uniform(rng)) * area
		aspect := math.Exp(logLo + (logHi-logLo)*uniform(rng))
		h = int(math.RoundToEven(math.Sqrt(target * aspect)))
		w = int(math.RoundToEven(math.Sqrt(target / aspect)))
		if w < width && h < height {
			top = int(boundedUint64(rng, uint64(height-h+1)))
			left = int(boundedUint64(rng, uint64(width-w+1)))
			return top, left, h, w, true
		}
	}
	return 0, 0, 0, 0, false
}

// apply erases one box of the normalised HWC example x in place.
func (e RandomErasing) apply(x []float32, height, width, channels int, rng *rand.PCG) {
	top, left, h, w, ok := e.Box(height, width, rng)
	if !ok {
		return
	}
	var color []float32 // "rand": one value per channel
	if e.Mode == "rand" {
		color = make([]float32, channels)
		for c := range color {
			color[c] = float32(normal(rng))
		}
	}
	for y := top; y < top+h; y++ {
		row := x[(y*width+left)*channels : (y*width+left+w)*channels]
		switch e.Mode {
		case "const":
			clear(row)
		case "rand":
			for i := range row {
				row[i] = color[i%channels]
			}
		default:
			for i := range row {
				row[i] = float32(normal(rng))
			}
		}
	}
}
