package checks

import (
	"slices"
	"testing"

	"github.com/trainer/trainer/graphs/testbackend"
	"github.com/trainer/trainer/verify"
)

var testBackend = testbackend.Go

// rowNames are the names of the bestiary's rows in Register's order.
func rowNames() []string {
	var names []string
	for _, group := range [][]func() verify.OpCase{visionCases, denseCases, attentionCases, evoformerCases, structureCases} {
		for _, c := range group {
			names = append(names, c().Name)
		}
	}
	return names
}

// TestRegisterOrder: before Register verify lists none of the bestiary's rows; after it (twice), each
// once, after verify's own op cases and in Register's order.
func TestRegisterOrder(t *testing.T) {
	want := rowNames()
	listed := func() []string {
		var names []string
		for _, c := range verify.OpChecks() {
			names = append(names, c.Name)
		}
		return names
	}
	before := listed()
	for _, name := range want {
		if slices.Contains(before, name) {
			t.Fatalf("verify lists %s before Register", name)
		}
	}
	Register()
	Register()
	after := listed()
	var got []string
	first := -1
	for i, name := range after {
		if slices.Contains(want, name) {
			got = append(got, name)
			if first < 0 {
				first = i
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("rows after Register: %v, want %v", got, want)
	}
	if gomlxTrap := slices.Index(after, "gomlx_batchnorm_trap"); gomlxTrap < 0 || first < gomlxTrap {
		t.Errorf("the bestiary's rows start at %d, before verify's own op cases (the last, gomlx_batchnorm_trap, at %d)", first, gomlxTrap)
	}
}

// TestRows runs every row of the bestiary on the pure-Go backend; each comparison must pass.
func TestRows(t *testing.T) {
	Register()
	names := rowNames()
	ran := 0
	for _, c := range verify.OpChecks() {
		if !slices.Contains(names, c.Name) {
			continue
		}
		ran++
		t.Run(c.Name, func(t *testing.T) {
			for _, r := range c.Run(testBackend()) {
				t.Logf("%-40s abs %.2e rel %.2e tol %.0e pass %v %s", r.Name, r.MaxAbsErr, r.MaxRelErr, r.Tolerance, r.Pass, r.Note)
				if !r.Pass {
					t.Errorf("%s failed: %+v", r.Name, r)
				}
			}
		})
	}
	if ran != len(names) {
		t.Errorf("ran %d rows, want %d", ran, len(names))
	}
}
