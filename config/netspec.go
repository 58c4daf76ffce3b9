package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/netspec"
)

// A net is a registered one (net.name) or a NetSpec (net.spec, or net.spec_file read into it): the
// rules that tie the keys together, reading the spec file, and the graphs.Spec either one gives.

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

// Net returns the net the config trains: the registered net.name, or the spec loaded at the
// config's image size and class count.
func (n NetConfig) Net() (graphs.Spec, error) {
	if !n.HasSpec() {
		return graphs.Get(n.Name)
	}
	net, err := n.loadSpec("net.spec")
	if err != nil {
		return graphs.Spec{}, err
	}
	return net.Spec(SpecNetLabel), nil
}

// loadSpec checks the inline spec at the config's sizes; source names it in errors.
func (n NetConfig) loadSpec(source string) (*netspec.Net, error) {
	if n.SpecFile != "" {
		return nil, fmt.Errorf("net.spec_file %s was not read: load the recipe with config.Load", n.SpecFile)
	}
	return netspec.Load(source, n.Spec, netspec.Sizes{ImageSize: n.ImageSize, NumClasses: n.NumClasses})
}

// resolveSpec applies the rules between net.name, net.spec and net.spec_file when a recipe loads, and
// reads the spec file into net.spec (checking it there, so that its errors name the file).
func (n *NetConfig) resolveSpec(l *layered, top string, source func(string) string) error {
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
	if _, err := n.loadSpec(path); err != nil {
		return fmt.Errorf("%s: %w", source("net.spec_file"), err)
	}
	return nil
}

// ReadSpecFile reads a NetSpec file: a YAML list of layers, keys lower-cased as a recipe's, at most
// MaxSpecFileBytes.
func ReadSpecFile(path string) ([]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, MaxSpecFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(text) > MaxSpecFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes, the most a spec file may hold", path, MaxSpecFileBytes)
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
