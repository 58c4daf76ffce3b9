package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/trainer/trainer/bestiary/spec"
)

// The command tree: every command's Use (its positional arguments) and flags are the one source of
// its synopsis line, of `trainer help`, of `trainer CMD --help` and of README's Commands block
// (TestREADMECommandsAreTheHelpList).

func init() {
	// `trainer help` lists the commands in the order they are added, most used first.
	cobra.EnableCommandSorting = false
}

const (
	rootDescription = "trainer trains image-classification nets with GoMLX."
	backendsNote    = "Backends: go (pure Go, default), xla:cpu, xla:cuda, xla:tpu, or the path of a PJRT plugin .so."
	// helpWidth is the terminal width help text is laid out for.
	helpWidth = 80
	// The annotation cobra's MarkFlagsMutuallyExclusive puts on each flag of a group: its value lists
	// the group's flag names, space-separated.
	mutuallyExclusiveAnnotation = "cobra_annotation_mutually_exclusive"
)

// run executes the command line args (without the program's name), writing to stdout and stderr.
// A command line refused before its command ran comes back as a usageError.
func run(args []string, stdout, stderr io.Writer) error {
	spec.Register() // the bestiary's layer kinds, which any recipe's or --spec file's NetSpec may use
	root := newRootCommand()
	root.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	root.SetOut(stdout)
	root.SetErr(stderr)
	started := false
	forEachCommand(root, func(cmd *cobra.Command) {
		if runE := cmd.RunE; runE != nil && !cmd.HasSubCommands() {
			cmd.RunE = func(cmd *cobra.Command, args []string) error {
				started = true
				return runE(cmd, args)
			}
		}
	})
	cmd, err := root.ExecuteC()
	if err != nil && !started {
		return usageError{cmd: cmd, err: err}
	}
	return err
}

// newRootCommand builds the whole command tree.
func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:  "trainer",
		Long: rootDescription,
		// run returns the error and main prints it once, without the usage.
		SilenceErrors:      true,
		SilenceUsage:       true,
		DisableSuggestions: true, // they would make the error several lines long
		CompletionOptions:  cobra.CompletionOptions{HiddenDefaultCmd: true},
		RunE: func(cmd *cobra.Command, _ []string) error {
			writeHelp(cmd.ErrOrStderr(), cmd)
			return errors.New("no command given")
		},
	}
	root.AddCommand(newRunCommand(), newEvalCommand(), newCompareCommand(), newNetsCommand(), newDevicesCommand(), newVerifyCommand(),
		newPlotCommand(), newDataCommand(), newBenchCommand(), newEmitCommand(), newExportCommand(),
		newImportCommand(), newPredictCommand())
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) { writeHelp(cmd.OutOrStdout(), cmd) })
	root.SetUsageFunc(func(cmd *cobra.Command) error { writeHelp(cmd.OutOrStderr(), cmd); return nil })
	forEachCommand(root, func(cmd *cobra.Command) { cmd.Flags().SortFlags = false })
	return root
}

// forEachCommand calls fn on cmd and every command under it.
func forEachCommand(cmd *cobra.Command, fn func(*cobra.Command)) {
	fn(cmd)
	for _, sub := range cmd.Commands() {
		forEachCommand(sub, fn)
	}
}

// requireSubcommand is the RunE of a command that only groups subcommands: it refuses a missing or an
// unknown one.
func requireSubcommand(cmd *cobra.Command, args []string) error {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	expected := strings.Join(names, " or ")
	if len(names) > 2 {
		expected = strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	}
	if len(args) == 0 {
		return fmt.Errorf("expected a subcommand: %s", expected)
	}
	return fmt.Errorf("unknown subcommand %q; expected %s", args[0], expected)
}

// usageError is a command line refused before its command ran: one line saying what was wrong, then
// where the command's help is.
type usageError struct {
	cmd *cobra.Command
	err error
}

func (e usageError) Error() string {
	msg := e.err.Error()
	if e.cmd.HasParent() {
		msg = strings.TrimPrefix(e.cmd.CommandPath(), e.cmd.Root().Name()+" ") + ": " + msg
	}
	return fmt.Sprintf("%s\nsee '%s --help'", msg, e.cmd.CommandPath())
}

func (e usageError) Unwrap() error { return e.err }

// commandList is the synopsis of every command under cmd (cmd's own if it has no subcommands), in the
// order they were added: `trainer help` shows it, README's Commands block is it.
func commandList(cmd *cobra.Command) []string {
	if !cmd.HasSubCommands() {
		return []string{synopsis(cmd)}
	}
	var lines []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			lines = append(lines, commandList(sub)...)
		}
	}
	return lines
}

