package trainstep

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs/gomlxfix"
)

// freshProcessEnv marks the child process TestNewInstallsGradients runs itself in.
const freshProcessEnv = "TRAINSTEP_TEST_FRESH_PROCESS"

// TestNewInstallsGradients: importing the step, the nets and the backends changes no GoMLX gradient,
// and New installs the project's (gomlxfix) before it builds the step's graph. It runs in a process of
// its own, since any earlier test of this binary may have installed them.
func TestNewInstallsGradients(t *testing.T) {
	if os.Getenv(freshProcessEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNewInstallsGradients$", "-test.v")
		cmd.Env = append(os.Environ(), freshProcessEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestNewInstallsGradients") {
			t.Fatalf("in a fresh process: %v\n%s", err, out)
		}
		return
	}
	if gomlxfix.Installed() {
		t.Fatal("GoMLX's gradients were replaced before anything called gomlxfix.Install: an import did it")
	}
	cfg := config.Defaults()
	cfg.Name = "install_check"
	openRegression(t, cfg) // an eval forward (which needs no gradient), then the step
	if !gomlxfix.Installed() {
		t.Fatal("trainstep.New built a step without installing the project's gradients (gomlxfix.Install)")
	}
}
