// Package config is a run's recipe as data: the schema, each key's default and meaning, loading a YAML
// recipe with its base chain and --set overrides, the range and enum rules, and what a resolved config
// implies. It is a leaf (TestConfigIsALeaf): the rules and resolutions that need the net registry, the
// data sources, weights URLs or backends are package recipe's, which imports config.
package config

//go:generate go run ./internal/gendocs -docs ../docs
