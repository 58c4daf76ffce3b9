package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The tests of each command call it by name with the arguments that follow the command's name.

func cmdEval(args []string, stdout, stderr io.Writer) error {
	return runCommand("eval", args, stdout, stderr)
}
func cmdDevices(args []string, stdout, stderr io.Writer) error {
	return runCommand("devices", args, stdout, stderr)
}
func cmdVerify(args []string, stdout, stderr io.Writer) error {
	return runCommand("verify", args, stdout, stderr)
}
func cmdPlot(args []string, stdout, stderr io.Writer) error {
	return runCommand("plot", args, stdout, stderr)
}
func cmdData(args []string, stdout, stderr io.Writer) error {
	return runCommand("data", args, stdout, stderr)
}
func cmdBench(args []string, stdout, stderr io.Writer) error {
	return runCommand("bench", args, stdout, stderr)
}
func cmdEmit(args []string, stdout, stderr io.Writer) error {
	return runCommand("emit", args, stdout, stderr)
}
func cmdExport(args []string, stdout, stderr io.Writer) error {
	return runCommand("export", args, stdout, stderr)
}
func cmdImport(args []string, stdout, stderr io.Writer) error {
	return runCommand("import", args, stdout, stderr)
}
func cmdPredict(args []string, stdout, stderr io.Writer) error {
	return runCommand("predict", args, stdout, stderr)
}

func runCommand(name string, args []string, stdout, stderr io.Writer) error {
	return run(append([]string{name}, args...), stdout, stderr)
}

var update = flag.Bool("update", false, "rewrite README.md's Commands block from the command tree")

// readmeCommands returns README.md and the byte range of its Commands code block's body.
func readmeCommands(t *testing.T) (readme []byte, start, end int) {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := bytes.Index(readme, []byte("\n## Commands\n"))
	open := bytes.Index(readme[max(section, 0):], []byte("\n```\n"))
	if section < 0 || open < 0 {
		t.Fatal("README.md has no code block under ## Commands")
	}
	start = section + open + len("\n```\n")
	end = bytes.Index(readme[start:], []byte("```\n"))
	if end < 0 {
		t.Fatal("README.md's Commands block is not closed")
	}
	return readme, start, start + end
}

