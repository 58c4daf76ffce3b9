// Package gomlxfix patches GoMLX v0.26's automatic differentiation where the nets need it, and only
// when asked: Install registers gradients for Rsqrt and AllReduce (GoMLX has none) and replaces those of
// Dot and DotGeneral (the stock ones materialise the whole broadcast product, batch×M×N×K, before
// reducing: ten times slower on the pure-Go backend) and ConvGeneral (the stock input gradient is wrong
// for even kernel sizes and builds a convolution with nil strides).
//
// No public API serves: GoMLX picks a node's gradient from graph.VJPRegistration, one map for the whole
// process, and the per-node alternative (graph.IdentityWithCustomGradient) cannot reach the Dots and
// convolutions GoMLX's own layers build. The replacements also need op parameters that *graph.Node does
// not expose, read by reflection in gomlx_internals.go, the package's one bridge into GoMLX's internals.
//
// Importing the package changes nothing. Every builder of a graph whose gradient is taken (the train
// step, the gradient checks) calls Install first, and so do the evaluator and predict, so that one
// process never mixes stock and replaced gradients; tests that build graphs call it through their
// shared test backend.
package gomlxfix
