package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDevicesInstallAndPlugin(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := cmdDevices([]string{"--install", "cuda"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "python3 -m pip install --upgrade jax-cuda13-pjrt\n") ||
		!strings.Contains(out, "add --run") {
		t.Errorf("devices --install cuda printed:\n%s", out)
	}
	if err := cmdDevices([]string{"--install", "rocm"}, &stdout, &stderr); err == nil {
		t.Error("--install rocm succeeded")
	}
	if err := cmdDevices([]string{"--run"}, &stdout, &stderr); err == nil {
		t.Error("--run without --install succeeded")
	}
	// --plugin loads exactly that file: a fake one is refused by the ELF check, with the reason.
	fake := filepath.Join(t.TempDir(), "xla_cuda_plugin.so")
	if err := os.WriteFile(fake, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	err := cmdDevices([]string{"--plugin", fake}, &stdout, &stderr)
	if err == nil || !strings.Contains(stdout.String(), fake) ||
		!(strings.Contains(stdout.String(), "not an ELF") || strings.Contains(stdout.String(), "without cgo")) {
		t.Errorf("devices --plugin fake: %v\n%s", err, stdout.String())
	}
}
