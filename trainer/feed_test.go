package trainer

import (
	"io"
	"slices"
	"testing"

	"github.com/trainer/trainer/config"
)

// With replicas R the loop feeds R loaders in lockstep, each a share of the global batch. Joined in
// device order (joinedShards, one device) their shards must be the one-loader run's batches:
// the same losses and, through BatchNorm (global-batch statistics), augmentation, EMA and a mid-epoch
// resume, the same final state bit for bit. On R devices only the last hop differs: shard r goes to
// device r (runReplicas) and XLA's partitioner computes the same global step.
func TestReplicaFeedIsTheGlobalBatch(t *testing.T) {
	root := t.TempDir()
	imagenetteTree(t, root, 3, 8, 2) // 24 train images: 3 global batches of 8 per epoch
	runConfig := func(name string, replicas int) config.Config {
		c := deviceNormConfig(t, name, t.TempDir(), root, "false")
		c.Data.BatchSize, c.Replicas = 8, replicas
		c.Steps = 5                                             // step 5 is mid-epoch 1
		if err := c.ValidateWithDevices(replicas); err != nil { // the simulated devices
			t.Fatal(err)
		}
		return c
	}
	one, err := Run(runConfig("one", 1), RunOptions{Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	// The replicas' step is the one-device step fed the joined shards: the step for R devices needs
	// a backend with R.
	joined := func(cfg config.Config, opts RunOptions) (Result, error) {
		return runWith(t, cfg, opts, oneDeviceStep(t), nil)
	}
	for _, r := range []int{2, 4} {
		cfg := runConfig("replicas", r)
		got, err := joined(cfg, RunOptions{Out: io.Discard})
		if err != nil {
			t.Fatalf("%d replicas: %v", r, err)
		}
		if a, b := trainLosses(t, one.Dir), trainLosses(t, got.Dir); len(a) != 5 || !slices.Equal(a, b) {
			t.Errorf("%d replicas: train losses %v, one loader %v", r, b, a)
		}
		if got.Eval != one.Eval || got.EMAEval != one.EMAEval {
			t.Errorf("%d replicas: eval %+v / EMA %+v, one loader %+v / %+v", r, got.Eval, got.EMAEval, one.Eval, one.EMAEval)
		}
		sameCheckpoints(t, one.Checkpoint, got.Checkpoint, 20)
		if r == 2 {
			resumed := rerunWith(t, joined, runConfig("resumed", r), 5)
			sameCheckpoints(t, one.Checkpoint, resumed.Checkpoint, 20)
		}
	}
}
