package config

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/internal/echo"
)

// maxYAMLNodes bounds the values a recipe, a --set value or a spec file may build, aliases expanded:
// a few aliases nested in each other (a "billion laughs") would otherwise build a tree of any size.
// The largest shipped recipe builds a few hundred; a recipe with 100,000 lr_mult patterns 200,001.
const maxYAMLNodes = 1 << 21

// parseYAML decodes text, which must hold exactly one YAML document, into plain values: mappings
// as map[string]any with their keys lower-cased (keys are case-insensitive, as --set's are), lists
// as []any, scalars as yaml.v3 decodes them into an interface. Two keys of one mapping that differ
// only in case are refused, naming both lines: which one won would depend on map order. yaml.v3's
// own duplicate check compares every key with every other (a recipe of 100,000 lr_mult patterns took
// over 30 s); this one is a map lookup per key. Empty text (or only comments) gives nil.
func parseYAML(text []byte) (any, error) {
	dec := yaml.NewDecoder(strings.NewReader(string(text)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("line %d: a second YAML document (after `---`): expected one document per recipe", extra.Line)
	}
	b := treeBuilder{budget: maxYAMLNodes}
	return b.value(&doc)
}

// treeBuilder turns a yaml.Node tree into plain values, counting what it builds against budget;
// expanding holds the anchored nodes whose aliases are being expanded, to refuse a cycle.
type treeBuilder struct {
	budget    int
	expanding map[*yaml.Node]bool
}

func (b *treeBuilder) value(n *yaml.Node) (any, error) {
	b.budget--
	if b.budget < 0 {
		return nil, fmt.Errorf("line %d: more than %d values (aliases expanded): expected a recipe", n.Line, maxYAMLNodes)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return b.value(n.Content[0])
	case yaml.AliasNode:
		if b.expanding[n.Alias] {
			return nil, fmt.Errorf("line %d: alias *%s inside its own anchor's value", n.Line, n.Value)
		}
		if b.expanding == nil {
			b.expanding = map[*yaml.Node]bool{}
		}
		b.expanding[n.Alias] = true
		defer delete(b.expanding, n.Alias)
		return b.value(n.Alias)
	case yaml.SequenceNode:
		out := make([]any, len(n.Content))
		for i, item := range n.Content {
			v, err := b.value(item)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case yaml.MappingNode:
		return b.mapping(n)
	case yaml.ScalarNode:
		if v, ok := plainScalar(n); ok {
			return v, nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, err
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node kind %d", n.Line, n.Kind)
}

// mapping builds one mapping, refusing keys that are equal once lower-cased and YAML's merge key.
func (b *treeBuilder) mapping(n *yaml.Node) (any, error) {
	out := make(map[string]any, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	spelled := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		keyNode := n.Content[i]
		if keyNode.Kind == yaml.ScalarNode && keyNode.Tag == "!!merge" {
			return nil, fmt.Errorf("line %d: a YAML merge key (<<): expected plain keys (a recipe composes with base:)", keyNode.Line)
		}
		raw, err := b.value(keyNode)
		if err != nil {
			return nil, err
		}
		switch raw.(type) {
		case map[string]any, []any:
			return nil, fmt.Errorf("line %d: a mapping or list as a key: expected a name", keyNode.Line)
		}
		name := fmt.Sprint(raw)
		key := strings.ToLower(name)
		if line, dup := lines[key]; dup {
			if spelled[key] == name {
				return nil, fmt.Errorf("line %d: key %s given twice (also at line %d)", keyNode.Line, echo.Quote(name), line)
			}
			return nil, fmt.Errorf("line %d: key %s and %s (line %d) differ only in case, and keys are case-insensitive: expected one of them",
				keyNode.Line, echo.Quote(name), echo.Quote(spelled[key]), line)
		}
		lines[key], spelled[key] = keyNode.Line, name
		v, err := b.value(n.Content[i+1])
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	return out, nil
}

// plainScalar decodes the common scalars without a yaml decoder (one per scalar is most of the time
// of a large recipe): strings, and numbers in plain decimal notation. ok is false for the rest.
func plainScalar(n *yaml.Node) (v any, ok bool) {
	tag := n.ShortTag()
	if tag == "!!str" {
		return n.Value, true
	}
	if (tag != "!!int" && tag != "!!float") || strings.Trim(n.Value, "0123456789.eE+-") != "" {
		return nil, false
	}
	if tag == "!!int" {
		i, err := strconv.Atoi(n.Value)
		return i, err == nil
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	return f, err == nil
}