// synopsis is cmd's usage line: its path, the positional arguments of its Use and its flags in the
// order they were declared ("[flags]" in Use marks where they go, else they follow the arguments):
// --name VALUE when required, [--name VALUE] when optional, [--name VALUE]... when repeatable, and
// [--a | --b VALUE] for flags that exclude each other. VALUE is the back-quoted word of the flag's
// usage text (pflag's convention, which its --help listing follows too).
func synopsis(cmd *cobra.Command) string {
	var flags []string
	done := map[string]bool{"help": true}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if done[f.Name] || f.Hidden {
			return
		}
		done[f.Name] = true
		if groups := f.Annotations[mutuallyExclusiveAnnotation]; len(groups) > 0 {
			var alternatives []string
			for _, name := range strings.Fields(groups[0]) {
				done[name] = true
				alternatives = append(alternatives, flagSynopsis(cmd.Flags().Lookup(name)))
			}
			flags = append(flags, "["+strings.Join(alternatives, " | ")+"]")
			return
		}
		s := flagSynopsis(f)
		if required := f.Annotations[cobra.BashCompOneRequiredFlag]; len(required) == 0 || required[0] != "true" {
			s = "[" + s + "]"
		}
		if t := f.Value.Type(); strings.HasSuffix(t, "Array") || strings.HasSuffix(t, "Slice") {
			s += "..."
		}
		flags = append(flags, s)
	})
	words := strings.Fields(cmd.Use)[1:]
	at := len(words)
	for i, w := range words {
		if w == "[flags]" {
			words = append(words[:i], words[i+1:]...)
			at = i
			break
		}
	}
	line := append([]string{cmd.CommandPath()}, words[:at]...)
	line = append(line, flags...)
	return strings.Join(append(line, words[at:]...), " ")
}

// flagSynopsis is --name, with VALUE for a flag that takes one.
func flagSynopsis(f *pflag.Flag) string {
	if f.NoOptDefVal != "" { // a bool: --name alone sets it, --name=false clears one that defaults to true
		if f.DefValue == "true" {
			return "--" + f.Name + "=false"
		}
		return "--" + f.Name
	}
	value, _ := pflag.UnquoteUsage(f)
	return "--" + f.Name + " " + value
}

// writeHelp prints cmd's description and then, for the root and a command with subcommands, each
// command's name with its one-line purpose (cobra's Short); for a command, its synopsis and its flags.
// Everything but a command's own long description fits helpWidth columns.
func writeHelp(w io.Writer, cmd *cobra.Command) {
	description := cmd.Long
	if description == "" {
		description = cmd.Short
	}
	fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(description))
	if !cmd.HasSubCommands() {
		fmt.Fprintf(w, "Usage:\n%s\n", wrapWords(synopsis(cmd), helpWidth, "  ", "      "))
		fmt.Fprintf(w, "\nFlags:\n%s", cmd.Flags().FlagUsagesWrapped(helpWidth))
		return
	}
	fmt.Fprintf(w, "Usage: %s COMMAND ...\n\nCommands:\n", cmd.CommandPath())
	writeCommandTable(w, cmd)
	if cmd.HasParent() {
		fmt.Fprintf(w, "\n'%s CMD --help' gives a subcommand's synopsis and flags.\n", cmd.CommandPath())
		return
	}
	fmt.Fprintf(w, "\n%s\n\n'%s help CMD' or '%[2]s CMD --help' gives a command's synopsis and flags;\n"+
		"'%[2]s completion bash|zsh|fish|powershell' writes a shell completion script.\n",
		wrapWords(backendsNote, helpWidth, "", ""), cmd.Name())
}

// writeCommandTable lists every command under cmd, by its path below cmd, with its Short.
func writeCommandTable(w io.Writer, cmd *cobra.Command) {
	type row struct{ name, purpose string }
	var rows []row
	width := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() {
				continue
			}
			if sub.HasSubCommands() {
				walk(sub)
				continue
			}
			name := strings.TrimPrefix(sub.CommandPath(), cmd.CommandPath()+" ")
			rows = append(rows, row{name, sub.Short})
			width = max(width, len(name))
		}
	}
	walk(cmd)
	for _, r := range rows {
		fmt.Fprintln(w, wrapWords(r.purpose, helpWidth, fmt.Sprintf("  %-*s  ", width, r.name), strings.Repeat(" ", 2+width+2)))
	}
}

// wrapWords breaks text between words so that no line is longer than width (a word longer than that
// keeps its own line): the first line starts with first, the others with rest. A bracketed group
// ("[--set key=value]...") is one word.
func wrapWords(text string, width int, first, rest string) string {
	var b strings.Builder
	line := first
	fresh := true // nothing but the indent on the line yet
	for _, word := range groupedWords(text) {
		if !fresh && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line, fresh = rest, true
		}
		if !fresh {
			line += " "
		}
		line += word
		fresh = false
	}
	b.WriteString(line)
	return b.String()
}

// groupedWords splits text at the spaces outside brackets.
func groupedWords(text string) []string {
	var words []string
	depth, start := 0, -1
	for i, r := range text {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth = max(depth-1, 0)
		case r == ' ' && depth == 0:
			if start >= 0 {
				words = append(words, text[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		words = append(words, text[start:])
	}
	return words
}
