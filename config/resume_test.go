package config

import (
	"fmt"
	"testing"
)

// TestChangesAndResumableKeys: Changes lists every differing leaf key, sorted, with both values; the
// allow-list takes the keys that do not change a step's update and refuses the others.
func TestChangesAndResumableKeys(t *testing.T) {
	old := Defaults()
	cur := old
	cur.Steps, cur.Optimizer.LR, cur.Data.Mean = 20, 0.05, []float64{0.5}
	got := fmt.Sprint(Changes(old, cur))
	if want := "[data.mean: [] -> [0.5] optimizer.lr: 0.1 -> 0.05 steps: 0 -> 20]"; got != want {
		t.Errorf("Changes: %s, want %s", got, want)
	}
	if Changes(old, old) != nil {
		t.Errorf("Changes of a config with itself: %v", Changes(old, old))
	}
	for key, want := range map[string]bool{"steps": true, "epochs": true, "data.workers": true, "guard.nonfinite": true,
		"optimizer.lr": false, "data.batch_size": false, "net.width": false,
		"data_parallel.mode": true, "data_parallel.sync_bn": false, "replicas": false} {
		if Resumable(key) != want {
			t.Errorf("Resumable(%s) = %v, want %v", key, !want, want)
		}
	}
	keys := ResumableKeys()
	if len(keys) != len(resumable) || keys[0] != "backend" {
		t.Errorf("ResumableKeys: %v", keys)
	}
}
