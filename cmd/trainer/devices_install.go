package main

import (
	"fmt"
	"io"
	"os/exec"

	"github.com/trainer/trainer/pjrt"
)

// installPlugin prints the command that installs a PJRT plugin and, only when run is set, runs it.
func installPlugin(target string, run bool, stdout, stderr io.Writer) error {
	argv, note, err := pjrt.InstallCommand(target)
	if err != nil {
		return err
	}
	if !run {
		fmt.Fprintf(stdout, "%s\n# %s\n# then: trainer devices --backend xla:%s   (run it yourself, or add --run)\n",
			pjrt.ShellQuote(argv), note, platformOf(target))
		return nil
	}
	fmt.Fprintf(stderr, "running: %s\n", pjrt.ShellQuote(argv))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("devices --install %s: %s: %w", target, pjrt.ShellQuote(argv), err)
	}
	return nil
}

func platformOf(target string) string {
	switch target {
	case "cuda12", "cuda13", "gpu":
		return "cuda"
	}
	return target
}
