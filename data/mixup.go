package data

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Mixup is timm's Mixup/CutMix in its default batch mode: one draw per batch decides whether the
// batch is mixed (Prob), by mixup or cutmix (SwitchProb when both alphas are set) and with which λ
// (Beta(α, α)); every example i is then mixed with example n−1−i of the same batch (the batch
// reversed), and the targets become λ·y_i + (1−λ)·y_{n−1−i} of label-smoothed one-hot rows. For
// cutmix, λ is recomputed from the clipped box's area (timm's correct_lam).
type Mixup struct {
	MixupAlpha  float64 // α of mixup's Beta; 0: no mixup
	CutmixAlpha float64 // α of cutmix's Beta; 0: no cutmix
	Prob        float64 // probability that a batch is mixed at all (timm's mixup_prob)
	SwitchProb  float64 // with both alphas > 0, probability of cutmix rather than mixup
	// LabelSmoothing ε folded into the targets: ε/K off, 1−ε+ε/K on (timm's mixup_target).
	LabelSmoothing float64
	NumClasses     int
}

// Enabled reports whether either mix is on.
func (m Mixup) Enabled() bool { return m.MixupAlpha > 0 || m.CutmixAlpha > 0 }

// Validate checks the ranges.
func (m Mixup) Validate() error {
	switch {
	case m.MixupAlpha < 0 || m.CutmixAlpha < 0:
		return fmt.Errorf("mixup: alphas %g and %g, want >= 0", m.MixupAlpha, m.CutmixAlpha)
	case !m.Enabled():
		return fmt.Errorf("mixup: mixup and cutmix alphas are both 0")
	case m.Prob < 0 || m.Prob > 1 || m.SwitchProb < 0 || m.SwitchProb > 1:
		return fmt.Errorf("mixup: prob %g, switch prob %g, want [0, 1]", m.Prob, m.SwitchProb)
	case m.LabelSmoothing < 0 || m.LabelSmoothing >= 1:
		return fmt.Errorf("mixup: label smoothing %g, want [0, 1)", m.LabelSmoothing)
	case m.NumClasses < 1:
		return fmt.Errorf("mixup: %d classes, want >= 1", m.NumClasses)
	}
	return nil
}

// MixParams is one batch's draw: λ (1 when the batch is not mixed), and for cutmix the box
// rows [Y0, Y1) × columns [X0, X1) that each example takes from its partner.
type MixParams struct {
	Lambda         float64
	CutMix         bool
	Y0, Y1, X0, X1 int
}

// Params draws the mix of one batch of height×width images, in timm's order: the mix probability,
// the switch, λ, then the box center (row, then column).
func (m Mixup) Params(height, width int, rng *rand.PCG) MixParams {
	p := MixParams{Lambda: 1}
	if uniform(rng) >= m.Prob {
		return p
	}
	switch {
	case m.MixupAlpha > 0 && m.CutmixAlpha > 0:
		p.CutMix = uniform(rng) < m.SwitchProb
	case m.CutmixAlpha > 0:
		p.CutMix = true
	}
	alpha := m.MixupAlpha
	if p.CutMix {
		alpha = m.CutmixAlpha
	}
	p.Lambda = sampleBeta(rng, alpha, alpha)
	if p.CutMix {
		// timm's rand_bbox: a box of int(side·√(1−λ)) centered uniformly, its half-sides floored and
		// clipped to the image; λ is then 1 − (clipped area)/(image area).
		ratio := math.Sqrt(1 - p.Lambda)
		cutH, cutW := int(float64(height)*ratio), int(float64(width)*ratio)
		cy := int(boundedUint64(rng, uint64(height)))
		cx := int(boundedUint64(rng, uint64(width)))
		p.Y0, p.Y1 = clampInt(cy-cutH/2, 0, height), clampInt(cy+cutH/2, 0, height)
		p.X0, p.X1 = clampInt(cx-cutW/2, 0, width), clampInt(cx+cutW/2, 0, width)
		p.Lambda = 1 - float64((p.Y1-p.Y0)*(p.X1-p.X0))/float64(height*width)
	}
	return p
}

// Apply mixes the first n rows of images (NHWC, height×width×channels each) in place, each with
// row n−1−i, and writes their soft targets into targets (n rows of m.NumClasses).
func (m Mixup) Apply(p MixParams, images []float32, labels []int32, n, height, width, channels int, targets []float32) {
	k := m.NumClasses
	off := m.LabelSmoothing / float64(k)
	on := 1 - m.LabelSmoothing + off
	for i := range n {
		row := targets[i*k : (i+1)*k]
		for c := range row {
			row[c] = float32(off)
		}
		j := n - 1 - i
		row[labels[i]] += float32(p.Lambda * (on - off))
		row[labels[j]] += float32((1 - p.Lambda) * (on - off))
	}
	if p.Lambda == 1 {
		return
	}
	size := height * width * channels
	lam, rest := float32(p.Lambda), float32(1-p.Lambda)
	for i := range n / 2 {
		j := n - 1 - i
		a, b := images[i*size:(i+1)*size], images[j*size:(j+1)*size]
		if !p.CutMix {
			for e := range a {
				a[e], b[e] = a[e]*lam+b[e]*rest, b[e]*lam+a[e]*rest
			}
			continue
		}
		for y := p.Y0; y < p.Y1; y++ {
			lo, hi := (y*width+p.X0)*channels, (y*width+p.X1)*channels
			for e := lo; e < hi; e++ {
				a[e], b[e] = b[e], a[e]
			}
		}
	}
	// An odd batch's middle row is its own partner: cutmix keeps it, mixup blends it with itself
	// (λx + (1−λ)x, which rounds as timm's does).
	if mid := n / 2; n%2 == 1 && !p.CutMix {
		for e, v := range images[mid*size : (mid+1)*size] {
			images[mid*size+e] = v*lam + v*rest
		}
	}
}

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }

// mixRNG seeds the generator of one batch's mix from (seed, epoch, step, replica), so a resumed run
// mixes the same way and replicas draw independently (timm seeds each process apart).
func mixRNG(rng *rand.PCG, seed uint64, epoch, step, replica int) {
	s1 := splitmix64(seed ^ 0x6d1e0c0ffee5eed)
	rng.Seed(s1, splitmix64(splitmix64(splitmix64(uint64(epoch)+0x2545f4914f6cdd1d)^uint64(step))^uint64(replica)))
}

// normal returns a standard normal draw (Box–Muller on two uniforms, written out so the sequence
// cannot change with the Go version).
func normal(rng *rand.PCG) float64 {
	u1, u2 := uniform(rng), uniform(rng)
	return math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
}

// logGamma returns the log of a Gamma(a, 1) draw: Marsaglia and Tsang's method, boosted for a < 1 by
// Gamma(a) = Gamma(a+1)·U^(1/a), kept in logs so tiny shapes do not underflow to 0.
func logGamma(rng *rand.PCG, a float64) float64 {
	boost := 0.0
	if a < 1 {
		boost = math.Log(1-uniform(rng)) / a
		a++
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := normal(rng)
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := uniform(rng)
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return math.Log(d*v) + boost
		}
	}
}

// sampleBeta returns a Beta(a, b) draw as X/(X+Y) of two Gamma draws.
func sampleBeta(rng *rand.PCG, a, b float64) float64 {
	lx, ly := logGamma(rng, a), logGamma(rng, b)
	return 1 / (1 + math.Exp(ly-lx))
}
