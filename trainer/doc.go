// Package trainer owns a run: the validated Config, the training loop, the optimizers and the
// learning-rate schedule, checkpoints, and the metrics log.
package trainer
