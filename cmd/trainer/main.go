// Command trainer trains image-classification nets through GoMLX on the pure-Go backend or a PJRT
// plugin (CPU, GPU, TPU). Run `trainer help` for the commands.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/pjrt"
	"github.com/trainer/trainer/trainer"
)

const usage = `trainer trains image-classification nets with GoMLX.

Usage:
  trainer run CONFIG [--set key=value]... [--resume | --resume-from PATH] [--backend B] [--smoke]
  trainer eval CONFIG --checkpoint PATH [--ema] [--set key=value]... [--backend B]
  trainer nets [--json]
  trainer verify [--net NAME[,NAME]] [--ops-only | --nets-only] [--check REGEXP] [--coords N] [--backend B] [--json]
  trainer data pack SRC OUT [--resize N] [--shard-size 1GiB] [--quality 90]
  trainer data inspect FILE|DIR
  trainer data verify DIR [--decode]
  trainer data bench SPLIT [--source imagefolder|shards] [--size 224] [--batch 64] [--workers N]
  trainer emit NET|CONFIG [--batch N] [--precision bf16] [--optimizer NAME] [--replicas R] [--set k=v] --out FILE
  trainer bench CONFIG | --net NAME [--batch N] [--size S] [--steps K] [--data device|host] [--input uint8] [--backend B] [--json]
  trainer plot schedule CONFIG [--out FILE.png] | trainer plot run DIR [--out DIR]
  trainer export CONFIG_OR_NET --checkpoint CKPT --out FILE.safetensors
  trainer import NET FILE.safetensors --out CKPT
  trainer predict --net NAME --weights FILE [--classes FILE] [--size S] IMAGE...
  trainer devices [--backend B | --plugin PATH] [--json] | trainer devices --install cuda|cuda12|tpu|cpu [--run]

Backends: go (pure Go, default), xla:cpu, xla:cuda, xla:tpu, or the path of a PJRT plugin .so.
`

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "trainer:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return cmdRun(rest, stdout, stderr)
	case "eval":
		return cmdEval(rest, stdout, stderr)
	case "nets":
		return cmdNets(rest, stdout, stderr)
	case "devices":
		return cmdDevices(rest, stdout, stderr)
	case "verify":
		return cmdVerify(rest, stdout, stderr)
	case "plot":
		return cmdPlot(rest, stdout, stderr)
	case "data":
		return cmdData(rest, stdout, stderr)
	case "bench":
		return cmdBench(rest, stdout, stderr)
	case "emit":
		return cmdEmit(rest, stdout, stderr)
	case "export":
		return cmdExport(rest, stdout, stderr)
	case "import":
		return cmdImport(rest, stdout, stderr)
	case "predict":
		return cmdPredict(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// setFlags collects repeated --set key=value overrides.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

// parse parses flags anywhere among the arguments and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// loadConfig reads CONFIG with its overrides; --backend is one more override.
func loadConfig(fs *flag.FlagSet, positional []string, sets setFlags, backend string) (config.Config, error) {
	if len(positional) != 1 {
		return config.Config{}, fmt.Errorf("%s: expected one CONFIG file, got %d arguments", fs.Name(), len(positional))
	}
	if backend != "" {
		sets = append(sets, "backend="+backend)
	}
	return config.Load(positional[0], sets)
}

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sets setFlags
	fs.Var(&sets, "set", "override a config key: --set optimizer.lr=0.05 (repeatable)")
	resume := fs.Bool("resume", false, "continue from the newest checkpoint in the run directory")
	resumeFrom := fs.String("resume-from", "", "continue from this checkpoint file")
	backend := fs.String("backend", "", "backend: go, xla:cpu, xla:cuda, xla:tpu or a plugin path (overrides the config)")
	noProgress := fs.Bool("no-progress", false, "print log lines instead of redrawing a progress bar")
	cpuProfile := fs.String("cpuprofile", "", "write a pprof CPU profile of the run to this file")
	smoke := fs.Bool("smoke", false, "smoke mode: a few steps of the recipe at reduced width and resolution on generated data (docs/recipes.md)")
	positional, err := parse(fs, args)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	cfg, err := loadRunConfig(fs, positional, sets, *backend, *smoke, stdout)
	if err != nil {
		return err
	}
	stop, release := stopOnSignal(stderr)
	defer release()
	_, err = trainer.Run(cfg, trainer.RunOptions{
		Resume: *resume, ResumeFrom: *resumeFrom, Out: stdout,
		Progress: !*noProgress && isTerminal(stdout), Stop: stop,
	})
	return err
}

