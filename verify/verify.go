// Package verify certifies gradients: it checks every op the nets use, and every registered net,
// against a float64 reference and central finite differences, on any GoMLX backend. `trainer verify`
// runs these checks; docs/verification.md maps each one to the statement it mirrors.
package verify

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"runtime/debug"

	"github.com/gomlx/gomlx/backends"

	"github.com/trainer/trainer/graphs/gomlxfix"
)

// Result is the outcome of one comparison.
type Result struct {
	// Name is check/part, e.g. "conv3x3_s2_same/grad".
	Name string `json:"name"`
	// Shapes describes the operands ("x 2x8x8x3, weight 3x3x3x4 -> 2x4x4x4").
	Shapes    string  `json:"shapes"`
	MaxAbsErr float64 `json:"max_abs_err"`
	// MaxRelErr is max |got−want| / max(|want|, 1e-3·max|want|) over the compared values (see
	// reference.Errors); for "differs" checks it is the relative difference that must be large.
	MaxRelErr float64 `json:"max_rel_err"`
	// Tolerance bounds MaxRelErr from above, or from below for checks whose Note says "must differ"
	// or "expected failure".
	Tolerance float64 `json:"tolerance"`
	Pass      bool    `json:"pass"`
	Note      string  `json:"note,omitempty"`
}

// within builds a result that passes when rel ≤ tol.
func within(name, shapes string, abs, rel, tol float64) Result {
	return Result{Name: name, Shapes: shapes, MaxAbsErr: abs, MaxRelErr: rel, Tolerance: tol, Pass: rel <= tol}
}

// failed reports a check that could not run (a build panic, an execution error).
func failed(name, shapes string, err error) Result {
	return Result{Name: name, Shapes: shapes, MaxAbsErr: inf, MaxRelErr: inf, Note: "error: " + err.Error()}
}

// Check is one named op check; Run returns one Result per comparison it makes.
type Check struct {
	Name string
	Run  func(backend backends.Backend) []Result
}

// OpChecks lists the op checks, in the order `trainer verify` prints them. It installs the project's
// GoMLX gradients (gomlxfix), the ones the train step takes and the checks certify.
func OpChecks() []Check {
	gomlxfix.Install()
	var checks []Check
	for _, c := range opCases() {
		checks = append(checks, Check{Name: c.name, Run: c.run})
	}
	checks = append(checks, specialChecks()...)
	checks = append(checks, collectiveChecks()...)
	checks = append(checks, stepChecks()...)
	return checks
}

// RunOps runs the op checks whose names match filter (nil: all) on backend.
func RunOps(backend backends.Backend, filter *regexp.Regexp) []Result {
	var results []Result
	for _, c := range OpChecks() {
		if filter != nil && !filter.MatchString(c.Name) {
			continue
		}
		results = append(results, safeRun(c.Name, func() []Result { return c.Run(backend) })...)
	}
	return results
}

// safeRun turns a panic of a check (GoMLX reports graph errors by panicking) into a failed result.
func safeRun(name string, fn func() []Result) (results []Result) {
	defer func() {
		if r := recover(); r != nil {
			err, ok := r.(error)
			if !ok {
				err = fmt.Errorf("%v", r)
			}
			if debugPanics {
				err = fmt.Errorf("%w\n%s", err, debug.Stack())
			}
			results = append(results, failed(name, "", err))
		}
	}()
	return fn()
}

// debugPanics adds stack traces to failed results (tests set it).
var debugPanics = false

// Failures counts the results that did not pass.
func Failures(results []Result) int {
	n := 0
	for _, r := range results {
		if !r.Pass {
			n++
		}
	}
	return n
}

// MarshalJSON writes non-finite errors (a check that could not run) as null, which JSON can hold.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	finite := func(v float64) *float64 {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		plain
		MaxAbsErr *float64 `json:"max_abs_err"`
		MaxRelErr *float64 `json:"max_rel_err"`
	}{plain(r), finite(r.MaxAbsErr), finite(r.MaxRelErr)})
}
