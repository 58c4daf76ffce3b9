package config

// Smoke mode runs any recipe for a few steps on a tiny generated ImageFolder, on the pure-Go backend,
// so that every config in configs/ can be exercised end to end (train, eval, checkpoint, resume) in
// seconds. It is a set of --set overrides applied on top of the recipe (recipe.SmokeOverrides);
// everything else (optimizer, schedule shape, EMA, loss, augmentation, net options) stays the recipe's
// own.
// docs/recipes.md lists the overrides.
const (
	SmokeWidth     = 0.0625 // net.width: 1/16 of every hidden width
	SmokeImageSize = 32     // net.image_size, for nets whose default input is larger
	SmokeBatch     = 4      // data.batch_size and data.eval_batch_size
	SmokeSteps     = 3      // optimizer steps; a checkpoint is written after SmokeCheckpointStep
	// SmokeCheckpointStep is checkpoint.every_steps: a run leaves a checkpoint mid-run to resume from.
	SmokeCheckpointStep = 2
	// SmokeMaxAccumulate caps optimizer.accumulate_steps, keeping the accumulation path but not its cost.
	SmokeMaxAccumulate = 2
)

// Smoke data: two classes, SmokeTrainPerClass and SmokeEvalPerClass images each (trainer.WriteSmokeData
// writes them); the overrides fit the schedule to that many images.
const (
	SmokeClasses       = 2
	SmokeTrainPerClass = 4
	SmokeEvalPerClass  = 3
)

// SmokeKeys are the keys recipe.SmokeOverrides may set: the documented override set (docs/recipes.md).
var SmokeKeys = []string{
	"name", "backend", "replicas", "steps", "net.width", "net.image_size", "net.num_classes", "net.pretrained",
	"net.pretrained_sha256", "data.eval_image_size",
	"data.source", "data.dir", "data.train", "data.eval", "data.batch_size", "data.eval_batch_size",
	"data.workers", "data.mean", "data.std", "optimizer.accumulate_steps",
	"schedule.warmup_epochs", "schedule.warmup_steps", "schedule.min_lr", "schedule.warmup_start_lr",
	"schedule.decay_epochs", "schedule.milestones",
	"eval.every_epochs", "checkpoint.every_steps", "checkpoint.keep", "log.every_steps",
}
