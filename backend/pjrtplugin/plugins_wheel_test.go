package pjrtplugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeVenv makes a virtualenv-like prefix holding files where the wheels put their plugins.
func fakeVenv(t *testing.T, files map[string][]byte) (prefix, site string) {
	t.Helper()
	prefix = t.TempDir()
	site = filepath.Join(prefix, "lib", "python3.12", "site-packages")
	for rel, data := range files {
		path := filepath.Join(site, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return prefix, site
}

func TestWheelPluginsAreFoundAndChecked(t *testing.T) {
	prefix, site := fakeVenv(t, map[string][]byte{
		"jax_plugins/xla_cuda13/xla_cuda_plugin.so": []byte("not a library"),
		"jax_plugins/xla_cuda12/xla_cuda_plugin.so": []byte("not a library"),
		"libtpu/libtpu.so":                          []byte("not a library"),
		"jax_plugins/other/xla_cuda_plugin.so":      []byte("not searched"),
	})
	t.Setenv("VIRTUAL_ENV", prefix)
	t.Setenv(PluginPathEnv, "")
	if err := os.Unsetenv(PluginPathEnv); err != nil {
		t.Fatal(err)
	}
	s := FindPlugins()
	if len(s.PythonDirs) == 0 || s.PythonDirs[0] != site {
		t.Fatalf("PythonDirs %v: want %s first ($VIRTUAL_ENV)", s.PythonDirs, site)
	}
	got := map[string]Plugin{}
	for _, p := range s.Plugins {
		if strings.HasPrefix(p.Path, site) {
			got[p.Name] = p
		}
	}
	if len(got) != 3 {
		t.Fatalf("wheel plugins found: %v", got)
	}
	for name, rel := range map[string]string{"cuda13": "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
		"cuda12": "jax_plugins/xla_cuda12/xla_cuda_plugin.so", "tpu": "libtpu/libtpu.so"} {
		p, ok := got[name]
		if !ok || p.Path != filepath.Join(site, rel) || p.Err == nil || !strings.Contains(p.Err.Error(), "not an ELF") {
			t.Errorf("%s: %+v", name, p)
		}
	}
	// Refused, and the error says where it looked and what it found.
	_, _, err := Resolve("", "tpu")
	if err == nil {
		t.Fatal(`Resolve("", "tpu") accepted a plugin that is not an ELF file`)
	}
	for _, want := range []string{site, filepath.Join(site, "libtpu/libtpu.so"), "not an ELF"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf(`Resolve("", "tpu"): error doesn't mention %q:\n%v`, want, err)
		}
	}

	// PJRT_PLUGIN_LIBRARY_PATH replaces every default, the wheels included.
	t.Setenv(PluginPathEnv, t.TempDir())
	s = FindPlugins()
	if len(s.PythonDirs) != 0 || len(s.Plugins) != 0 {
		t.Errorf("with %s set: %+v", PluginPathEnv, s)
	}
}

// With gcc, a libtpu.so stub exporting GetPjrtApi in the wheel's place is the plugin xla:tpu picks.
func TestWheelPluginStub(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: compiles with gcc")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	prefix, site := fakeVenv(t, nil)
	so := filepath.Join(site, "libtpu", "libtpu.so")
	src := filepath.Join(t.TempDir(), "stub.c")
	_ = os.MkdirAll(filepath.Dir(so), 0o755)
	if err := os.WriteFile(src, []byte("void *GetPjrtApi(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", so, src).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v\n%s", err, out)
	}
	t.Setenv("VIRTUAL_ENV", prefix)
	t.Setenv(PluginPathEnv, "")
	if err := os.Unsetenv(PluginPathEnv); err != nil {
		t.Fatal(err)
	}
	s := FindPlugins()
	if p, ok := s.Find("tpu"); !ok || p.Path != so {
		t.Errorf("Find(tpu) = %+v, %v; plugins %v", p, ok, s.Plugins)
	}
}

func TestInstallCommand(t *testing.T) {
	for target, want := range map[string]string{
		"cuda":   "python3 -m pip install --upgrade jax-cuda13-pjrt",
		"cuda12": "python3 -m pip install --upgrade jax-cuda12-pjrt",
		"tpu":    "python3 -m pip install --upgrade libtpu",
		"cpu":    "go run github.com/gomlx/go-xla/cmd/pjrt_installer@latest",
	} {
		argv, note, err := InstallCommand(target)
		if err != nil || ShellQuote(argv) != want || note == "" {
			t.Errorf("InstallCommand(%s) = %q, %q, %v", target, ShellQuote(argv), note, err)
		}
	}
	if _, _, err := InstallCommand("rocm"); err == nil {
		t.Error("InstallCommand(rocm) succeeded")
	}
	if got := ShellQuote([]string{"a", "b c", "it's"}); got != `a 'b c' 'it'\''s'` {
		t.Errorf("ShellQuote = %s", got)
	}
	if cfg, err := PluginBackend("/opt/x/xla_cuda_plugin.so"); err != nil || cfg != "xla:/opt/x/xla_cuda_plugin.so" {
		t.Errorf("PluginBackend = %q, %v", cfg, err)
	}
	if _, err := PluginBackend("rel/x.so"); err == nil {
		t.Error("PluginBackend accepted a relative path")
	}
}

// A virtualenv whose python3 is on $PATH, without $VIRTUAL_ENV (the GPU image's /opt/torch/.venv),
// is searched before the system's prefixes.
func TestWheelPluginsOfPythonOnPath(t *testing.T) {
	prefix, site := fakeVenv(t, map[string][]byte{"jax_plugins/xla_cuda13/xla_cuda_plugin.so": []byte("not a library")})
	if err := os.MkdirAll(filepath.Join(prefix, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prefix, "bin", "python3"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("CONDA_PREFIX", "")
	t.Setenv("PATH", filepath.Join(prefix, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	if dirs := PythonSitePackages(); len(dirs) == 0 || dirs[0] != site {
		t.Fatalf("PythonSitePackages() = %v, want %s first", dirs, site)
	}
	t.Setenv("PATH", "/usr/bin")
	for _, d := range PythonSitePackages() {
		if d == site {
			t.Errorf("%s searched with its python3 off $PATH", site)
		}
	}
}
