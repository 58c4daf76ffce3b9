// Package trainer runs a validated config.Config from the host: the loop over the training feed and
// its hooks (the guard's policy, progress, metrics log, checkpoints, best checkpoint, eval, signal
// stop), resume, and eval; the compiled step it drives is trainstep's.
package trainer