// stopOnSignal turns the first SIGINT/SIGTERM into a request to finish the step in flight, checkpoint
// and exit 0; a second one exits at once (checkpoint writes are atomic, so nothing is left half-written).
func stopOnSignal(stderr io.Writer) (stop <-chan struct{}, release func()) {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	requested := make(chan struct{})
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(stderr, "\n%v: finishing the current step and writing a checkpoint (again to quit at once)\n", sig)
			close(requested)
		case <-done:
			return
		}
		select {
		case <-signals:
			fmt.Fprintln(stderr, "second signal: exiting without a final checkpoint")
			os.Exit(130)
		case <-done:
		}
	}()
	return requested, func() {
		signal.Stop(signals)
		close(done)
	}
}

func cmdEval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sets setFlags
	fs.Var(&sets, "set", "override a config key (repeatable)")
	checkpoint := fs.String("checkpoint", "", "checkpoint file to evaluate (required)")
	backend := fs.String("backend", "", "backend (overrides the config)")
	ema := fs.Bool("ema", false, "score the checkpoint's EMA shadows instead of its live weights")
	positional, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *checkpoint == "" {
		return errors.New("eval: --checkpoint PATH is required")
	}
	cfg, err := loadConfig(fs, positional, sets, *backend)
	if err != nil {
		return err
	}
	res, err := trainer.Evaluate(cfg, *checkpoint, *ema)
	if err != nil {
		return err
	}
	weights := "live weights"
	if *ema {
		weights = "EMA weights"
	}
	fmt.Fprintf(stdout, "%s (%s) on %s (%s split, %d images): top-1 %.2f%%  top-5 %.2f%%  loss %.4f\n",
		*checkpoint, weights, cfg.Data.Source, "test", res.Examples, 100*res.Top1, 100*res.Top5, res.Loss)
	return nil
}

func cmdNets(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nets", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	backend, err := pjrt.Open("go")
	if err != nil {
		return err
	}
	var sums []graphs.Summary
	for _, name := range graphs.Names() {
		spec, _ := graphs.Get(name)
		sum, err := graphs.Summarize(backend, spec, graphs.Options{})
		if err != nil {
			return err
		}
		sums = append(sums, sum)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sums)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NET\tPARAMETERS\tINPUT (HxWxC)\tCLASSES\tFORWARD MFLOPs\tDESCRIPTION")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%d\t%dx%dx%d\t%d\t%.2f\t%s\n", s.Name, s.Parameters,
			s.InputShape[0], s.InputShape[1], s.InputShape[2], s.NumClasses, float64(s.ForwardFLOPs)/1e6, s.Description)
	}
	return tw.Flush()
}

func cmdDevices(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("devices", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backend := fs.String("backend", "go", "backend to describe")
	plugin := fs.String("plugin", "", "absolute path of a PJRT plugin to load (same as --backend PATH)")
	install := fs.String("install", "", "print the command that installs a PJRT plugin: cuda, cuda12, tpu or cpu")
	runInstall := fs.Bool("run", false, "with --install: run that command (a download)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *install != "" {
		return installPlugin(*install, *runInstall, stdout, stderr)
	}
	if *runInstall {
		return errors.New("devices: --run needs --install TARGET")
	}
	if *plugin != "" {
		cfg, err := pjrt.PluginBackend(*plugin)
		if err != nil {
			return err
		}
		*backend = cfg
	}
	desc, err := pjrt.Describe(*backend)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if encErr := enc.Encode(desc); encErr != nil {
			return encErr
		}
	} else {
		fmt.Fprint(stdout, desc.String())
	}
	if err != nil {
		// The description above already says why; the exit status says it failed.
		return fmt.Errorf("backend %q is not usable", desc.Config)
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal), where a redrawn bar makes sense.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// startCPUProfile starts a pprof CPU profile written to path (nothing when path is empty) and returns
// the function that stops it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
