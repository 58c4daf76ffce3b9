package config

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/trainer/trainer/internal/bounded"
	"github.com/trainer/trainer/internal/echo"
)

// A recipe composes: a top-level `base: FILE.yaml` (relative to the file that names it) loads that
// file first, and the naming file's keys override it; a base may name its own base. Mappings merge
// key by key, lists and scalars replace the base's value, and --set overrides come last, merged the
// same way. The loader remembers which file (or --set) wrote each key, so an error about a value
// names the file that set it.

// A key written with no value (`key:` alone) in a recipe file resets it: it removes what a base set,
// so the key takes its default. An optimizer switch (optimizer.name set by a later layer than a
// base's optimizer keys: a derived recipe or --set) drops the earlier layers' keys of the old
// optimizer that the new one does not have, with a note (dropStaleOptimizerKeys).

// reset marks a key written with no value in a recipe file.
type reset struct{}

// baseKey is the top-level key that names a recipe's base.
const baseKey = "base"

// setOrigin marks keys written by --set.
const setOrigin = "--set"

// layered is a config tree assembled from files and overrides, with the origin of every key.
type layered struct {
	tree   map[string]any
	origin map[string]string // dotted key ("optimizer.lr", also "optimizer") -> file path, or setOrigin
	layers []string          // the origins in the order they were merged (bases first, --set last)
	resets map[string]string // keys written with no value -> the file that reset them
	notes  []string          // what composing changed that the user did not write (dropped keys)
}

func newLayered() *layered {
	return &layered{tree: map[string]any{}, origin: map[string]string{}, resets: map[string]string{}}
}

// MaxRecipeBytes bounds a recipe or base file, read whole before parsing (the shipped ones are a few
// KiB; a device such as /dev/zero is refused as no regular file).
const MaxRecipeBytes = 1 << 20

// readFile merges the recipe at path into l, its base chain first. chain holds the files that led
// here (the top file first), to refuse a cycle and name the chain of a missing base.
func (l *layered) readFile(path string, chain []string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	for _, prev := range chain {
		if prevAbs, _ := filepath.Abs(prev); prevAbs == abs {
			return fmt.Errorf("config %s: base cycle: %s", chain[0], strings.Join(append(chain, path), " -> "))
		}
	}
	text, err := bounded.ReadFile(path, MaxRecipeBytes)
	if err != nil {
		if len(chain) > 0 {
			return fmt.Errorf("config %s: base %s: %w", chain[0], strings.Join(append(chain, path), " -> "), err)
		}
		return fmt.Errorf("config %s: %w", path, err)
	}
	tree, err := parseYAML(text)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	settings, isMapping := normalizedKeepingResets(tree).(map[string]any)
	if !isMapping && tree != nil {
		return fmt.Errorf("config %s: expected a mapping of keys (`epochs: 10`), got %T %s", path, tree, echo.Value(tree))
	}
	if !hasValue(settings) {
		// An empty file (a failed copy, a `>` instead of `>>`) would silently train the default net.
		where := path
		if len(chain) > 0 {
			where = chain[0] + ": base " + strings.Join(append(chain, path), " -> ")
		}
		return fmt.Errorf("config %s: the file holds no settings (it is empty, or only comments or keys without values): "+
			"expected a recipe, e.g. `net: {name: mnist_cnn}` (docs/configs.md)", where)
	}
	if base, ok := settings[baseKey]; ok {
		name, isString := base.(string)
		if !isString || name == "" {
			return fmt.Errorf("%s: %s: expected the file name of the base recipe (relative to this file), got %T %s",
				path, baseKey, base, echo.Value(base))
		}
		if !filepath.IsAbs(name) {
			name = filepath.Join(filepath.Dir(path), name)
		}
		if err := l.readFile(name, append(chain, path)); err != nil {
			return err
		}
		delete(settings, baseKey)
	}
	l.layers = append(l.layers, path)
	l.merge(l.tree, settings, "", path)
	return nil
}

