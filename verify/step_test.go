package verify

import (
	"math"
	"strings"
	"testing"
)

// stepRow returns the row of res whose name ends in suffix.
func stepRow(t *testing.T, res []Result, suffix string) Result {
	t.Helper()
	for _, r := range res {
		if strings.HasSuffix(r.Name, suffix) {
			return r
		}
	}
	t.Fatalf("no %s row in %+v", suffix, res)
	return Result{}
}

// decayAll applies inner as if every variable were in the decayed group.
type decayAll struct{ inner stepLaw }

func (l decayAll) step(theta, grads [][]float64, decay []bool, lr float64, t int) [][]float64 {
	all := make([]bool, len(decay))
	for i := range all {
		all[i] = true
	}
	return l.inner.step(theta, grads, all, lr, t)
}

// TestStepChecksFailWrongLaws: each step check passes its own law and fails a law with one term wrong,
// so the /update rows can fail; the /grad rows are untouched by the law.
func TestStepChecksFailWrongLaws(t *testing.T) {
	debugPanics = true
	adamW, lamb := adamWConfig(), lambConfig()
	rms, rmsOut := rmspropConfig(false), rmspropConfig(true)
	heavy := heavyBallConfig()
	withLaw := func(c stepCase, law func() stepLaw) stepCase {
		c.newLaw = law
		return c
	}
	for _, tc := range []struct {
		what string
		c    stepCase
	}{
		{"heavy ball checked with Nesterov's law", withLaw(sgdStepCase("sgd_heavy_ball_step", heavy), func() stepLaw {
			return &sgdLaw{momentum: 0.9, wd: 0.01, nesterov: true}
		})},
		{"AdamW without bias corrections", withLaw(adamWStepCase("adamw_step", adamW), func() stepLaw {
			l := newAdamLaw(0.9, 0.999, 1e-8, 0.05, false)
			l.corrections = func(int) (float64, float64) { return 1, 1 }
			return l
		})},
		{"AdamW decaying the bias", withLaw(adamWStepCase("adamw_step", adamW), func() stepLaw {
			return decayAll{newAdamLaw(0.9, 0.999, 1e-8, 0.05, false)}
		})},
		{"LAMB without τ = 1 at a zero norm", withLaw(lambStepCase("lamb_step", lamb), func() stepLaw {
			l := newAdamLaw(0.9, 0.999, 1e-6, 0.02, true)
			l.trust = func(thetaNorm, rNorm float64) float64 { return thetaNorm / rNorm }
			return l
		})},
		{"LAMB with the trust ratio and decay on the no-decay group", withLaw(lambStepCase("lamb_step", lamb), func() stepLaw {
			return decayAll{newAdamLaw(0.9, 0.999, 1e-6, 0.02, true)}
		})},
		{"LAMB as AdamW (no trust ratio)", withLaw(lambStepCase("lamb_step", lamb), func() stepLaw {
			l := newAdamLaw(0.9, 0.999, 1e-6, 0.02, true)
			l.trust = func(float64, float64) float64 { return 1 }
			return l
		})},
		{"RMSProp-TF with s starting at 0", withLaw(rmspropStepCase("rmsprop_tf_step", rms), func() stepLaw {
			return &rmspropLaw{rho: 0.9, momentum: 0.9, eps: 1e-3, wd: 1e-2, s0: 0}
		})},
		{"RMSProp-TF checked with the lr-outside form", withLaw(rmspropStepCase("rmsprop_tf_step", rms), func() stepLaw {
			return &rmspropLaw{rho: 0.9, momentum: 0.9, eps: 1e-3, wd: 1e-2, s0: 1, lrOutside: true}
		})},
		{"RMSProp-TF lr outside checked with TF's form", withLaw(rmspropStepCase("rmsprop_tf_lr_outside_step", rmsOut), func() stepLaw {
			return &rmspropLaw{rho: 0.9, momentum: 0.9, eps: 1e-3, wd: 1e-2, s0: 1}
		})},
		{"clipping above the threshold checked without clipping", withLaw(clipStepCase("clip_above", heavy, 0.05, true), func() stepLaw {
			return &sgdLaw{momentum: 0.9, wd: 0.01}
		})},
		{"a clip check whose threshold is never reached", clipStepCase("clip_never", heavy, 100, true)},
	} {
		res := tc.c.run(testBackend())
		grad, update := stepRow(t, res, "/grad"), stepRow(t, res, "/update")
		t.Logf("%-60s update rel err %.2e %s", tc.what, update.MaxRelErr, update.Note)
		if !grad.Pass {
			t.Errorf("%s: the gradient row failed: %+v", tc.what, grad)
		}
		if update.Pass {
			t.Errorf("%s: the update row passed: %+v", tc.what, update)
		}
	}

	// Below the threshold clipping is the identity: the law without clipping must pass there, which
	// shows the "below" row really is below.
	c := withLaw(clipStepCase("clip_below", heavy, 100, false), func() stepLaw { return &sgdLaw{momentum: 0.9, wd: 0.01} })
	if r := stepRow(t, c.run(testBackend()), "/update"); !r.Pass || r.MaxRelErr != 0 && r.MaxRelErr > stepTol {
		t.Errorf("below the threshold, the unclipped law must pass: %+v", r)
	}
}

// TestStepChecksPass runs the step checks alone (TestOpChecks runs them too) and checks that every
// regime the rows claim was reached: LAMB's τ = 1 at the zero tensor, clipping above and below.
func TestStepChecksPass(t *testing.T) {
	debugPanics = true
	for _, c := range stepChecks() {
		res := safeRun(c.Name, func() []Result { return c.Run(testBackend()) })
		if len(res) < 2 {
			t.Fatalf("%s: %d rows", c.Name, len(res))
		}
		for _, r := range res {
			t.Logf("%-40s abs %.2e rel %.2e tol %.0e %s", r.Name, r.MaxAbsErr, r.MaxRelErr, r.Tolerance, r.Note)
			if !r.Pass || math.IsNaN(r.MaxRelErr) {
				t.Errorf("%s failed: %+v", r.Name, r)
			}
		}
	}
}
