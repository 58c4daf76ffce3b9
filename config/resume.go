package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	"go.yaml.in/yaml/v3"
)

// resumable are the config keys a resumed run may change: how long to train, how often to eval,
// log and checkpoint, where and on what to run, and how the loader is parallelised. None of them
// changes the update of a step (a new total does move a schedule that depends on it, which is the
// point of extending a run). Every other change is refused: it would make the run an unrecorded mix
// of two recipes.
var resumable = map[string]bool{
	"name": true, "run_dir": true, "backend": true,
	"epochs": true, "steps": true,
	"eval.every_epochs": true, "log.every_steps": true, "log.tensorboard": true,
	"checkpoint.every_steps": true, "checkpoint.keep": true, "checkpoint.best": true,
	"data.workers": true, "data.prefetch": true, "data.eval_batch_size": true,
	"data.device_normalize": true, // where the same floats are computed, not which
	"guard.nonfinite":       true,
	// Policies for bad input, as guard.nonfinite is for bad steps: a run stopped by a bad record
	// resumes skipping it, or with a larger pixel limit.
	"data.on_bad_record": true, "data.max_image_pixels": true,
	// The explicit per-device program and XLA's partitioner compute the same step (sync_bn, which
	// would change it, is not on the list).
	"data_parallel.mode": true,
}

// Resumable reports whether a resumed run may change key (dotted, as in --set).
func Resumable(key string) bool { return resumable[key] }

// ResumableKeys lists the keys a resumed run may change, sorted.
func ResumableKeys() []string {
	keys := make([]string, 0, len(resumable))
	for k := range resumable {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Change is one key whose value differs between two configs.
type Change struct {
	Key      string
	From, To any
}

func (c Change) String() string { return fmt.Sprintf("%s: %v -> %v", c.Key, c.From, c.To) }

// Changes lists the keys (dotted, as in --set) whose values differ between old and cur, sorted.
func Changes(old, cur Config) []Change {
	a, b := flatten(old), flatten(cur)
	var out []Change
	for k, va := range a {
		if vb, ok := b[k]; !ok || !reflect.DeepEqual(va, vb) {
			out = append(out, Change{Key: k, From: va, To: b[k]})
		}
	}
	for k, vb := range b {
		if _, ok := a[k]; !ok {
			out = append(out, Change{Key: k, To: vb})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// flatten maps each leaf key of the config's YAML ("optimizer.lr") to its value.
func flatten(c Config) map[string]any {
	var tree map[string]any
	if err := yaml.Unmarshal(c.YAML(), &tree); err != nil {
		panic(err) // our own YAML always parses
	}
	flat := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
			} else {
				flat[prefix+k] = v
			}
		}
	}
	walk("", tree)
	return flat
}
