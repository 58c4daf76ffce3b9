package pjrtplugin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// GoMLX's xla.New searches for (and, with auto-install on, downloads) a plugin given by name: Open
// refuses anything but an absolute path, so only a plugin Resolve found and checked is ever loaded.
func TestOpenXLAOnlyByPath(t *testing.T) {
	_, err := Open("cpu", nil)
	if err == nil {
		t.Fatal(`Open("cpu") accepted a plugin name`)
	}
	if Available && !strings.Contains(err.Error(), "absolute path") {
		t.Errorf(`Open("cpu"): %v, want the absolute-path error`, err)
	}
}

func TestPluginSearchDirs(t *testing.T) {
	t.Setenv(PluginPathEnv, "/a::/b:/a")
	dirs, fromEnv := PluginSearchDirs()
	if !fromEnv || !slices.Equal(dirs, []string{"/a", "/b"}) {
		t.Errorf("with %s set: %v %v", PluginPathEnv, dirs, fromEnv)
	}
	if err := os.Unsetenv(PluginPathEnv); err != nil { // t.Setenv restores it afterwards.
		t.Fatal(err)
	}
	t.Setenv("LD_LIBRARY_PATH", "/opt/ld1:relative/dir:")
	dirs, fromEnv = PluginSearchDirs()
	home, _ := os.UserHomeDir()
	for _, want := range []string{filepath.Join(home, ".local/lib/go-xla"), "/usr/local/lib/go-xla", "/opt/ld1"} {
		if !slices.Contains(dirs, want) {
			t.Errorf("defaults %v lack %s", dirs, want)
		}
	}
	if fromEnv || slices.Contains(dirs, "relative/dir") {
		t.Errorf("defaults: %v (fromEnv %v)", dirs, fromEnv)
	}

	// ld.so.conf parsing: comments, includes (globs, relative to the file), plain directories.
	dir := t.TempDir()
	_ = os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "ld.so.conf"), []byte("# comment\ninclude conf.d/*.conf\n/lib/one  # trailing\n\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "conf.d", "x.conf"), []byte("/lib/two\n"), 0o644)
	if got := ldSoConfDirs(nil, filepath.Join(dir, "ld.so.conf"), 0); !slices.Equal(got, []string{"/lib/two", "/lib/one"}) {
		t.Errorf("ldSoConfDirs = %v", got)
	}
}

func TestPluginNames(t *testing.T) {
	for path, want := range map[string]string{
		"/x/pjrt_c_api_cpu_plugin.so":          "cpu",
		"/x/pjrt_c_api_cpu_v0.83.1_plugin.so":  "cpu_v0.83.1",
		"/x/pjrt-plugin-cuda.so":               "cuda",
		"/x/pjrt_plugin_tpu.so":                "tpu",
		"/x/xla_cuda_plugin.so":                "",
		"/x/pjrt_c_api_cpu_plugin.so.bak":      "",
		"/x/libpjrt_c_api_cpu_plugin.so.dylib": "",
	} {
		if got := pluginName(path); got != want {
			t.Errorf("pluginName(%s) = %q, want %q", path, got, want)
		}
	}
	for _, tc := range []struct {
		platform, name string
		want           bool
	}{{"cpu", "cpu", true}, {"cpu", "cpu_v0.83.1", true}, {"cuda", "cuda13", true}, {"cuda", "gpu", true}, {"cpu", "cpux", false}, {"tpu", "cpu", false}} {
		if got := platformMatches(tc.platform, tc.name); got != tc.want {
			t.Errorf("platformMatches(%q, %q) = %v", tc.platform, tc.name, got)
		}
	}
}