// README's Commands block is `trainer help`'s list; `go test ./cmd/trainer -run TestREADME -update`
// rewrites it after a command or flag changed.
func TestREADMECommandsAreTheHelpList(t *testing.T) {
	readme, start, end := readmeCommands(t)
	want := strings.Join(commandList(newRootCommand()), "\n") + "\n"
	if *update {
		fixed := append(append(append([]byte{}, readme[:start]...), want...), readme[end:]...)
		if err := os.WriteFile("../../README.md", fixed, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := string(readme[start:end]); got != want {
		t.Errorf("README.md's Commands block differs from the commands (go test ./cmd/trainer -run TestREADME -update):\n--- README\n%s--- commands\n%s", got, want)
	}
}

// TestHelpListsPurposesIn80Columns: `trainer help` names every command of the synopsis list with its
// one-line purpose (Short), in that order, and no line of it, of a command group's help or of a
// command's synopsis and flags is wider than 80 columns.
func TestHelpListsPurposesIn80Columns(t *testing.T) {
	root := newRootCommand()
	help, _, err := runCLI(t, "help")
	if err != nil {
		t.Fatal(err)
	}
	at := 0
	for _, line := range commandList(root) {
		words := strings.Fields(line)
		cmd, _, _ := root.Find(words[1:])
		name := strings.TrimPrefix(cmd.CommandPath(), "trainer ")
		re := regexp.MustCompile(`\n  ` + regexp.QuoteMeta(name) + ` +` + regexp.QuoteMeta(cmd.Short) + `\n`)
		loc := re.FindStringIndex(help[at:])
		if cmd.Short == "" || loc == nil {
			t.Errorf("trainer help lacks %q with its purpose %q after offset %d:\n%s", name, cmd.Short, at, help)
			continue
		}
		at += loc[1] - 1
	}
	wide := func(what, text string) {
		for _, line := range strings.Split(text, "\n") {
			if len([]rune(line)) > 80 {
				t.Errorf("%s: a line of %d columns: %q", what, len([]rune(line)), line)
			}
		}
	}
	wide("trainer help", help)
	forEachCommand(root, func(cmd *cobra.Command) {
		if !cmd.IsAvailableCommand() || !cmd.HasParent() {
			return
		}
		args := append(strings.Fields(strings.TrimPrefix(cmd.CommandPath(), "trainer ")), "--help")
		out, _, err := runCLI(t, args...)
		if err != nil {
			t.Errorf("%s --help: %v", cmd.CommandPath(), err)
			return
		}
		// A command's own description is prose; what follows it is laid out for 80 columns.
		_, rest, _ := strings.Cut(out, "\nUsage")
		wide(cmd.CommandPath()+" --help", "Usage"+rest)
	})
}

// Every flag README names exists on the command of its line.
func TestREADMEFlagsExist(t *testing.T) {
	readme, start, end := readmeCommands(t)
	root := newRootCommand()
	flagName := regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
	for _, line := range strings.Split(strings.TrimSpace(string(readme[start:end])), "\n") {
		words := strings.Fields(line)
		cmd, _, err := root.Find(words[1:])
		if err != nil || cmd == root {
			t.Errorf("%q: no such command (%v)", line, err)
			continue
		}
		for _, m := range flagName.FindAllStringSubmatch(line, -1) {
			if cmd.Flags().Lookup(m[1]) == nil {
				t.Errorf("%q: %s has no flag --%s", line, cmd.CommandPath(), m[1])
			}
		}
	}
}

// Every flag that takes a value names it (a back-quoted word in its usage), for the synopsis and --help.
func TestEveryFlagNamesItsValue(t *testing.T) {
	forEachCommand(newRootCommand(), func(cmd *cobra.Command) {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.NoOptDefVal == "" && !strings.Contains(f.Usage, "`") {
				t.Errorf("%s --%s: usage %q names no value", cmd.CommandPath(), f.Name, f.Usage)
			}
		})
	})
}

