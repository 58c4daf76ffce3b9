package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/pjrt"
	"github.com/trainer/trainer/verify"
)

// verifyReport is `trainer verify --json`'s output.
type verifyReport struct {
	Backend  string          `json:"backend"`
	Results  []verify.Result `json:"results"`
	Checks   int             `json:"checks"`
	Failures int             `json:"failures"`
}

// cmdVerify runs the gradient certificates: every op check and every registered net's gradient check
// (docs/verification.md), on the chosen backend. It fails when any check fails.
func cmdVerify(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backendName := fs.String("backend", "go", "backend: go, xla:cpu, xla:cuda, xla:tpu or a plugin path")
	nets := fs.String("net", "", "check only these nets (comma-separated; default: every registered net)")
	opsOnly := fs.Bool("ops-only", false, "run only the op checks")
	netsOnly := fs.Bool("nets-only", false, "run only the whole-net checks")
	checkPattern := fs.String("check", "", "run only the op checks whose names match this regular expression")
	coords := fs.Int("coords", 3, "sampled coordinates per parameter tensor in the net checks")
	asJSON := fs.Bool("json", false, "print JSON")
	positional, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(positional) > 0 {
		return fmt.Errorf("verify: unexpected arguments %v", positional)
	}
	if *opsOnly && *netsOnly {
		return errors.New("verify: --ops-only and --nets-only exclude each other")
	}
	var filter *regexp.Regexp
	if *checkPattern != "" {
		if filter, err = regexp.Compile(*checkPattern); err != nil {
			return fmt.Errorf("verify: --check: %w", err)
		}
	}
	names := graphs.Names()
	if *nets != "" {
		names = strings.Split(*nets, ",")
		for _, n := range names {
			if _, err := graphs.Get(n); err != nil {
				return err
			}
		}
	}
	backend, err := pjrt.Open(*backendName)
	if err != nil {
		return err
	}
	defer backend.Finalize()

	var tw *tabwriter.Writer
	if !*asJSON {
		tw = tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CHECK\tSHAPES\tMAX ABS ERR\tMAX REL ERR\tTOLERANCE\tPASS\tNOTE")
	}
	report := verifyReport{Backend: *backendName}
	emit := func(results []verify.Result) {
		report.Results = append(report.Results, results...)
		if tw == nil {
			return
		}
		for _, r := range results {
			pass := "ok"
			if !r.Pass {
				pass = "FAIL"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2e\t%.2e\t%.0e\t%s\t%s\n", r.Name, r.Shapes, r.MaxAbsErr, r.MaxRelErr, r.Tolerance, pass, r.Note)
		}
		// Rows appear as checks finish; a flush realigns the columns of what is printed so far.
		_ = tw.Flush()
	}
	if !*netsOnly {
		fmt.Fprintf(stderr, "verify: op checks on %s\n", *backendName)
		emit(verify.RunOps(backend, filter))
	}
	if !*opsOnly {
		for _, name := range names {
			fmt.Fprintf(stderr, "verify: net %s\n", name)
			emit(verify.CheckNet(backend, name, verify.NetConfig{Coords: *coords}))
		}
	}
	report.Checks = len(report.Results)
	report.Failures = verify.Failures(report.Results)
	if *asJSON {
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
