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
