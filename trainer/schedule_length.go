package trainer

import (
	"fmt"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/schedule"
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
	micro := loader.StepsPerEpoch()
	if micro == 0 {
		return 0, 0, fmt.Errorf("data.batch_size %d is larger than the training split", cfg.Data.BatchSize)
	}
	total, perEpoch = schedule.Length(cfg, micro)
	return total, perEpoch, cfg.CheckScheduleLength(total, perEpoch)
}
