package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func runVerify(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := cmdVerify(args, &out, &errOut)
	return out.String(), err
}

func TestVerifyOpsJSON(t *testing.T) {
	out, err := runVerify(t, "--ops-only", "--check", "^(relu|conv3x3_s2_same|maxpool2x2_s2_ties|sgd_nesterov_step)$", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var report struct {
		Backend string `json:"backend"`
		Results []struct {
			Name      string   `json:"name"`
			MaxRelErr *float64 `json:"max_rel_err"`
			Tolerance float64  `json:"tolerance"`
			Pass      bool     `json:"pass"`
		} `json:"results"`
		Checks, Failures int
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, r := range report.Results {
		got[r.Name] = r.Pass
		if r.MaxRelErr == nil || *r.MaxRelErr > r.Tolerance {
			t.Errorf("%s: rel err %v above tolerance %v", r.Name, r.MaxRelErr, r.Tolerance)
		}
	}
	for _, want := range []string{"relu/forward", "relu/grad", "relu/float32", "conv3x3_s2_same/grad",
		"maxpool2x2_s2_ties/grad", "sgd_nesterov_step/update"} {
		if pass, ok := got[want]; !ok || !pass {
			t.Errorf("%s: present %v, pass %v", want, ok, pass)
		}
	}
	if report.Backend != "go" || report.Checks != len(report.Results) || report.Failures != 0 || report.Checks != 10 {
		t.Errorf("report header: backend %q, %d checks, %d failures", report.Backend, report.Checks, report.Failures)
	}
}

// TestVerifyNetTable: the table fits 80 columns (CHECK, MAX REL ERR, TOLERANCE, PASS); --wide adds
// the operands and the absolute error.
func TestVerifyNetTable(t *testing.T) {
	out, err := runVerify(t, "--nets-only", "--net", "linear", "--coords", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if len([]rune(line)) > 80 {
			t.Errorf("a line of %d columns: %q", len([]rune(line)), line)
		}
		if !strings.HasPrefix(line, "    ") { // a check's note, below its row
			lines = append(lines, line)
		}
	}
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "CHECK") || !strings.HasSuffix(lines[0], "MAX REL ERR  TOLERANCE  PASS") ||
		!strings.Contains(out, "\n    not applicable: the loss does not change with the drop-path rate") {
		t.Fatalf("want a header, two rows (the second with its note below) and a summary:\n%s", out)
	}
	for _, row := range lines[1:3] {
		f := strings.Fields(row)
		if !strings.HasPrefix(f[0], "net:linear/") || f[len(f)-1] != "ok" || len(f) != 4 {
			t.Errorf("row %q", row)
		}
	}
	if lines[3] != "2 checks, 0 failed" {
		t.Errorf("summary %q", lines[3])
	}
	wide, err := runVerify(t, "--nets-only", "--net", "linear", "--coords", "2", "--wide")
	if err != nil {
		t.Fatalf("%v\n%s", err, wide)
	}
	lines = strings.Split(strings.TrimSpace(wide), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "SHAPES") || !strings.Contains(lines[0], "MAX ABS ERR") {
		t.Fatalf("--wide: want a header with SHAPES and MAX ABS ERR, two rows and a summary:\n%s", wide)
	}
	if !strings.Contains(lines[1], "2 tensors (7850 params), 4 coords") {
		t.Errorf("the plain pass should check 2 coords of each of linear's 2 tensors: %q", lines[1])
	}
}

func TestVerifyRefusesBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"--net", "no_such_net"},
		{"--ops-only", "--nets-only"},
		{"--ops-only", "--check", "("},
		{"--ops-only", "--check", "^nothing matches this$"},
		{"--backend", "bogus"},
		{"extra"},
	} {
		if _, err := runVerify(t, args...); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

// TestShortShapes: a long operand list is cut at an operand boundary with the count of those left out
// and the output shape kept; a short one is unchanged.
func TestShortShapes(t *testing.T) {
	short := "x 2x8x8x3, weight 3x3x3x4 -> 2x4x4x4"
	if got := shortShapes(short, 100); got != short {
		t.Errorf("short list changed: %q", got)
	}
	var ops []string
	for i := range 40 {
		ops = append(ops, fmt.Sprintf("weight%d 4x12", i))
	}
	long := "x 2x3x3x4, " + strings.Join(ops, ", ") + " -> 2x3x3x4"
	got := shortShapes(long, 100)
	if len(got) > 100 || !strings.HasPrefix(got, "x 2x3x3x4, weight0 4x12, ") || !strings.HasSuffix(got, " -> 2x3x3x4") {
		t.Fatalf("shortShapes = %q (%d chars), want at most 100 starting with the first operands and ending with the output", got, len(got))
	}
	kept := strings.Count(got, " 4x12")
	if want := fmt.Sprintf("… (+%d more)", 40-kept); !strings.Contains(got, want) {
		t.Errorf("shortShapes = %q, want it to say %q", got, want)
	}
}
