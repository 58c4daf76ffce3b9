package trainer

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// A diverged eval (NaN or infinite loss) is logged with null, not an encoding error that ends the run.
func TestMetricsLogWritesNonFiniteAsNull(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	m, err := openMetrics(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.write(map[string]any{"type": "eval", "step": 3, "loss": math.NaN(), "top1": 0.5, "ema_loss": math.Inf(1)}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if v, ok := rec["loss"]; !ok || v != nil {
		t.Errorf("loss = %v (present %v), want null", v, ok)
	}
	if v, ok := rec["ema_loss"]; !ok || v != nil {
		t.Errorf("ema_loss = %v, want null", v)
	}
	if rec["top1"] != 0.5 {
		t.Errorf("top1 = %v, want 0.5", rec["top1"])
	}
}
