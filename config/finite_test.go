package config

import (
	"reflect"
	"strings"
	"testing"
)

// fieldByKey is the field of the struct v that the dotted key names.
func fieldByKey(v reflect.Value, key string) reflect.Value {
	for _, part := range strings.Split(key, ".") {
		for i := range v.NumField() {
			if yamlName(v.Type().Field(i)) == part {
				v = v.Field(i)
				break
			}
		}
	}
	return v
}

// TestNonFiniteNumbersRefusedInEveryKey: NaN, +Inf and -Inf are refused in every number key of the
// schema (plain, list and lr_mult's factors), each with one error naming the key, whatever the key's
// range check would have said (`x >= 0` holds for +Inf: cutmix_alpha=.inf trained on broken targets).
func TestNonFiniteNumbersRefusedInEveryKey(t *testing.T) {
	path := writeConfig(t, "seed: 1\n")
	d := reflect.ValueOf(Defaults())
	tried := 0
	for _, k := range Keys() {
		f := fieldByKey(d, k.Name)
		var values []string
		switch {
		case f.Kind() == reflect.Float64:
			values = []string{".nan", ".inf", "-.inf"}
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Float64:
			values = []string{"[0.5, .nan]", "[.inf, 0.5]"}
		case f.Kind() == reflect.Map:
			values = []string{"{fc: .nan}", "{fc: .inf}"}
		default:
			continue
		}
		for _, v := range values {
			tried++
			_, err := Load(path, []string{k.Name + "=" + v})
			if err == nil {
				t.Errorf("--set %s=%s loaded, want it refused", k.Name, v)
				continue
			}
			var about []string
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.Contains(line, "--set "+k.Name+":") {
					about = append(about, line)
				}
			}
			if len(about) != 1 || !strings.Contains(about[0], "expected a finite number") {
				t.Errorf("--set %s=%s: errors about the key %q, want one saying a finite number was expected", k.Name, v, about)
			}
		}
	}
	if tried < 60 {
		t.Errorf("tried %d values, want every number key (about 30 keys)", tried)
	}
}

// TestRunLengthKeysBounded: epochs, steps and the warmup are bounded by MaxSteps when the recipe loads
// (epochs=1e18 wrapped the step count after the run directory was made; warmup_epochs=1e18 wrapped
// the warmup negative and trained without one), and WarmupLength saturates instead of wrapping.
func TestRunLengthKeysBounded(t *testing.T) {
	path := writeConfig(t, "seed: 1\n")
	for _, set := range []string{"epochs=1e18", "steps=1000000000", "schedule.warmup_epochs=1e18", "schedule.warmup_steps=1e12"} {
		key, _, _ := strings.Cut(set, "=")
		_, err := Load(path, []string{set})
		if err == nil || !strings.Contains(err.Error(), "--set "+key+": got") || !strings.Contains(err.Error(), "999999999]") {
			t.Errorf("--set %s: %v, want an error naming the key and the bound %d", set, err, MaxSteps)
		}
	}
	for _, set := range []string{"epochs=1e19", "epochs=-1e300", "steps=.inf", "epochs=.nan"} {
		if _, err := Load(path, []string{set}); err == nil || !strings.Contains(err.Error(), "expected an integer") {
			t.Errorf("--set %s: %v, want it refused as not an integer", set, err)
		}
	}
	s := ScheduleConfig{WarmupEpochs: 1e18}
	if w := s.WarmupLength(1000); w < MaxSteps {
		t.Errorf("warmup of 1e18 epochs of 1000 steps: %d steps, want more than any run (%d)", w, MaxSteps)
	}
	s.WarmupEpochs = 2.5
	if w := s.WarmupLength(10); w != 25 {
		t.Errorf("warmup of 2.5 epochs of 10 steps: %d, want 25", w)
	}
}

// TestBuffersBounded: the keys that size what the loader allocates up front are bounded by the
// loader's own limits (data.prefetch=100000 allocated 100,000 batches when an epoch started).
func TestBuffersBounded(t *testing.T) {
	path := writeConfig(t, "seed: 1\n")
	for _, c := range []struct{ set, want string }{
		{"data.prefetch=100000", "[0, 16]"}, {"data.workers=1000000", "[0, 256]"},
		{"data.batch_size=100000000", "[1, 65536]"}, {"data.eval_batch_size=100000000", "[1, 65536]"},
		{"net.image_size=100000", "[0, 4096]"},
	} {
		key, _, _ := strings.Cut(c.set, "=")
		if _, err := Load(path, []string{c.set}); err == nil || !strings.Contains(err.Error(), "--set "+key+": got") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: %v, want an error naming the key and %s", c.set, err, c.want)
		}
	}
	if _, err := Load(path, []string{"data.prefetch=16", "data.workers=256"}); err != nil {
		t.Errorf("the largest prefetch and workers: %v", err)
	}
}
