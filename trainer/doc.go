// Package trainer runs a validated config.Config: the training loop, the optimizers and the
// learning-rate schedule, when to checkpoint and how to resume, and the metrics log.
package trainer
