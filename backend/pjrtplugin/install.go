package pjrtplugin

import (
	"fmt"
	"strings"

	"github.com/pkg/errors"
)

// InstallCommand returns the command that installs a PJRT plugin for target (cuda, cuda12, cuda13,
// tpu, cpu) where the search finds it, and a line saying where it lands. Nothing is downloaded here:
// `trainer devices --install T` prints it, and runs it only with --run.
func InstallCommand(target string) (argv []string, note string, err error) {
	pip := []string{"python3", "-m", "pip", "install", "--upgrade"}
	switch strings.ToLower(target) {
	case "cuda", "cuda13", "gpu":
		return append(pip, "jax-cuda13-pjrt"), "installs jax_plugins/xla_cuda13/xla_cuda_plugin.so (CUDA 13) into that " +
			"Python's site-packages, which the plugin search covers (use --install cuda12 for a CUDA 12 driver)", nil
	case "cuda12":
		return append(pip, "jax-cuda12-pjrt"), "installs jax_plugins/xla_cuda12/xla_cuda_plugin.so (CUDA 12) into that " +
			"Python's site-packages, which the plugin search covers", nil
	case "tpu":
		return append(pip, "libtpu"), "installs libtpu/libtpu.so into that Python's site-packages, which the plugin search covers", nil
	case "cpu":
		return []string{"go", "run", "github.com/gomlx/go-xla/cmd/pjrt_installer@latest"},
			"go-xla's installer: puts pjrt_c_api_cpu_plugin.so in ~/.local/lib/go-xla (searched by default)", nil
	}
	return nil, "", errors.Errorf("--install %q: expected cuda (= cuda13), cuda12, tpu or cpu", target)
}

// ShellQuote renders argv as a shell command line.
func ShellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// PluginBackend turns --plugin PATH into the backend configuration that loads exactly that file.
func PluginBackend(path string, options ...string) (string, error) {
	if path == "" {
		return "", errors.New("--plugin: empty path")
	}
	if !strings.HasPrefix(path, "/") {
		return "", errors.Errorf("--plugin %q: expected an absolute path", path)
	}
	return fmt.Sprintf("xla:%s", strings.Join(append([]string{path}, options...), ",")), nil
}
