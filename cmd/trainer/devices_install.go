package main

import (
	"fmt"
	"io"
	"os/exec"

	"github.com/trainer/trainer/backend/pjrtplugin"
)

// installPlugin prints the command that installs a PJRT plugin and, only when run is set, runs it.
func installPlugin(target string, run bool, stdout, stderr io.Writer) error {
	argv, note, err := pjrtplugin.InstallCommand(target)
	if err != nil {
		return err
	}
	if !run {
		fmt.Fprintf(stdout, "%s\n# %s\n# then: trainer devices --backend xla:%s   (run it yourself, or add --run)\n",
			pjrtplugin.ShellQuote(argv), note, platformOf(target))
		return nil
	}
	fmt.Fprintf(stderr, "running: %s\n", pjrtplugin.ShellQuote(argv))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("devices --install %s: %s: %w", target, pjrtplugin.ShellQuote(argv), err)
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
