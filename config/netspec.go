package config

import (
	"fmt"
	"path/filepath"

	"github.com/trainer/trainer/internal/bounded"
)

// A net is a registered one (net.name) or a NetSpec (net.spec, or net.spec_file read into it): the
// rules that tie the keys together and reading the spec file (recipe.Net builds the net either one
// gives).

// SpecNetLabel names a spec net where a net's name is shown or recorded (checkpoint headers, logs).
const SpecNetLabel = "netspec"

// MaxSpecFileBytes bounds a spec file, read whole before parsing.
const MaxSpecFileBytes = 1 << 20

// HasSpec reports whether the net is a NetSpec.
func (n NetConfig) HasSpec() bool { return len(n.Spec) > 0 || n.SpecFile != "" }

// Label is the net's name as messages and checkpoint headers show it: net.name, or SpecNetLabel.
func (n NetConfig) Label() string {
	if n.HasSpec() {
		return SpecNetLabel
	}
	return n.Name
}

// resolveSpec applies the rules between net.name, net.spec and net.spec_file when a recipe loads, and
// reads the spec file into net.spec (world checks it there, so that its errors name the file).
func (n *NetConfig) resolveSpec(l *layered, top string, source func(string) string, world Checker) error {
	if !n.HasSpec() {
		return nil
	}
	if l.origin["net.name"] != "" && n.Name != "" {
		key := "net.spec"
		if n.SpecFile != "" {
			key = "net.spec_file"
		}
		return fmt.Errorf("%s: set together with %s; expected one of them (a registered net, or a spec): remove one, or set net.name to \"\"",
			source("net.name"), key)
	}
	n.Name = ""
	if n.SpecFile == "" {
		return nil
	}
	if len(n.Spec) > 0 {
		return fmt.Errorf("%s: set together with net.spec; expected one of them", source("net.spec_file"))
	}
	path, err := ExpandPath(n.SpecFile)
	if err != nil {
		return fmt.Errorf("%s: %w", source("net.spec_file"), err)
	}
	if origin := l.origin["net.spec_file"]; !filepath.IsAbs(path) && origin != setOrigin {
		if origin == "" {
			origin = top
		}
		path = filepath.Join(filepath.Dir(origin), path)
	}
	list, err := ReadSpecFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", source("net.spec_file"), err)
	}
	n.Spec, n.SpecFile = list, ""
	if world == nil {
		return nil
	}
	if err := world.CheckSpec(path, *n); err != nil {
		return fmt.Errorf("%s: %w", source("net.spec_file"), err)
	}
	return nil
}

// ReadSpecFile reads a NetSpec file: a YAML list of layers, keys lower-cased as a recipe's, at most
// MaxSpecFileBytes.
func ReadSpecFile(path string) ([]any, error) {
	text, err := bounded.ReadFile(path, MaxSpecFileBytes)
	if err != nil {
		return nil, err
	}
	v, err := parseYAML(text)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	list, ok := normalized(v).([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("%s: expected a YAML list of layers, `- input: {size: 28, channels: 1, classes: 10}` first (docs/nets.md#netspec)", path)
	}
	return list, nil
}
