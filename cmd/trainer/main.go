// Command trainer trains image-classification nets through GoMLX on the pure-Go backend or a PJRT
// plugin (CPU, GPU, TPU). Run `trainer help` for the commands.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/backend/pjrtplugin"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/netspec"
	"github.com/trainer/trainer/internal/atomicfile"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/stats"
	"github.com/trainer/trainer/trainer"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "trainer:", err)
		os.Exit(1)
	}
}

// setFlagUsage describes --set, a StringArray: repeatable, and the commas of a list value stay in it.
const setFlagUsage = "override a config key, `key=value`: --set optimizer.lr=0.05 (repeatable)"

// loadConfig reads the recipe at path with its overrides; --backend is one more override. Notes on
// what composing the recipe changed (an optimizer switch's dropped keys) go to notes when it is not nil.
func loadConfig(path string, sets []string, backend string, notes io.Writer) (config.Config, error) {
	if backend != "" {
		sets = append(sets, "backend="+backend)
	}
	cfg, lines, err := recipe.LoadNotes(path, sets)
	if err == nil && notes != nil {
		for _, n := range lines {
			fmt.Fprintln(notes, n)
		}
	}
	return cfg, err
}

// newRunCommand declares `trainer run` and its flags.
func newRunCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run CONFIG",
		Short: "Train the net of a recipe",
		Long: `Trains the net of the recipe CONFIG (docs/configs.md) and writes runs/NAME/ (runs/NAME-2, -3, ...
when that holds an earlier run): the resolved config.yaml, metrics.jsonl and checkpoints/; run.lock keeps
a second process out while it trains.
Ctrl-C or SIGTERM finishes the step in flight, writes a checkpoint, prints the command that resumes and
exits 0; a second signal exits at once. --resume continues the newest run of the name with its own
config.yaml, changed only by the --set keys given; CONFIG then only locates the run.`,
		Args: cobra.ExactArgs(1),
	}
	var f runFlags
	fs := cmd.Flags()
	fs.StringArrayVar(&f.Set, "set", nil, setFlagUsage)
	fs.BoolVar(&f.Resume, "resume", false, "continue from the newest checkpoint in the run directory, with the run's own config")
	fs.StringVar(&f.ResumeFrom, "resume-from", "", "continue from the checkpoint `PATH`")
	fs.StringVar(&f.Backend, "backend", "", "backend `B`: go, xla:cpu, xla:cuda, xla:tpu or a plugin path (overrides the config)")
	fs.BoolVar(&f.Smoke, "smoke", false, "smoke mode: a few steps of the recipe at reduced width and resolution on generated data (docs/recipes.md)")
	fs.BoolVar(&f.NoProgress, "no-progress", false, "print log lines instead of redrawing a progress bar")
	fs.StringVar(&f.CPUProfile, "cpuprofile", "", "write a pprof CPU profile of the run to the file `F`")
	fs.BoolVar(&f.Plan, "plan", false, "print the run's steps, data, checkpoints and an ETA from a few timed steps, and stop: nothing is trained or written")
	cmd.MarkFlagsMutuallyExclusive("resume", "resume-from")
	cmd.RunE = func(cmd *cobra.Command, positional []string) error {
		if f.Plan {
			if f.Resume || f.ResumeFrom != "" {
				return errors.New("run: --plan plans a new run; it does not take --resume or --resume-from")
			}
			return planMain(positional[0], cmd.OutOrStdout(), f.Set, f.Backend, f.Smoke)
		}
		return runMain(f, positional, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// runFlags are `trainer run`'s flags, one field per flag.
type runFlags struct {
	Set        []string // --set
	Resume     bool     // --resume
	ResumeFrom string   // --resume-from
	Backend    string   // --backend
	Smoke      bool     // --smoke
	NoProgress bool     // --no-progress
	CPUProfile string   // --cpuprofile
	Plan       bool     // --plan
}

// runMain is `trainer run` with its parsed flags.
func runMain(f runFlags, positional []string, stdout, stderr io.Writer) (err error) {
	profile, err := openCPUProfile(f.CPUProfile)
	if err != nil {
		return err
	}
	defer func() {
		if perr := profile.finish(); err == nil {
			err = perr
		}
	}()
	if err := profile.start(); err != nil {
		return err
	}
	cfg, err := loadRunConfig(positional[0], f.Set, f.Backend, f.Smoke, stdout)
	if err != nil {
		return err
	}
	recipeName := cfg.Name
	cfg.Name = runName(cfg, f.Resume, f.ResumeFrom, stdout)
	if f.Resume || f.ResumeFrom != "" {
		// The run continues with its own config.yaml; only the keys given here are set again.
		overrides := f.Set
		if f.Backend != "" {
			overrides = append(overrides[:len(overrides):len(overrides)], "backend="+f.Backend)
		}
		var notes []string
		if cfg, notes, err = trainer.ResumeConfig(positional[0], cfg, overrides); err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintln(stdout, n)
		}
	}
	if note := precisionNote(cfg); note != "" {
		fmt.Fprintln(stdout, note)
	}
	stop, release := stopOnSignal(stderr)
	defer release()
	_, err = trainer.Run(cfg, trainer.RunOptions{
		Resume: f.Resume, ResumeFrom: f.ResumeFrom, Out: stdout,
		Progress: !f.NoProgress && isTerminal(stdout), Stop: stop,
		ResumeCommand: resumeCommand(positional[0], runSets(f.Set, recipeName, cfg.Name), f.Backend, f.Smoke),
	})
	return err
}

// planSteps is how many optimizer steps `run --plan` times after the one that compiles.
const planSteps = 10

// planMain is `trainer run CONFIG --plan`: what the run would do and an estimate of its time, from
// planSteps steps of its real loop on its backend and data, without a run directory.
func planMain(path string, stdout io.Writer, sets []string, backend string, smoke bool) error {
	cfg, err := loadRunConfig(path, sets, backend, smoke, stdout)
	if err != nil {
		return err
	}
	name := trainer.FreshRunName(cfg.RunDir, cfg.Name)
	p, err := trainer.PlanRun(cfg, planSteps)
	if err != nil {
		return err
	}
	p.Print(stdout, cfg, filepath.Join(cfg.RunDir, name))
	return nil
}

// runName picks the run directory under cfg.RunDir: a fresh run of a name whose directory already
// holds a run gets the next numbered one (NAME-2, NAME-3, ...), so that repeating a command never
// touches an earlier run; --resume continues the newest of the name, and --resume-from the run
// whose checkpoint it names (a fresh one for a checkpoint from elsewhere, such as an import).
func runName(cfg config.Config, resume bool, resumeFrom string, stdout io.Writer) string {
	name := cfg.Name
	switch {
	case resume:
		name = trainer.NewestRunName(cfg.RunDir, cfg.Name)
		if name != cfg.Name {
			fmt.Fprintf(stdout, "resuming the newest run of %s: %s\n", cfg.Name, filepath.Join(cfg.RunDir, name))
		}
		return name
	case resumeFrom != "":
		if of, ok := trainer.RunNameOf(cfg.RunDir, cfg.Name, resumeFrom); ok {
			return of
		}
	}
	name = trainer.FreshRunName(cfg.RunDir, cfg.Name)
	if name != cfg.Name {
		fmt.Fprintf(stdout, "%s holds an earlier run; this one writes %s\n", filepath.Join(cfg.RunDir, cfg.Name),
			filepath.Join(cfg.RunDir, name))
	}
	return name
}

// runSets are the --set flags that address the run again: the given ones, plus the run's name when it
// is not the recipe's (a numbered repeat), so that the resume command continues this run even after
// newer ones of the name exist.
func runSets(sets []string, recipeName, name string) []string {
	if name == recipeName {
		return sets
	}
	return append(sets[:len(sets):len(sets)], "name="+name)
}

// selfCommand is how the user started this program, for the commands it prints: "go run ./cmd/trainer"
// under `go run` (whose binary lives in a temporary go-build directory, on no PATH), else "trainer"
// (as `go install ./cmd/trainer` puts it in $(go env GOPATH)/bin).
func selfCommand() string {
	if exe, err := os.Executable(); err == nil && isGoRunBinary(exe) {
		return "go run ./cmd/trainer"
	}
	return "trainer"
}

// isGoRunBinary reports whether exe is a binary `go run` built: GOTMPDIR/go-buildNNN/bNNN/exe/NAME.
func isGoRunBinary(exe string) bool {
	dir := filepath.Dir(exe)
	return filepath.Base(dir) == "exe" && strings.HasPrefix(filepath.Base(filepath.Dir(filepath.Dir(dir))), "go-build")
}

// precisionNote is the line `run` and `bench` print when cfg computes in bfloat16 on the pure-Go
// backend, where it costs time instead of saving it; empty otherwise.
func precisionNote(cfg config.Config) string {
	if cfg.Net.Precision != "bfloat16" {
		return ""
	}
	if spec, err := backend.ParseConfig(cfg.Backend); err != nil || spec.Backend != "go" {
		return ""
	}
	return "note: net.precision bfloat16 on the pure-Go backend runs slower than float32 (its products and " +
		"convolutions convert to float32 and back; its element-wise ops loop in bfloat16): bfloat16 pays on " +
		"XLA devices (--backend xla:cuda); on a CPU use float32"
}

// resumeCommand is the command line that continues a run started with these arguments.
func resumeCommand(path string, sets []string, backend string, smoke bool) string {
	args := []string{"run", path}
	if smoke {
		args = append(args, "--smoke")
	}
	if backend != "" {
		args = append(args, "--backend", backend)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	args = append(args, "--resume")
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return selfCommand() + " " + strings.Join(args, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain word characters.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./=:,+@%", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// stopOnSignal turns the first SIGINT/SIGTERM into a request to dispatch no further step, let the
// ones dispatched finish (the progress line, redrawn when the loop reads results back, may show an
// earlier step than the one reached), checkpoint and exit 0; a second one exits at once (checkpoint writes are atomic, so nothing is left half-written).
func stopOnSignal(stderr io.Writer) (stop <-chan struct{}, release func()) {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	requested := make(chan struct{})
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-signals:
			fmt.Fprintf(stderr, "\n%v: no new step starts; the steps already dispatched finish, then a checkpoint is written "+
				"(again to quit at once)\n", sig)
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

// newEvalCommand declares `trainer eval` and its flags.
func newEvalCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "eval CONFIG",
		Short: "Score a checkpoint on the test split",
		Long: `Prints the top-1 accuracy with its 95% Wilson score interval, the top-5 accuracy and the loss of a
checkpoint of the recipe CONFIG on its test split. --per-image FILE also writes each image's label and
predicted class (docs/data.md#per-image-results), which trainer compare pairs with another eval's.`,
		Args: cobra.ExactArgs(1),
	}
	var f evalFlags
	fs := cmd.Flags()
	fs.StringVar(&f.Checkpoint, "checkpoint", "", "the checkpoint `PATH` to evaluate")
	fs.BoolVar(&f.EMA, "ema", false, "score the checkpoint's EMA shadows instead of its live weights")
	fs.StringVar(&f.PerImage, "per-image", "", "write each image's label and predicted class to `FILE` (for trainer compare)")
	fs.StringArrayVar(&f.Set, "set", nil, setFlagUsage)
	fs.StringVar(&f.Backend, "backend", "", "backend `B` (overrides the config)")
	_ = cmd.MarkFlagRequired("checkpoint")
	cmd.RunE = func(cmd *cobra.Command, positional []string) error {
		return evalMain(f, positional, cmd.OutOrStdout())
	}
	return cmd
}

// evalFlags are `trainer eval`'s flags, one field per flag.
type evalFlags struct {
	Checkpoint string   // --checkpoint
	EMA        bool     // --ema
	PerImage   string   // --per-image
	Set        []string // --set
	Backend    string   // --backend
}

// evalMain is `trainer eval` with its parsed flags.
func evalMain(f evalFlags, positional []string, stdout io.Writer) error {
	cfg, err := loadConfig(positional[0], f.Set, f.Backend, nil)
	if err != nil {
		return err
	}
	res, err := trainer.Evaluate(cfg, f.Checkpoint, f.EMA, f.PerImage)
	if err != nil {
		return err
	}
	weights := "live weights"
	if f.EMA {
		weights = "EMA weights"
	}
	fmt.Fprintf(stdout, "%s (%s) on %s (%s split, %d images): top-1 %s  top-5 %.2f%%  loss %.4f\n",
		f.Checkpoint, weights, cfg.Data.Source, "test", res.Examples, stats.Interval(res.Correct, res.Examples), 100*res.Top5, res.Loss)
	if f.PerImage != "" {
		fmt.Fprintf(stdout, "per-image results: %s\n", f.PerImage)
	}
	return nil
}

// newNetsCommand declares `trainer nets` and its flag.
func newNetsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "nets",
		Short: "List the registered nets, or a NetSpec's layers",
		Long: `Lists the registered nets with their parameter count, input shape, classes and forward FLOPs (docs/nets.md).
With --spec FILE, checks the NetSpec in FILE (a YAML list of layers, docs/nets.md#netspec) and prints each
layer's output shape, parameters and multiply-accumulates per example, and the totals.`,
		Args: cobra.NoArgs,
	}
	var f netsFlags
	cmd.Flags().BoolVar(&f.JSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&f.Wide, "wide", false, "add each net's description (lines wider than 80 columns)")
	cmd.Flags().StringVar(&f.Spec, "spec", "", "print the layers of the NetSpec in `FILE` instead")
	cmd.Flags().IntVar(&f.Size, "size", 0, "with --spec: input size `S` (net.image_size; 0: the spec's input entry)")
	cmd.Flags().IntVar(&f.NumClasses, "num-classes", 0, "with --spec: number `N` of classes (net.num_classes; 0: the spec's input entry)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if f.Spec != "" {
			return netSpecMain(cmd.OutOrStdout(), f.Spec, netspec.Sizes{ImageSize: f.Size, NumClasses: f.NumClasses}, f.JSON)
		}
		if cmd.Flags().Changed("size") || cmd.Flags().Changed("num-classes") {
			return errors.New("nets: --size and --num-classes need --spec FILE")
		}
		return netsMain(f, cmd.OutOrStdout())
	}
	return cmd
}

