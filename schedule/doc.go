// Package schedule holds the host-side schedules of a run as pure functions of the config: the learning
// rate and the EMA decay at each optimizer step, and the run's length in optimizer steps.
package schedule