func TestHelpOfEveryCommand(t *testing.T) {
	root := newRootCommand()
	var paths [][]string
	forEachCommand(root, func(cmd *cobra.Command) {
		paths = append(paths, strings.Fields(cmd.CommandPath())[1:])
	})
	for _, path := range paths {
		for _, help := range []string{"--help", "-h"} {
			out, errOut, err := runCLI(t, append(append([]string{}, path...), help)...)
			if err != nil || errOut != "" || !strings.Contains(out, "Usage:\n  trainer ") && !strings.Contains(out, "Usage: trainer ") {
				t.Errorf("trainer %v %s: %v\nstdout:\n%s\nstderr:\n%s", path, help, err, out, errOut)
			}
		}
		out, _, err := runCLI(t, append([]string{"help"}, path...)...)
		if err != nil || !strings.Contains(out, "Usage:\n  trainer ") && !strings.Contains(out, "Usage: trainer ") {
			t.Errorf("trainer help %v: %v\n%s", path, err, out)
		}
	}
	// A command's help: its synopsis, its description and each flag spelt --name with its meaning.
	out, _, _ := runCLI(t, "run", "--help")
	for _, want := range []string{"  trainer run CONFIG [--set key=value]... [--resume | --resume-from PATH]", "Trains the net",
		"--resume-from PATH", "--no-progress ", "continue from the newest checkpoint"} {
		if !strings.Contains(out, want) {
			t.Errorf("trainer run --help lacks %q:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`(?m)^\s+-[a-z]{2,}`).MatchString(out) {
		t.Errorf("trainer run --help spells a flag with one dash:\n%s", out)
	}
	out, _, _ = runCLI(t, "data", "--help")
	for _, want := range []string{"\n  pack     Pack a dataset into shards\n", "\n  bench    Time the training input pipeline on a split\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("trainer data --help lacks %q:\n%s", want, out)
		}
	}
	top, _, err := runCLI(t, "--help")
	if help, _, _ := runCLI(t, "help"); err != nil || top != help || !strings.HasPrefix(top, rootDescription) {
		t.Errorf("trainer --help (%v) differs from trainer help or lacks the description:\n%s", err, top)
	}
}

// A refused command line gives one error line and a hint, nothing else, and the command does not run.
func TestUsageErrorsAreOneLineAndAHint(t *testing.T) {
	for _, c := range []struct {
		args           []string
		first, command string
	}{
		{[]string{"run", "../../configs/mnist_linear.yaml", "--foo"}, "run: unknown flag: --foo", "trainer run"},
		{[]string{"plot", "schedule", "--out"}, "plot schedule: flag needs an argument: --out", "trainer plot schedule"},
		{[]string{"run"}, "run: accepts 1 arg(s), received 0", "trainer run"},
		{[]string{"eval", "../../configs/mnist_linear.yaml"}, `eval: required flag(s) "checkpoint" not set`, "trainer eval"},
		{[]string{"verify", "--ops-only", "--nets-only"}, "verify: if any flags in the group [ops-only nets-only] are set", "trainer verify"},
		{[]string{"run", "x.yaml", "--resume", "--resume-from", "c"}, "run: if any flags in the group [resume resume-from]", "trainer run"},
		{[]string{"plot", "histogram"}, `plot: unknown subcommand "histogram"; expected schedule or run`, "trainer plot"},
		{[]string{"data"}, "data: expected a subcommand: pack, fetch, inspect, verify or bench", "trainer data"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "trainer"`, "trainer"},
		{[]string{"--foo"}, "unknown flag: --foo", "trainer"},
	} {
		out, errOut, err := runCLI(t, c.args...)
		if err == nil {
			t.Errorf("%v: accepted", c.args)
			continue
		}
		lines := strings.Split(err.Error(), "\n")
		hint := "see '" + c.command + " --help'"
		if len(lines) != 2 || !strings.HasPrefix(lines[0], c.first) || lines[1] != hint {
			t.Errorf("%v: error %q, want one line starting %q and then %q", c.args, err, c.first, hint)
		}
		if out != "" || errOut != "" {
			t.Errorf("%v: printed besides the error:\nstdout:\n%s\nstderr:\n%s", c.args, out, errOut)
		}
	}
	// An error of the command itself (here a missing file) is not followed by the hint.
	if _, _, err := runCLI(t, "data", "inspect", "/nonexistent"); err == nil || strings.Contains(err.Error(), "--help") {
		t.Errorf("data inspect /nonexistent: %v", err)
	}
}

func TestNoCommandListsTheCommandsAndFails(t *testing.T) {
	out, errOut, err := runCLI(t)
	help, _, _ := runCLI(t, "help")
	if err == nil || out != "" || errOut != help {
		t.Errorf("trainer with no arguments: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
}

// --set is repeatable and keeps the commas of a list value.
func TestSetKeepsCommas(t *testing.T) {
	for _, path := range [][]string{{"run"}, {"eval"}, {"emit"}, {"plot", "schedule"}} {
		cmd, _, err := newRootCommand().Find(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags([]string{"--set", "data.mean=[0.5,0.5,0.5]", "--set=steps=3"}); err != nil {
			t.Fatal(err)
		}
		got, err := cmd.Flags().GetStringArray("set")
		if err != nil || len(got) != 2 || got[0] != "data.mean=[0.5,0.5,0.5]" || got[1] != "steps=3" {
			t.Errorf("%v --set: %q, %v", path, got, err)
		}
	}
}
