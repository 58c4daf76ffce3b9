// Package config is a run's recipe: the schema, each key's default and meaning, loading a YAML recipe
// with its base chain and --set overrides, every validation rule, and what a resolved config implies.
package config

//go:generate go run ./internal/gendocs -docs ../docs
