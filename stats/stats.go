package stats

import (
	"fmt"
	"math"
)

// Z95 is the standard normal quantile of 0.975: a two-sided 95% interval.
const Z95 = 1.959963984540054

// Wilson returns the Wilson score interval of a proportion with k successes in n trials at the normal
// quantile z (Z95 for 95%):
//
//	centre = (p + z²/2n) / (1 + z²/n),  half = z/(1 + z²/n) · sqrt(p(1−p)/n + z²/4n²),  p = k/n.
//
// Unlike the normal (Wald) interval it stays inside [0, 1] and is not empty at k = 0 or k = n, which is
// why it is the one to print beside an accuracy. n = 0 gives (0, 1): nothing is known.
func Wilson(k, n int, z float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	nf := float64(n)
	p := float64(k) / nf
	z2 := z * z
	denom := 1 + z2/nf
	centre := (p + z2/(2*nf)) / denom
	half := z / denom * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return math.Max(0, centre-half), math.Min(1, centre+half)
}

// Interval formats k/n as "p% [lo, hi]" in percent with the 95% Wilson interval, as every eval prints it.
func Interval(k, n int) string {
	lo, hi := Wilson(k, n, Z95)
	p := 0.0
	if n > 0 {
		p = float64(k) / float64(n)
	}
	return fmt.Sprintf("%.2f%% [%.2f, %.2f]", 100*p, 100*lo, 100*hi)
}

// McNemarExact returns the exact two-sided p-value of McNemar's test for b and c discordant pairs
// (images only the first evaluation got right, and only the second): under the null hypothesis that
// both are equally accurate, each of the n = b+c discordant images goes either way with probability
// 1/2, so
//
//	p = min(1, 2 · P(X ≤ min(b, c))),  X ~ Binomial(n, 1/2),
//
// the doubled smaller tail. The tail is summed in log space (log C(n,i) from math.Lgamma, the terms
// combined by log-sum-exp from the largest), so it neither overflows nor underflows to a wrong 0 for
// the hundreds of thousands of discordant pairs an ImageNet comparison can have.
func McNemarExact(b, c int) float64 {
	if b < 0 || c < 0 {
		return math.NaN()
	}
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	if 2*k == n { // the tail holds the middle term: 2·P(X ≤ n/2) ≥ 1
		return 1
	}
	// log P(X = i) = log C(n, i) − n·log 2; the terms grow with i up to k < n/2, so the last is the largest.
	logTerm := func(i int) float64 { return logChoose(n, i) - float64(n)*math.Ln2 }
	top := logTerm(k)
	sum := 0.0
	for i := k; i >= 0; i-- {
		t := math.Exp(logTerm(i) - top)
		sum += t
		if t < 1e-18 { // the rest cannot move the sum in float64
			break
		}
	}
	logTail := top + math.Log(sum)
	return math.Min(1, math.Exp(logTail+math.Ln2))
}

// logChoose is log C(n, k).
func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}
