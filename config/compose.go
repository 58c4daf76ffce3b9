package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/trainer/trainer/internal/echo"
)

// A recipe composes: a top-level `base: FILE.yaml` (relative to the file that names it) loads that
// file first, and the naming file's keys override it; a base may name its own base. Mappings merge
// key by key, lists and scalars replace the base's value, and --set overrides come last, merged the
// same way. The loader remembers which file (or --set) wrote each key, so an error about a value
// names the file that set it.

// baseKey is the top-level key that names a recipe's base.
const baseKey = "base"

// setOrigin marks keys written by --set.
const setOrigin = "--set"

// layered is a config tree assembled from files and overrides, with the origin of every key.
type layered struct {
	tree   map[string]any
	origin map[string]string // dotted key ("optimizer.lr", also "optimizer") -> file path, or setOrigin
}

func newLayered() *layered {
	return &layered{tree: map[string]any{}, origin: map[string]string{}}
}

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
	text, err := os.ReadFile(path)
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
	settings, isMapping := normalized(tree).(map[string]any)
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
	l.merge(l.tree, settings, "", path)
	return nil
}

// set merges one --set override: key is dotted, value a parsed YAML value (not nil: Load refuses
// `key=` and `key=null`).
func (l *layered) set(key string, value any) {
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
		if sub, ok := v.(map[string]any); !ok || hasValue(sub) {
			return true
		}
	}
	return false
}

// normalized lower-cases every mapping key in v (keys are case-insensitive, as --set's are), turns
// YAML's map[any]any (non-string keys) into map[string]any, and drops keys with no value (`key:`
// alone leaves the key unset).
func normalized(v any) any {
	switch m := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			if e != nil {
				out[strings.ToLower(k)] = normalized(e)
			}
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, e := range m {
			if e != nil {
				out[strings.ToLower(fmt.Sprint(k))] = normalized(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(m))
		for i, e := range m {
			out[i] = normalized(e)
		}
		return out
	}
	return v
}
