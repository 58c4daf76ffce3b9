package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/trainer/trainer/backend/pjrtplugin"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/trainstep"
	"github.com/trainer/trainer/trainstep/emit"
)

const emitDescription = `Writes the StableHLO text of the whole train step (forward, loss, backward, optimizer, EMA, guard:
trainstep's step, as a run compiles it) without any device or PJRT plugin. NET starts from the
defaults; a CONFIG is the recipe. --batch is the global batch of one step (over all replicas). With
--replicas R the module is, in data_parallel.mode spmd (the default), one device's program on its
shard with its all-reduces (stablehlo.all_reduce), or in mode auto (--set data_parallel.mode=auto)
the global-batch program that XLA's partitioner splits.`

// newEmitCommand declares `trainer emit` and its flags.
func newEmitCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "emit NET|CONFIG",
		Short: "Write the StableHLO of a whole train step",
		Long:  emitDescription,
		Args:  cobra.ExactArgs(1),
	}
	var f emitFlags
	fs := cmd.Flags()
	fs.IntVar(&f.Batch, "batch", 0, "global batch `N` of one step (data.batch_size); 0: the config's")
	fs.StringVar(&f.Precision, "precision", "", "compute precision `float32|bf16` (net.precision); empty: the config's")
	fs.StringVar(&f.Optimizer, "optimizer", "", "optimizer `NAME`: sgd, adamw, lamb or rmsprop_tf (optimizer.name); empty: the config's")
	fs.IntVar(&f.Replicas, "replicas", 0, "data-parallel devices `R` (replicas); 0: the config's")
	fs.StringArrayVar(&f.Set, "set", nil, setFlagUsage)
	fs.StringVar(&f.Out, "out", "", "write the module to `FILE.mlir` (- for stdout)")
	_ = cmd.MarkFlagRequired("out")
	cmd.RunE = func(cmd *cobra.Command, positional []string) error {
		return emitMain(f, positional, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// emitFlags are `trainer emit`'s flags, one field per flag.
type emitFlags struct {
	Batch     int      // --batch
	Precision string   // --precision
	Optimizer string   // --optimizer
	Replicas  int      // --replicas
	Set       []string // --set
	Out       string   // --out
}

// emitMain writes the StableHLO module of a train step (docs/distributed.md).
func emitMain(f emitFlags, positional []string, stdout, stderr io.Writer) error {
	// The overrides below go to a copy: --set's own slice stays as parsed.
	sets := append([]string(nil), f.Set...)
	if f.Batch > 0 {
		sets = append(sets, fmt.Sprintf("data.batch_size=%d", f.Batch))
	}
	switch f.Precision {
	case "":
	case "bf16", "bfloat16":
		sets = append(sets, "net.precision=bfloat16")
	case "f32", "float32":
		sets = append(sets, "net.precision=float32")
	default:
		return fmt.Errorf("emit: --precision %q, expected float32 or bf16", f.Precision)
	}
	if f.Optimizer != "" {
		sets = append(sets, "optimizer.name="+f.Optimizer)
	}
	if f.Replicas > 0 {
		sets = append(sets, fmt.Sprintf("replicas=%d", f.Replicas))
	}
	// The module is for an accelerator (and the auto mode only exists on XLA backends).
	sets = append(sets, "backend=xla:cuda")
	cfg, err := emitConfig(positional[0], sets)
	if err != nil {
		return err
	}
	text, err := emit.TrainStep(cfg)
	if err != nil {
		return err
	}
	if f.Out == "-" {
		_, err = io.WriteString(stdout, text)
	} else {
		err = atomicfile.Write(f.Out, []byte(text))
	}
	if err != nil {
		return err
	}
	if step, err := pjrtplugin.ParseStepIO(text); err == nil {
		// The carry's inputs are the previous execution's outputs, already on the device.
		carryInputs, carryBytes := trainstep.CarryIO()
		step.HostInputs, step.HostBytes = step.HostInputs-int64(carryInputs), step.HostBytes-carryBytes
		resident := fmt.Sprintf("its loop state (%d inputs, %s) and ", carryInputs, humanBytes(carryBytes))
		fmt.Fprintf(stderr, "%s: %s step, global batch %d over %d replica(s), %s, %s\n", f.Out, cfg.Net.Label(),
			cfg.Data.BatchSize, cfg.Replicas, cfg.Net.Precision, cfg.Optimizer.Name)
		if cfg.Replicas > 1 && cfg.DataParallel.Mode == config.DataParallelSPMD {
			fmt.Fprintf(stderr, "one replica's program (spmd, %d all-reduces): per step the host sends each device %d inputs "+
				"(its shard of %d and runtime scalars), %s; %s%d variables, %s, stay on each device (the variables "+
				"donated to the step, updated in place)\n", strings.Count(text, `"stablehlo.all_reduce"`), step.HostInputs,
				cfg.ReplicaBatch(), humanBytes(step.HostBytes), resident, step.Variables, humanBytes(step.VarBytes))
			return nil
		}
		fmt.Fprintf(stderr, "per step the host sends %d inputs (batch and runtime scalars), %s; %s%d variables, %s, "+
			"stay on the device (the variables donated to the step, updated in place)\n",
			step.HostInputs, humanBytes(step.HostBytes), resident, step.Variables, humanBytes(step.VarBytes))
	}
	return nil
}

// emitConfig is the recipe at path, or the defaults for a net name, with the overrides.
func emitConfig(netOrConfig string, sets []string) (config.Config, error) {
	if strings.HasSuffix(netOrConfig, ".yaml") || strings.HasSuffix(netOrConfig, ".yml") {
		return recipe.Load(netOrConfig, sets)
	}
	f, err := os.CreateTemp("", "emit-*.yaml")
	if err != nil {
		return config.Config{}, err
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = fmt.Fprintf(f, "name: emit\nnet: {name: %q}\n", netOrConfig)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return config.Config{}, err
	}
	return recipe.Load(f.Name(), sets)
}

// humanBytes is n in binary units with the exact count: "12 KiB (12,620 bytes)".
func humanBytes(n int64) string {
	return fmt.Sprintf("%s (%s bytes)", humanize.IBytes(uint64(n)), humanize.Comma(n))
}
