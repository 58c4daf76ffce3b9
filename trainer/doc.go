// Package trainer runs a validated config.Config: the training loop, the optimizers and the
// learning-rate schedule, checkpoints and resume, and the metrics log.
package trainer
