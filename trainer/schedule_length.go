package trainer

import (
	"fmt"
	"os"
	"slices"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/schedule"
)

// ScheduleLength returns the run's optimizer steps and optimizer steps per epoch, and says where the
// training split's size came from. The size is trainExamples when it is > 0; else the split's own
// (its shard index, folder or file, as the loop opens it) when its path exists; else, with the data
// absent, the known size of the dataset the recipe names (data.dataset), so a schedule can be planned
// before the data is fetched.
func ScheduleLength(cfg config.Config, trainExamples int) (total int, perEpoch float64, from string, err error) {
	micro := 0
	trainPath, _ := cfg.Data.DataPaths()
	known, isKnown := data.LookupDataset(recipe.DatasetName(cfg.Data))
	_, statErr := os.Stat(trainPath)
	imageSource := !slices.Contains(data.Sources, cfg.Data.Source) // the idx sources ship or are installed
	switch {
	case trainExamples > 0:
		micro, from = trainExamples/cfg.Data.BatchSize, fmt.Sprintf("%d training examples (--train-examples)", trainExamples)
	case imageSource && (trainPath == "" || statErr != nil) && isKnown:
		micro = known.TrainExamples / cfg.Data.BatchSize
		from = fmt.Sprintf("%d training examples, %s's known size (the data is not at %q)", known.TrainExamples, known.Name, trainPath)
	case imageSource && (trainPath == "" || statErr != nil):
		return 0, 0, "", fmt.Errorf("the training split is not at %q and data.dataset names no known dataset (%v): "+
			"give its size with --train-examples N, or set data.dataset", trainPath, data.DatasetNames())
	default:
		// Counted from the split's index or files, as the loader (which drops the last partial batch)
		// would: planning a schedule opens no compute backend.
		n, err := recipe.TrainExamples(cfg)
		if err != nil {
			return 0, 0, "", err
		}
		micro = n / cfg.Data.BatchSize
		from = "the training split, " + sourceName(cfg, trainPath)
	}
	if micro == 0 {
		return 0, 0, "", fmt.Errorf("data.batch_size %d is larger than the training split (%s)", cfg.Data.BatchSize, from)
	}
	total, perEpoch, err = schedule.Length(cfg, micro)
	if err != nil {
		return 0, 0, "", err
	}
	return total, perEpoch, from, cfg.CheckScheduleLength(total, perEpoch)
}

// sourceName names where a split was read: its path, or the idx source.
func sourceName(cfg config.Config, path string) string {
	if path == "" {
		return cfg.Data.Source
	}
	return path
}