// netsFlags are `trainer nets`'s flags, one field per flag.
type netsFlags struct {
	JSON       bool   // --json
	Wide       bool   // --wide
	Spec       string // --spec
	Size       int    // --size
	NumClasses int    // --num-classes
}

// specTable is what `trainer nets --spec FILE --json` prints.
type specTable struct {
	Spec         string     `json:"spec"`
	InputShape   [3]int     `json:"input_shape"`
	NumClasses   int        `json:"num_classes"`
	Layers       []specLine `json:"layers"`
	Parameters   int64      `json:"parameters"`
	MACs         int64      `json:"macs"`
	ForwardFLOPs int64      `json:"forward_flops"`
}

// specLine is one layer of a specTable; nested layers (a residual's body) follow their parent with
// a dotted index and Depth one more.
type specLine struct {
	Index      string `json:"index"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Output     []int  `json:"output"`
	Parameters int64  `json:"parameters"`
	MACs       int64  `json:"macs"`
	Depth      int    `json:"depth"`
}

// netSpecMain is `trainer nets --spec FILE`: the spec is checked and its shapes and counts inferred
// as a recipe's net.spec_file is (graphs/netspec), without building a graph.
func netSpecMain(stdout io.Writer, path string, sizes netspec.Sizes, asJSON bool) error {
	list, err := config.ReadSpecFile(path)
	if err != nil {
		return err
	}
	net, err := netspec.Load(path, list, sizes)
	if err != nil {
		return err
	}
	params, macs := net.Totals()
	rows := net.Rows()
	table := specTable{Spec: path, InputShape: [3]int{rows[0].Out[0], rows[0].Out[1], rows[0].Out[2]},
		NumClasses: rows[len(rows)-1].Out[0], Parameters: params, MACs: macs, ForwardFLOPs: 2 * macs}
	for _, r := range rows {
		table.Layers = append(table.Layers, specLine{Index: r.Path, Kind: r.Kind, Name: r.Scope, Output: r.Out,
			Parameters: r.Params, MACs: r.MACs, Depth: r.Depth})
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(table)
	}
	cols := []column{{"LAYER", false}, {"KIND", false}, {"NAME", false}, {"OUTPUT", false}, {"PARAMETERS", true}, {"MACs", true}}
	var cells [][]string
	for _, l := range table.Layers {
		indent := strings.Repeat("  ", l.Depth-1)
		cells = append(cells, []string{l.Index, indent + l.Kind, l.Name, netspec.ShapeString(l.Output),
			humanize.Comma(l.Parameters), humanize.Comma(l.MACs)})
	}
	writeTable(stdout, cols, cells, 0)
	fmt.Fprintf(stdout, "total: %s parameters, %s MACs (%.2f forward MFLOPs) per example\ninput %dx%dx%d, %d classes\n",
		humanize.Comma(params), humanize.Comma(macs), float64(2*macs)/1e6, table.InputShape[0], table.InputShape[1],
		table.InputShape[2], table.NumClasses)
	return nil
}

// netsMain is `trainer nets` with its parsed flags.
func netsMain(f netsFlags, stdout io.Writer) error {
	b, err := backend.Open("go")
	if err != nil {
		return err
	}
	var sums []graphs.Summary
	for _, name := range graphs.Names() {
		spec, _ := graphs.Get(name)
		sum, err := graphs.Summarize(b, spec, graphs.Options{})
		if err != nil {
			return err
		}
		sums = append(sums, sum)
	}
	if f.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(sums)
	}
	cols := []column{{"NET", false}, {"PARAMETERS", true}, {"INPUT", false}, {"CLASSES", true}, {"MFLOPs", true}}
	if f.Wide {
		cols = append(cols, column{"DESCRIPTION", false})
	}
	var rows [][]string
	for _, s := range sums {
		row := []string{s.Name, humanize.Comma(int64(s.Parameters)),
			fmt.Sprintf("%dx%dx%d", s.InputShape[0], s.InputShape[1], s.InputShape[2]),
			humanize.Comma(int64(s.NumClasses)), commaDecimal(float64(s.ForwardFLOPs) / 1e6)}
		if f.Wide {
			row = append(row, s.Description)
		}
		rows = append(rows, row)
	}
	writeTable(stdout, cols, rows, 0)
	if !f.Wide {
		fmt.Fprintln(stdout, "MFLOPs: forward, per example; --wide adds descriptions, --json has everything")
	}
	return nil
}

// commaDecimal writes x ≥ 0 with thousands separators and one decimal (two below 1: the linear net's
// 0.02 MFLOPs).
func commaDecimal(x float64) string {
	digits := 1
	if x < 1 {
		digits = 2
	}
	whole, frac, _ := strings.Cut(strconv.FormatFloat(x, 'f', digits, 64), ".")
	n, _ := strconv.ParseInt(whole, 10, 64)
	return humanize.Comma(n) + "." + frac
}

// newDevicesCommand declares `trainer devices` and its flags.
func newDevicesCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "Describe a backend and its devices",
		Long: `Says which backend would be used and its devices; for PJRT, where plugins were looked for and why
each was refused. --install prints the command that installs a plugin (it runs only with --run).`,
		Args: cobra.NoArgs,
	}
	var f devicesFlags
	fs := cmd.Flags()
	fs.StringVar(&f.Backend, "backend", "go", "backend `B` to describe")
	fs.StringVar(&f.Plugin, "plugin", "", "absolute `PATH` of a PJRT plugin to load (same as --backend PATH)")
	fs.BoolVar(&f.JSON, "json", false, "print JSON")
	fs.StringVar(&f.Install, "install", "", "print the command that installs the PJRT plugin `cuda|cuda12|tpu|cpu`")
	fs.BoolVar(&f.Run, "run", false, "with --install: run that command (a download)")
	cmd.MarkFlagsMutuallyExclusive("backend", "plugin")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return devicesMain(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
	}
	return cmd
}

// devicesFlags are `trainer devices`'s flags, one field per flag.
type devicesFlags struct {
	Backend string // --backend
	Plugin  string // --plugin
	JSON    bool   // --json
	Install string // --install
	Run     bool   // --run
}

// devicesMain is `trainer devices` with its parsed flags.
func devicesMain(f devicesFlags, stdout, stderr io.Writer) error {
	if f.Install != "" {
		return installPlugin(f.Install, f.Run, stdout, stderr)
	}
	if f.Run {
		return errors.New("devices: --run needs --install TARGET")
	}
	if f.Plugin != "" {
		cfg, err := pjrtplugin.PluginBackend(f.Plugin)
		if err != nil {
			return err
		}
		f.Backend = cfg
	}
	desc, err := backend.Describe(f.Backend)
	if f.JSON {
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

// cpuProfile is a pprof CPU profile on its way to the file --cpuprofile names. The file is written
// beside its path and renamed into place when the profile stops, so a run that dies leaves no
// truncated profile, and a path that is a device, a directory or a link is refused before any work.
type cpuProfile struct {
	f       *atomicfile.File
	path    string
	started bool
}

// openCPUProfile checks path and opens the profile's file (a nil profile, which does nothing, when
// path is empty); start begins the sampling and finish ends it.
func openCPUProfile(path string) (*cpuProfile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := atomicfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return &cpuProfile{f: f, path: path}, nil
}

func (p *cpuProfile) start() error {
	if p == nil {
		return nil
	}
	if err := pprof.StartCPUProfile(p.f); err != nil {
		return fmt.Errorf("--cpuprofile %s: %w", p.path, err)
	}
	p.started = true
	return nil
}

// finish stops the sampling and puts the profile at its path; a profile never started leaves
// nothing behind.
func (p *cpuProfile) finish() error {
	if p == nil {
		return nil
	}
	if !p.started {
		p.f.Abort()
		return nil
	}
	pprof.StopCPUProfile()
	if err := p.f.Commit(); err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	return nil
}