// set merges one --set override: key is dotted, value a parsed YAML value (not nil: Load refuses
// `key=` and `key=null`).
func (l *layered) set(key string, value any) {
	if len(l.layers) == 0 || l.layers[len(l.layers)-1] != setOrigin {
		l.layers = append(l.layers, setOrigin)
	}
	parts := strings.Split(key, ".")
	m := l.tree
	for i, p := range parts[:len(parts)-1] {
		prefix := strings.Join(parts[:i+1], ".")
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
			l.origin[prefix] = setOrigin
		}
		m = sub
	}
	l.merge(m, map[string]any{parts[len(parts)-1]: normalized(value)}, strings.Join(parts[:len(parts)-1], "."), setOrigin)
}

// merge copies src into dst under the dotted prefix, recording origin for every key it writes: a
// mapping merges into a mapping key by key, anything else replaces what was there.
func (l *layered) merge(dst, src map[string]any, prefix, origin string) {
	if prefix != "" && !strings.HasSuffix(prefix, ".") {
		prefix += "."
	}
	for k, v := range src {
		key := prefix + k
		l.origin[key] = origin
		if _, isReset := v.(reset); isReset {
			delete(dst, k)
			l.resets[key] = origin
			continue
		}
		delete(l.resets, key)
		sub, isMap := v.(map[string]any)
		if !isMap {
			dst[k] = v
			continue
		}
		into, ok := dst[k].(map[string]any)
		if !ok {
			into = map[string]any{}
			dst[k] = into
		}
		l.merge(into, sub, key, origin)
	}
}

