// Package pjrt opens the compute backend named by a string ("go", "xla:cpu", "xla:cuda", "xla:tpu" or
// a PJRT plugin path), finds PJRT plugins, and completes the pure-Go backend with the ops its gradients need.
package pjrt
