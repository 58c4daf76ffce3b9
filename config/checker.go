package config

import "errors"

// How rules that config cannot judge by itself join its own: a Checker (recipe's) judges them, and
// LoadChecked attributes its errors to the file or --set that wrote each key, as it does Validate's.

// Checker judges the rules that need the world outside config: the registered nets and NetSpecs, the
// data sources and datasets, weights URLs and backend names.
type Checker interface {
	// CheckSpec checks the NetSpec of n read from the file at path, at n's image size and classes.
	CheckSpec(path string, n NetConfig) error
	// Check returns every broken rule of cfg, each made by Rules, for a backend with devices devices
	// (0: unknown).
	Check(cfg Config, devices int) []error
}

// Load is LoadChecked with config's own rules only: the schema, ranges and enums. recipe.Load adds
// the rules that need the world.
func Load(path string, overrides []string) (Config, error) { return LoadChecked(path, overrides, nil) }

// ValidateIn is ValidateWithDevices followed by world's rules (none when world is nil), joined in that
// order so that LoadChecked can attribute each.
func (c Config) ValidateIn(world Checker, devices int) error {
	err := c.ValidateWithDevices(devices)
	if world == nil {
		return err
	}
	var all []error
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		all = joined.Unwrap()
	} else if err != nil {
		all = []error{err}
	}
	return errors.Join(append(all, world.Check(c, devices)...)...)
}

// Rules collects the broken rules of a Checker, each about one key, as config's own are collected.
type Rules struct{ cs checks }

// Check records "key: message" when ok is false.
func (r *Rules) Check(ok bool, key, format string, args ...any) { r.cs.check(ok, key, format, args...) }

// OneOf records an error when value is not one of allowed, listing them.
func (r *Rules) OneOf(value, key string, allowed []string) { r.cs.oneOf(value, key, allowed) }

// Errors returns the broken rules in the order they were recorded.
func (r *Rules) Errors() []error { return r.cs }
