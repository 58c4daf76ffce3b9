package netspec

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzLoad feeds arbitrary YAML to Load: it must refuse it with an *Error or return a net whose
// inferred shapes end in the logits and whose counts are within the bounds, never panic. `go test`
// runs the seeds; `-fuzz FuzzLoad` explores.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{mnistCNN, everyKind, tokens, "[]", "- relu", "- {input: {size: 1, channels: 1, classes: 1}}\n- flatten\n- dense: {units: classes}",
		"- input: {size: 8, channels: 2, classes: 2}\n- residual: {projection: conv, layers: [maxpool: {kernel: 2}, conv: {filters: 4, kernel: 1}]}\n- globalavgpool\n- dense: {units: classes}"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var list []any
		if yaml.Unmarshal([]byte(text), &list) != nil {
			return
		}
		net, err := Load("fuzz.yaml", list, Sizes{})
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %v is a %T, want *Error", err, err)
			}
			return
		}
		rows := net.Rows()
		last := rows[len(rows)-1].Out
		params, macs := net.Totals()
		if len(last) != 1 || last[0] != net.Classes || params < 0 || params > MaxParameters || macs < 0 {
			t.Fatalf("loaded a net ending in %v (classes %d) with %d parameters, %d MACs", last, net.Classes, params, macs)
		}
	})
}
