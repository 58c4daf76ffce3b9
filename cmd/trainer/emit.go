package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/pjrt"
	"github.com/trainer/trainer/trainstep"
)

const emitUsage = `trainer emit NET|CONFIG.yaml [--batch N] [--precision bf16] [--optimizer NAME] [--replicas R] [--set key=value]... --out step.mlir

Writes the StableHLO text of the whole train step (forward, loss, backward, optimizer, EMA, guard:
trainstep's step, as a run compiles it) without any device or PJRT plugin. NET starts from the
defaults; a CONFIG is the recipe. --batch is the global batch of one step (over all replicas).`

// cmdEmit writes the StableHLO module of a train step (docs/distributed.md).
func cmdEmit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("emit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, emitUsage); fs.PrintDefaults() }
	var sets setFlags
	fs.Var(&sets, "set", "override a config key (repeatable)")
	batch := fs.Int("batch", 0, "global batch of one step (data.batch_size); 0: the config's")
	precision := fs.String("precision", "", "float32 or bf16 (net.precision); empty: the config's")
	optimizer := fs.String("optimizer", "", "sgd, adamw, lamb or rmsprop_tf (optimizer.name); empty: the config's")
	replicas := fs.Int("replicas", 0, "data-parallel devices (replicas); 0: the config's")
	out := fs.String("out", "", "file to write the module to (required; - for stdout)")
	positional, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		fs.Usage()
		return fmt.Errorf("emit: expected one NET or CONFIG, got %d arguments", len(positional))
	}
	if *out == "" {
		return errors.New("emit: --out FILE is required")
	}
	if *batch > 0 {
		sets = append(sets, fmt.Sprintf("data.batch_size=%d", *batch))
	}
	switch *precision {
	case "":
	case "bf16", "bfloat16":
		sets = append(sets, "net.precision=bfloat16")
	case "f32", "float32":
		sets = append(sets, "net.precision=float32")
	default:
		return fmt.Errorf("emit: --precision %q, expected float32 or bf16", *precision)
	}
	if *optimizer != "" {
		sets = append(sets, "optimizer.name="+*optimizer)
	}
	if *replicas > 0 {
		sets = append(sets, fmt.Sprintf("replicas=%d", *replicas))
	}
	// The module is for an accelerator: a go backend would refuse replicas > 1 in validation.
	sets = append(sets, "backend=xla:cuda")
	cfg, err := emitConfig(positional[0], sets)
	if err != nil {
		return err
	}
	text, err := trainstep.Emit(cfg)
	if err != nil {
		return err
	}
	if *out == "-" {
		_, err = io.WriteString(stdout, text)
	} else {
		err = atomicfile.Write(*out, []byte(text))
	}
	if err != nil {
		return err
	}
	if step, err := pjrt.ParseStepIO(text); err == nil {
		fmt.Fprintf(stderr, "%s: %s step, global batch %d over %d replica(s), %s, %s\n", *out, cfg.Net.Name,
			cfg.Data.BatchSize, cfg.Replicas, cfg.Net.Precision, cfg.Optimizer.Name)
		fmt.Fprintf(stderr, "per step the host sends %d inputs, %s (batch and runtime scalars); %d variables, %s, "+
			"stay on the device (donated to the step, updated in place)\n",
			step.HostInputs, humanBytes(step.HostBytes), step.Variables, humanBytes(step.VarBytes))
	}
	return nil
}

// emitConfig is the recipe at path, or the defaults for a net name, with the overrides.
func emitConfig(netOrConfig string, sets []string) (config.Config, error) {
	if strings.HasSuffix(netOrConfig, ".yaml") || strings.HasSuffix(netOrConfig, ".yml") {
		return config.Load(netOrConfig, sets)
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
	return config.Load(f.Name(), sets)
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
