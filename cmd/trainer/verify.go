package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/bestiary/checks"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify"
)

// verifyReport is `trainer verify --json`'s output.
type verifyReport struct {
	Backend  string          `json:"backend"`
	Results  []verify.Result `json:"results"`
	Checks   int             `json:"checks"`
	Failures int             `json:"failures"`
}

// newVerifyCommand declares `trainer verify` and its flags.
func newVerifyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every op's and every net's gradients on a backend",
		Long: `Checks every op's forward against a float64 reference and every op's and every registered net's
gradient against finite differences on the chosen backend, and prints the table (docs/verification.md).
It fails when any check fails; run it first on a new PJRT plugin.`,
		Args: cobra.NoArgs,
	}
	var f verifyFlags
	fs := cmd.Flags()
	fs.StringVar(&f.Net, "net", "", "check only the nets `NAME[,NAME]` (default: every registered net)")
	fs.BoolVar(&f.OpsOnly, "ops-only", false, "run only the op checks")
	fs.BoolVar(&f.NetsOnly, "nets-only", false, "run only the whole-net checks")
	fs.StringVar(&f.Check, "check", "", "run only the op checks whose names match the regular expression `REGEXP`")
	fs.IntVar(&f.Coords, "coords", 3, "sampled coordinates `N` per parameter tensor in the net checks")
	fs.StringVar(&f.Backend, "backend", "go", "backend `B`: go, xla:cpu, xla:cuda, xla:tpu or a plugin path")
	fs.BoolVar(&f.JSON, "json", false, "print JSON")
	fs.BoolVar(&f.Wide, "wide", false, "add the operands' shapes, the absolute error and the whole note (lines wider than 80 columns)")
	cmd.MarkFlagsMutuallyExclusive("ops-only", "nets-only")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return verifyMain(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// verifyFlags are `trainer verify`'s flags, one field per flag.
type verifyFlags struct {
	Net      string // --net
	OpsOnly  bool   // --ops-only
	NetsOnly bool   // --nets-only
	Check    string // --check
	Coords   int    // --coords
	Backend  string // --backend
	JSON     bool   // --json
	Wide     bool   // --wide
}

// verifyMain runs the gradient certificates: every op check and every registered net's gradient check
// (docs/verification.md), on the chosen backend. It fails when any check fails.
func verifyMain(f verifyFlags, stdout, stderr io.Writer) error {
	var filter *regexp.Regexp
	if f.Check != "" {
		var err error
		if filter, err = regexp.Compile(f.Check); err != nil {
			return fmt.Errorf("verify: --check: %w", err)
		}
	}
	names := graphs.Names()
	if f.Net != "" {
		names = strings.Split(f.Net, ",")
		for _, n := range names {
			if _, err := graphs.Get(n); err != nil {
				return err
			}
		}
	}
	b, err := backend.Open(f.Backend)
	if err != nil {
		return err
	}
	defer b.Finalize()

	report := verifyReport{Backend: f.Backend}
	if !f.JSON && !f.Wide {
		fmt.Fprintf(stdout, "%-*s  %11s  %9s  %s\n", termWidth-verifyNumbersWidth, "CHECK", "MAX REL ERR", "TOLERANCE", "PASS")
	}
	emit := func(results []verify.Result) {
		report.Results = append(report.Results, results...)
		if !f.JSON {
			// Rows appear as checks finish, one group at a time, each laid out for its own widths.
			writeVerifyTable(stdout, results, f.Wide)
		}
	}
	if !f.NetsOnly {
		checks.Register() // the bestiary's rows, after verify's own op checks
		fmt.Fprintf(stderr, "verify: op checks on %s\n", f.Backend)
		emit(verify.RunOps(b, filter))
	}
	if !f.OpsOnly {
		for _, name := range names {
			fmt.Fprintf(stderr, "verify: net %s\n", name)
			emit(verify.CheckNet(b, name, verify.NetConfig{Coords: f.Coords}))
		}
	}
	report.Checks = len(report.Results)
	report.Failures = verify.Failures(report.Results)
	if f.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%d checks, %d failed\n", report.Checks, report.Failures)
	}
	if report.Checks == 0 {
		return errors.New("verify: no check matched")
	}
	if report.Failures > 0 {
		return fmt.Errorf("verify: %d of %d checks failed", report.Failures, report.Checks)
	}
	return nil
}

// writeVerifyTable prints results as a table: CHECK, MAX REL ERR, TOLERANCE, PASS in 80 columns (a
// check's note on the line below it, cut to fit); wide adds SHAPES and MAX ABS ERR and keeps the note
// in its column.
func writeVerifyTable(w io.Writer, results []verify.Result, wide bool) {
	pass := func(r verify.Result) string {
		if r.Pass {
			return "ok"
		}
		return "FAIL"
	}
	if wide {
		cols := []column{{"CHECK", false}, {"SHAPES", false}, {"MAX ABS ERR", true}, {"MAX REL ERR", true},
			{"TOLERANCE", true}, {"PASS", false}, {"NOTE", false}}
		var rows [][]string
		for _, r := range results {
			rows = append(rows, []string{r.Name, shortShapes(r.Shapes, verifyShapesWidth), fmt.Sprintf("%.2e", r.MaxAbsErr),
				fmt.Sprintf("%.2e", r.MaxRelErr), fmt.Sprintf("%.0e", r.Tolerance), pass(r), r.Note})
		}
		writeTable(w, cols, rows, 0)
		return
	}
	for _, r := range results {
		name := cutTo(r.Name, termWidth-verifyNumbersWidth)
		fmt.Fprintf(w, "%-*s  %11.2e  %9.0e  %s\n", termWidth-verifyNumbersWidth, name, r.MaxRelErr, r.Tolerance, pass(r))
		if r.Note != "" {
			fmt.Fprintln(w, cutTo("    "+r.Note, termWidth))
		}
	}
}

// verifyNumbersWidth is the width of the narrow table's columns after CHECK: MAX REL ERR, TOLERANCE
// and PASS, two spaces apart; CHECK takes the rest of the 80 columns.
const verifyNumbersWidth = 2 + 11 + 2 + 9 + 2 + 4

// verifyShapesWidth bounds the table's SHAPES column: a layer with dozens of parameters (the bestiary's
// Swin stage, Evoformer) would otherwise widen every row. --json keeps the whole description.
const verifyShapesWidth = 100

// shortShapes cuts an operand list ("x 2x8x8x3, weight 3x3x3x4 -> 2x4x4x4") to about width characters
// at an operand boundary, saying how many operands it left out and keeping the output shape.
func shortShapes(s string, width int) string {
	if len(s) <= width {
		return s
	}
	in, out, hasOut := strings.Cut(s, " -> ")
	operands := strings.Split(in, ", ")
	kept := operands[0]
	n := 1
	for ; n < len(operands) && len(kept)+2+len(operands[n]) <= width-30; n++ {
		kept += ", " + operands[n]
	}
	if n < len(operands) {
		kept += fmt.Sprintf(", … (+%d more)", len(operands)-n)
	}
	if hasOut {
		kept += " -> " + out
	}
	return kept
}
