// Package netspec reads a net written as data, a NetSpec: a YAML list of layers from a registry of
// layer kinds, with every shape inferred and checked when it loads, built from the graphs layers.
package netspec