// attribute rewrites each validation error about a key that a base file or --set wrote so that it
// names that origin, as decoding errors do: "BASE: key: ..." or "--set key: ...".
func (l *layered) attribute(top string, err error) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var out []error
	for _, e := range joined.Unwrap() {
		var ke *keyError
		if errors.As(e, &ke) && l.origin[ke.key] != "" && l.origin[ke.key] != top {
			e = fmt.Errorf("%s: %s", l.source(top, ke.key), ke.msg)
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

// source names where key was set, for an error: "FILE: key" or "--set key"; top is the file loaded.
func (l *layered) source(top, key string) string {
	origin := l.origin[key]
	key = echo.Cut(key) // an unknown key is whatever the file says
	switch origin {
	case setOrigin:
		return setOrigin + " " + key
	case "":
		return top + ": " + key
	default:
		return origin + ": " + key
	}
}

// hasValue reports whether the tree m sets anything: a key with a value that is not a mapping.
func hasValue(m map[string]any) bool {
	for _, v := range m {
		if _, isReset := v.(reset); isReset {
			continue
		}
		if sub, ok := v.(map[string]any); !ok || hasValue(sub) {
			return true
		}
	}
	return false
}

// normalized lower-cases every mapping key in v (keys are case-insensitive, as --set's are), turns
// YAML's map[any]any (non-string keys) into map[string]any, and drops keys with no value.
func normalized(v any) any { return normalize(v, false) }

// normalizedKeepingResets is normalized for a recipe file: a key with no value becomes a reset.
func normalizedKeepingResets(v any) any { return normalize(v, true) }

func normalize(v any, resets bool) any {
	entry := func(out map[string]any, k string, e any) {
		switch {
		case e != nil:
			out[strings.ToLower(k)] = normalize(e, resets)
		case resets:
			out[strings.ToLower(k)] = reset{}
		}
	}
	switch m := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			entry(out, k, e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			entry(out, fmt.Sprint(k), e)
		}
		return out
	case []any:
		out := make([]any, len(m))
		for i, e := range m {
			out[i] = normalize(e, false)
		}
		return out
	}
	return v
}

// rank is the position of origin among the merged layers (-1: none).
func (l *layered) rank(origin string) int {
	for i, o := range l.layers {
		if o == origin {
			return i
		}
	}
	return -1
}

// optimizerOnlyKeys are the optimizer keys that only some optimizers have: optimizerDefaults' per
// optimizer, and two forms of one optimizer each.
var optimizerOnlyKeys = map[string]string{"nesterov": "sgd", "lr_outside": "rmsprop_tf"}

// optimizerHas reports whether optimizer name has key, for the keys that only some optimizers have;
// ok is false for a key every optimizer has (lr, weight_decay, ...).
func optimizerHas(name, key string) (has, ok bool) {
	if only, isForm := optimizerOnlyKeys[key]; isForm {
		return only == name, true
	}
	if !slices.Contains(optimizerHyperparameters, key) {
		return false, false
	}
	_, has = optimizerDefaults[name][key]
	return has, true
}

// dropStaleOptimizerKeys removes the optimizer keys that a layer before the one that set
// optimizer.name wrote and that optimizer does not have (a recipe deriving from an SGD recipe with
// `optimizer: {name: adamw}` inherits momentum and nesterov it cannot use), noting each. A key the
// switching layer or a later one writes is the user's own and stays (validation refuses it).
func (l *layered) dropStaleOptimizerKeys() {
	opt, _ := l.tree["optimizer"].(map[string]any)
	name, _ := opt["name"].(string)
	if name == "" || optimizerDefaults[name] == nil {
		return
	}
	by := l.origin["optimizer.name"]
	switchRank := l.rank(by)
	for _, k := range slices.Sorted(maps.Keys(opt)) {
		has, specific := optimizerHas(name, k)
		from := l.origin["optimizer."+k]
		if !specific || has || l.rank(from) >= switchRank {
			continue
		}
		l.notes = append(l.notes, fmt.Sprintf("note: %s switches the optimizer to %s: dropped optimizer.%s %s, which %s set "+
			"and %s has not", l.layerName(by), name, k, echo.Value(opt[k]), l.layerName(from), name))
		delete(opt, k)
	}
}

// layerName names a layer in a note: its file, or "--set".
func (l *layered) layerName(origin string) string {
	if origin == "" {
		return "the defaults"
	}
	return origin
}

// dropStaleLRs resets schedule.warmup_start_lr and schedule.min_lr (to 0, their default) where a layer
// before the one that set the peak (optimizer.lr or optimizer.name: a derived recipe or --set) wrote
// them and they exceed the new peak lr, which validation would refuse: they were written for the
// earlier optimizer's rates. It notes each.
func (l *layered) dropStaleLRs(cfg *Config) {
	peakRank := max(l.rank(l.origin["optimizer.lr"]), l.rank(l.origin["optimizer.name"]))
	for _, f := range []struct {
		key string
		v   *float64
	}{{"schedule.warmup_start_lr", &cfg.Schedule.WarmupStartLR}, {"schedule.min_lr", &cfg.Schedule.MinLR}} {
		from := l.origin[f.key]
		if *f.v <= cfg.PeakLR() || from == "" || l.rank(from) >= peakRank {
			continue
		}
		l.notes = append(l.notes, fmt.Sprintf("note: %s %g, which %s set, exceeds the peak lr %g that %s sets: reset to 0",
			f.key, *f.v, l.layerName(from), cfg.PeakLR(), l.layerName(l.layers[peakRank])))
		*f.v = 0
	}
}

// checkResets refuses a reset of a key the schema does not have (a typo would otherwise reset nothing
// in silence), naming the file.
func (l *layered) checkResets() error {
	keys := Keys()
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(l.resets)) {
		known := false
		for _, k := range keys {
			if key == k.Name || strings.HasPrefix(k.Name, key+".") ||
				(k.Default == "`{}`" && strings.HasPrefix(key, k.Name+".")) {
				known = true
				break
			}
		}
		if !known {
			errs = append(errs, fmt.Errorf("%s: %s: unknown key (written with no value, which resets a key to its default)",
				l.resets[key], echo.Cut(key)))
		}
	}
	return errors.Join(errs...)
}
