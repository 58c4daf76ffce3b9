package config

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/trainer/trainer/internal/echo"
)

// LoadChecked reads the YAML recipe at path with its base chain (compose.go), applies "key=value"
// overrides, and returns the config validated by Validate and by world (nil: config's own rules only);
// every problem is reported with the file (or --set) that set the key, the key and what was expected.
func LoadChecked(path string, overrides []string, world Checker) (Config, error) {
	cfg, _, err := LoadCheckedNotes(path, overrides, world)
	return cfg, err
}

// LoadNotes is Load, also returning the notes on what composing the layers changed that no layer
// wrote: the keys an optimizer switch dropped (compose.go).
func LoadNotes(path string, overrides []string) (Config, []string, error) {
	return LoadCheckedNotes(path, overrides, nil)
}

// LoadCheckedNotes is LoadChecked, also returning LoadNotes' notes. The commands that train print them.
func LoadCheckedNotes(path string, overrides []string, world Checker) (Config, []string, error) {
	cfg, l, err := load(path, overrides, world)
	if err != nil {
		return Config{}, nil, err
	}
	return cfg, l.notes, nil
}

func load(path string, overrides []string, world Checker) (Config, *layered, error) {
	l := newLayered()
	if err := l.readFile(path, nil); err != nil {
		return Config{}, nil, err
	}
	for _, o := range overrides {
		key, raw, ok := strings.Cut(o, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		if !ok || key == "" {
			return Config{}, nil, fmt.Errorf("--set %s: expected key=value, e.g. --set optimizer.lr=0.05", echo.Quote(o))
		}
		value, err := parseYAML([]byte(raw))
		if err != nil {
			return Config{}, nil, fmt.Errorf("--set %s: cannot parse value %s: %v", echo.Cut(key), echo.Quote(raw), err)
		}
		if value == nil {
			// `key=` and `key=null` would leave the key as it was: a --set that silently does nothing.
			return Config{}, nil, fmt.Errorf("--set %s: no value (got %s): expected key=value with a value; "+
				"leave the --set out to keep the recipe's value (in a recipe file, `key:` with no value resets a base's key "+
				"to its default)", echo.Cut(key), echo.Quote(raw))
		}
		l.set(key, value)
	}
	l.dropStaleOptimizerKeys()
	if err := l.checkResets(); err != nil {
		return Config{}, nil, err
	}
	cfg := Defaults()
	source := func(key string) string { return l.source(path, key) }
	if err := decode(reflect.ValueOf(&cfg).Elem(), l.tree, "", source); err != nil {
		return Config{}, nil, err
	}
	if err := cfg.Data.expandPaths(source); err != nil {
		return Config{}, nil, err
	}
	if err := cfg.Net.resolveSpec(l, path, source, world); err != nil {
		return Config{}, nil, err
	}
	if cfg.Name == "" {
		cfg.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	l.dropStaleLRs(&cfg)
	if err := cfg.ValidateIn(world, 0); err != nil {
		return Config{}, nil, fmt.Errorf("config %s: %w", path, l.attribute(path, err))
	}
	return cfg, l, nil
}

// decode copies settings into the struct dst, strictly: unknown keys and wrong types are errors.
func decode(dst reflect.Value, settings map[string]any, prefix string, source func(string) string) error {
	fields := map[string]reflect.Value{}
	var names []string
	for i := range dst.NumField() {
		tag := yamlName(dst.Type().Field(i))
		fields[tag] = dst.Field(i)
		names = append(names, tag)
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		key := prefix + k
		field, ok := fields[k]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: unknown key; expected one of: %s", source(key), joinPrefixed(prefix, names)))
			continue
		}
		if err := setField(field, settings[k], key, source); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// yamlName is a field's key: its yaml tag without options (omitempty).
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

func joinPrefixed(prefix string, names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return strings.Join(out, ", ")
}

// maxString bounds every string value of a recipe: the longest are paths (PATH_MAX is 4096).
const maxString = 4096

// setField converts one YAML value into the field's type without guessing: an int field takes only
// integral numbers, a string field only strings, and so on.
func setField(field reflect.Value, value any, key string, source func(string) string) error {
	bad := func(want string) error {
		return fmt.Errorf("%s: expected %s, got %T %s", source(key), want, value, echo.Value(value))
	}
	switch field.Kind() {
	case reflect.Struct:
		m, ok := value.(map[string]any)
		if !ok {
			return bad("a mapping of keys")
		}
		return decode(field, m, key+".", source)
	case reflect.String:
		s, ok := value.(string)
		if field.Type() == reflect.TypeOf(Switch("")) {
			if b, isBool := value.(bool); isBool {
				s, ok = fmt.Sprint(b), true // device_normalize: true
			}
			if !ok {
				return bad("auto, true or false")
			}
		}
		if !ok {
			return bad("a string")
		}
		if len(s) > maxString {
			return fmt.Errorf("%s: expected a string of at most %d bytes, got %s", source(key), maxString, echo.Quote(s))
		}
		field.SetString(s)
	case reflect.Bool:
		b, ok := value.(bool)
		if !ok {
			return bad("true or false")
		}
		field.SetBool(b)
	case reflect.Int:
		switch n := value.(type) {
		case int:
			field.SetInt(int64(n))
		case int64:
			field.SetInt(n)
		case float64:
			// Checked before converting: int64 of a float past its range is not defined (1e19 and .inf).
			if n != math.Trunc(n) || !(math.Abs(n) < 1<<63) {
				return bad("an integer")
			}
			field.SetInt(int64(n))
		default:
			return bad("an integer")
		}
	case reflect.Float64:
		switch n := value.(type) {
		case int:
			field.SetFloat(float64(n))
		case int64:
			field.SetFloat(float64(n))
		case float64:
			field.SetFloat(n)
		default:
			return bad("a number")
		}
	case reflect.Slice:
		if field.Type().Elem().Kind() == reflect.String {
			return setStrings(field, value, key, source)
		}
		if field.Type().Elem().Kind() == reflect.Interface { // net.spec: checked by graphs/netspec
			list, ok := value.([]any)
			if !ok {
				return bad("a list of layers")
			}
			field.Set(reflect.ValueOf(list))
			return nil
		}
		if field.Type().Elem().Kind() != reflect.Float64 {
			return fmt.Errorf("%s: field type %s not supported by the config decoder", source(key), field.Type())
		}
		list, ok := value.([]any)
		switch value.(type) {
		case int, int64, float64: // a single number is a list of one (data.mean: 0.1307)
			list, ok = []any{value}, true
		}
		if !ok {
			return bad("a list of numbers")
		}
		out := make([]float64, len(list))
		for i, item := range list {
			switch n := item.(type) {
			case int:
				out[i] = float64(n)
			case int64:
				out[i] = float64(n)
			case float64:
				out[i] = n
			default:
				return bad("a list of numbers")
			}
		}
		field.Set(reflect.ValueOf(out))
	case reflect.Map:
		return setFactors(field, value, key, source)
	default:
		return fmt.Errorf("%s: field kind %s not supported by the config decoder", source(key), field.Kind())
	}
	return nil
}

// setStrings sets a list of strings (optimizer.freeze); a single string is a list of one.
func setStrings(field reflect.Value, value any, key string, source func(string) string) error {
	list, ok := value.([]any)
	if s, isString := value.(string); isString {
		list, ok = []any{s}, true
	}
	if !ok {
		return fmt.Errorf("%s: expected a list of strings, got %T %s", source(key), value, echo.Value(value))
	}
	out := make([]string, len(list))
	for i, item := range list {
		s, ok := item.(string)
		if !ok || len(s) > maxString {
			return fmt.Errorf("%s: expected a list of strings, got %s at position %d", source(key), echo.Value(item), i)
		}
		out[i] = s
	}
	field.Set(reflect.ValueOf(out))
	return nil
}

// setFactors sets a mapping of names to numbers (optimizer.lr_mult).
func setFactors(field reflect.Value, value any, key string, source func(string) string) error {
	if field.Type() != reflect.TypeOf(map[string]float64(nil)) {
		return fmt.Errorf("%s: field type %s not supported by the config decoder", source(key), field.Type())
	}
	m, ok := value.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: expected a mapping of patterns to numbers, got %T %s", source(key), value, echo.Value(value))
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		switch n := v.(type) {
		case int:
			out[k] = float64(n)
		case int64:
			out[k] = float64(n)
		case float64:
			out[k] = n
		default:
			return fmt.Errorf("%s.%s: expected a number, got %T %s", source(key), echo.Cut(k), v, echo.Value(v))
		}
	}
	field.Set(reflect.ValueOf(out))
	return nil
}
