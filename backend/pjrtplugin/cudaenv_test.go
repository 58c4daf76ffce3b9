package pjrtplugin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCUDADataDirFlags(t *testing.T) {
	root := t.TempDir()
	gomlxLayout := filepath.Join(root, "go-xla", "cuda", "pjrt_c_api_cuda_plugin.so")
	if err := os.MkdirAll(filepath.Join(root, "go-xla", "nvidia"), 0o755); err != nil {
		t.Fatal(err)
	}
	wheel := filepath.Join(root, "site-packages", "jax_plugins", "xla_cuda13", "xla_cuda_plugin.so")
	nvidia := filepath.Join(root, "go-xla", "nvidia")
	for _, tc := range []struct {
		plugin, flags, want string
		changed             bool
	}{
		{gomlxLayout, "", "--xla_gpu_cuda_data_dir=" + nvidia, true},
		{gomlxLayout, "--xla_gpu_autotune_level=0", "--xla_gpu_autotune_level=0 --xla_gpu_cuda_data_dir=" + nvidia, true},
		{gomlxLayout, "--xla_gpu_cuda_data_dir=/usr/local/cuda", "--xla_gpu_cuda_data_dir=/usr/local/cuda", false}, // The user's wins.
		{wheel, "", "", false}, // No nvidia/ two levels up: XLA searches on its own.
		{filepath.Join(root, "go-xla", "cpu", "pjrt_c_api_cpu_plugin.so"), "", "", false},
	} {
		got, changed := cudaDataDirFlags(tc.plugin, tc.flags)
		if got != tc.want || changed != tc.changed {
			t.Errorf("cudaDataDirFlags(%s, %q) = %q, %v; want %q, %v", tc.plugin, tc.flags, got, changed, tc.want, tc.changed)
		}
	}
}

// setCUDAEnv quiets go-xla's CUDA check for a JAX wheel's plugin and names the CUDA data folder of
// GoMLX's layout, and keeps what the user set.
func TestSetCUDAEnv(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "go-xla", "nvidia"), 0o755); err != nil {
		t.Fatal(err)
	}
	wheel := filepath.Join(root, "site-packages", "jax_plugins", "xla_cuda13", "xla_cuda_plugin.so")
	gomlxLayout := filepath.Join(root, "go-xla", "cuda", "pjrt_c_api_cuda_plugin.so")
	for _, tc := range []struct {
		plugin, checks, flags, wantChecks, wantFlags string
	}{
		{wheel, "", "", "0", ""},
		{wheel, "1", "", "1", ""}, // The user's wins.
		{gomlxLayout, "", "-v", "", "-v --xla_gpu_cuda_data_dir=" + filepath.Join(root, "go-xla", "nvidia")},
	} {
		t.Setenv("GOPJRT_CUDA_CHECKS", tc.checks)
		t.Setenv("XLA_FLAGS", tc.flags)
		if err := setCUDAEnv(tc.plugin); err != nil {
			t.Fatal(err)
		}
		if got := os.Getenv("GOPJRT_CUDA_CHECKS"); got != tc.wantChecks {
			t.Errorf("%s: GOPJRT_CUDA_CHECKS=%q, want %q", tc.plugin, got, tc.wantChecks)
		}
		if got := os.Getenv("XLA_FLAGS"); got != tc.wantFlags {
			t.Errorf("%s: XLA_FLAGS=%q, want %q", tc.plugin, got, tc.wantFlags)
		}
	}
}
