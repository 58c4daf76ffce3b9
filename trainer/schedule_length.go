package trainer

import (
	"fmt"

	"github.com/trainer/trainer/config"
)

// ScheduleLength returns the run's optimizer steps and optimizer steps per epoch, from the training
// split's size as the loop sees it.
func ScheduleLength(cfg config.Config) (total int, perEpoch float64, err error) {
	s, err := newSession(cfg)
	if err != nil {
		return 0, 0, err
	}
	loader, err := s.loader("train", cfg.Data.BatchSize, true)
	if err != nil {
		return 0, 0, err
	}
	k := max(cfg.Optimizer.AccumulateSteps, 1)
	micro := loader.StepsPerEpoch()
	if micro == 0 {
		return 0, 0, fmt.Errorf("data.batch_size %d is larger than the training split", cfg.Data.BatchSize)
	}
	total = cfg.Epochs * micro / k
	if cfg.Steps > 0 {
		total = cfg.Steps
	}
	perEpoch = float64(micro) / float64(k)
	return total, perEpoch, cfg.CheckScheduleLength(total, perEpoch)
}
