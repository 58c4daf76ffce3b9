package pjrtplugin

import (
	"os"
	"path/filepath"
	"strings"
)

// setCUDAEnv sets, just before the plugin at pluginPath is loaded, the two variables go-xla v0.1.4
// reads when it loads a CUDA plugin; it has no option for either, only the environment. A value the
// user set is kept.
//
// GOPJRT_CUDA_CHECKS=0 for a JAX wheel's plugin: go-xla's check looks for GoMLX's install layout and,
// for a wheel, only prints a page of wrong advice (docs/distributed.md says what a wheel needs).
// XLA_FLAGS gains --xla_gpu_cuda_data_dir where go-xla would otherwise set a wrong one (cudaDataDirFlags).
func setCUDAEnv(pluginPath string) error {
	if strings.Contains(pluginPath, string(os.PathSeparator)+"jax_plugins"+string(os.PathSeparator)) && os.Getenv("GOPJRT_CUDA_CHECKS") == "" {
		if err := os.Setenv("GOPJRT_CUDA_CHECKS", "0"); err != nil {
			return err
		}
	}
	if flags, changed := cudaDataDirFlags(pluginPath, os.Getenv("XLA_FLAGS")); changed {
		return os.Setenv("XLA_FLAGS", flags)
	}
	return nil
}

// cudaDataDirFlags returns the XLA_FLAGS value to use for the CUDA plugin at pluginPath, and whether it
// differs from xlaFlags. go-xla v0.1.4, on loading a CUDA plugin that has a nvidia/ folder two levels
// up (GoMLX's install layout), sets --xla_gpu_cuda_data_dir to a path hard-coded from its author's
// machine unless XLA_FLAGS already names one; XLA then cannot find ptxas and libdevice. We name the
// folder go-xla meant to, before loading, so its code leaves XLA_FLAGS alone. JAX's wheels have no
// such folder, and XLA finds CUDA on its own there (the nvidia packages, /usr/local/cuda).
func cudaDataDirFlags(pluginPath, xlaFlags string) (string, bool) {
	if !isCUDAName(filepath.Base(pluginPath)) && !isCUDAName(filepath.Base(filepath.Dir(pluginPath))) {
		return xlaFlags, false
	}
	if strings.Contains(xlaFlags, "--xla_gpu_cuda_data_dir") {
		return xlaFlags, false
	}
	nvidia := filepath.Join(filepath.Dir(filepath.Dir(pluginPath)), "nvidia")
	if fi, err := os.Stat(nvidia); err != nil || !fi.IsDir() {
		return xlaFlags, false
	}
	return strings.TrimSpace(xlaFlags + " --xla_gpu_cuda_data_dir=" + nvidia), true
}
