// Package graphs holds the nets as GoMLX model functions over a *context.Context, their layers,
// and the registry (name -> builder, input shape, no-weight-decay group) that the trainer and the CLI read.
package graphs
