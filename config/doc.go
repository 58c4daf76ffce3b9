// Package config is a run's recipe: the schema of every key, its defaults, loading a YAML file with
// --set overrides, every validation rule, and the values a resolved config implies.
package config

//go:generate go run ./internal/gendocs -docs ../docs
