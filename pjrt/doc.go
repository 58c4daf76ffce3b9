// Package pjrt opens the compute backend named by a string ("go", "xla:cpu", "xla:cuda", "xla:tpu" or
// a PJRT plugin path), finds PJRT plugins, and lays out devices for data parallelism and StableHLO emit.
package pjrt
