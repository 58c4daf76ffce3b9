package backend

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/backend/pjrtplugin"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		config                              string
		backend, goConfig, platform, plugin string
		options                             []string
		devices                             int
	}{
		{config: "", backend: "go", devices: 1},
		{config: "go", backend: "go", devices: 1},
		{config: "go:parallelism=1,ops_parallel", backend: "go", goConfig: "parallelism=1,ops_parallel", devices: 1},
		{config: "go:devices=4,nofuse", backend: "go", goConfig: "devices=4,nofuse", devices: 4},
		{config: "xla", backend: "xla"},
		{config: "xla:cpu", backend: "xla", platform: "cpu"},
		{config: "xla:cuda,tf32", backend: "xla", platform: "cuda", options: []string{"tf32"}},
		{config: "xla:gpu", backend: "xla", platform: "cuda"},
		{config: "xla:tpu", backend: "xla", platform: "tpu"},
		{config: "/opt/jax/xla_cuda_plugin.so", backend: "xla", plugin: "/opt/jax/xla_cuda_plugin.so"},
		{config: "xla:/opt/jax/xla_cuda_plugin.so,shared_buffers", backend: "xla", plugin: "/opt/jax/xla_cuda_plugin.so", options: []string{"shared_buffers"}},
	} {
		s, err := ParseConfig(tc.config)
		if err != nil {
			t.Errorf("ParseConfig(%q): %v", tc.config, err)
			continue
		}
		if s.Backend != tc.backend || s.GoConfig != tc.goConfig || s.Platform != tc.platform || s.PluginPath != tc.plugin ||
			!slices.Equal(s.Options, tc.options) || s.Devices != tc.devices {
			t.Errorf("ParseConfig(%q) = %+v", tc.config, s)
		}
	}
	for _, bad := range []string{"bogus", "cuda", "xla:relative/path.so", "XLA:cpu", "go2"} {
		_, err := ParseConfig(bad)
		if err == nil || !strings.Contains(err.Error(), "accepted backends") || !strings.Contains(err.Error(), "xla:cuda") {
			t.Errorf("ParseConfig(%q): want an error listing the accepted forms, got %v", bad, err)
		}
	}
	for _, bad := range []string{"go:devices=0", "go:devices=four", "go:devices=2,ops_parallel"} {
		if _, err := ParseConfig(bad); err == nil || !strings.Contains(err.Error(), "devices=") {
			t.Errorf("ParseConfig(%q): want an error about devices=, got %v", bad, err)
		}
	}
}

// A data-parallel run opens the pure-Go backend with one device per replica unless its config names
// the devices; other backends are opened as given.
func TestForReplicas(t *testing.T) {
	for _, c := range []struct {
		config   string
		replicas int
		want     string
		given    bool
	}{
		{"go", 1, "go", false},
		{"go", 4, "go:devices=4", false},
		{"", 2, "go:devices=2", false},
		{"go:nofuse", 2, "go:nofuse,devices=2", false},
		{"go:devices=2,nofuse", 4, "go:devices=2,nofuse", true},
		{"go:devices=8", 2, "go:devices=8", true},
		{"xla:cuda", 8, "xla:cuda", false},
	} {
		got, err := ForReplicas(c.config, c.replicas)
		if err != nil || got != c.want {
			t.Errorf("ForReplicas(%q, %d) = %q, %v; want %q", c.config, c.replicas, got, err, c.want)
		}
		if spec, err := ParseConfig(c.config); err != nil || spec.DevicesGiven != c.given {
			t.Errorf("ParseConfig(%q).DevicesGiven = %v (%v), want %v", c.config, spec.DevicesGiven, err, c.given)
		}
	}
	if _, err := ForReplicas("bogus", 2); err == nil {
		t.Error("ForReplicas accepted an unknown backend")
	}
}

func TestOpenGo(t *testing.T) {
	for _, config := range []string{"", "go", "go:parallelism=1", "go:devices=2"} {
		b, err := Open(config)
		if err != nil {
			t.Fatalf("Open(%q): %v", config, err)
		}
		if b.String() != "go" {
			t.Errorf("Open(%q).String() = %q", config, b.String())
		}
		exec, err := NewExec(b, func(x *Node) *Node { return AddScalar(MulScalar(x, 2), 1) })
		if err != nil {
			t.Fatal(err)
		}
		outs, err := exec.Exec([]float64{1, 2, 3})
		if err != nil {
			t.Fatalf("%+v", err)
		}
		if got := tensors.MustCopyFlatData[float64](outs[0]); !slices.Equal(outs[0].Shape().Dimensions, []int{3}) || !slices.Equal(got, []float64{3, 5, 7}) {
			t.Errorf("Open(%q): 2x+1 of [1 2 3] = %v %v, want [3 5 7]", config, outs[0].Shape(), got)
		}
		exec.Finalize()
		b.Finalize()
	}
	if _, err := Open("bogus"); err == nil || !strings.Contains(err.Error(), "accepted backends") {
		t.Errorf(`Open("bogus"): want the list of accepted forms, got %v`, err)
	}
}

// xlaErrorMustMention checks an xla Open error: without cgo it must say so, else contain every want.
func xlaErrorMustMention(t *testing.T, config string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("Open(%q) succeeded", config)
	}
	if !pjrtplugin.Available {
		if !strings.Contains(err.Error(), "built without cgo") {
			t.Errorf("Open(%q) without cgo: %v", config, err)
		}
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open(%q): error doesn't mention %q:\n%v", config, w, err)
		}
	}
}

func TestOpenXLAWithoutPlugin(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(pjrtplugin.PluginPathEnv, dir)
	start := time.Now()
	_, err := Open("xla:cpu")
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("failing took %s", elapsed)
	}
	xlaErrorMustMention(t, "xla:cpu", err, dir, pjrtplugin.PluginPathEnv, "pjrt_c_api_cpu_plugin.so", "--backend")
	_, err = Open("xla:cuda")
	xlaErrorMustMention(t, "xla:cuda", err, dir, "xla_cuda_plugin.so")

	d, err := Describe("xla:cpu")
	if err == nil {
		t.Fatal("Describe succeeded")
	}
	if pjrtplugin.Available && (!slices.Equal(d.SearchDirs, []string{dir}) || !d.SearchEnv || !strings.Contains(d.String(), dir)) {
		t.Errorf("Describe: %+v\n%s", d, d)
	}
}

// fakePlugins writes files named like plugins that aren't: text, an ELF executable (the test binary)
// and, when found, an ELF shared library without GetPjrtApi (the test binary's dynamic loader).
func fakePlugins(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	dir := t.TempDir()
	write := func(kind, name string, data []byte) {
		path := filepath.Join(dir, kind, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files[kind] = path
	}
	write("text", "pjrt_c_api_cpu_plugin.so", []byte("not a library\n"))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	write("executable", "pjrt_c_api_cpu_plugin.so", data)
	if f, err := elf.Open(self); err == nil {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				b := make([]byte, p.Filesz)
				if _, err := p.ReadAt(b, 0); err == nil {
					if lib, err := os.ReadFile(strings.TrimRight(string(b), "\x00")); err == nil {
						write("nosymbol", "pjrt-plugin-cpu.so", lib)
					}
				}
			}
		}
		_ = f.Close()
	}
	return files
}

func TestFakePluginsAreRefused(t *testing.T) {
	for kind, path := range fakePlugins(t) {
		t.Run(kind, func(t *testing.T) {
			err := pjrtplugin.CheckPlugin(path)
			if err == nil {
				t.Fatalf("CheckPlugin accepted %s", path)
			}
			want := map[string]string{"text": "not an ELF", "executable": "not a shared library", "nosymbol": "GetPjrtApi"}[kind]
			if !strings.Contains(err.Error(), want) {
				t.Errorf("pjrtplugin.CheckPlugin(%s): %v, want mention of %q", kind, err, want)
			}
			// Found by discovery, but unusable: "xla:cpu" fails and says why.
			t.Setenv(pjrtplugin.PluginPathEnv, filepath.Dir(path))
			s := pjrtplugin.FindPlugins()
			if len(s.Plugins) != 1 || s.Plugins[0].Name != "cpu" || s.Plugins[0].Err == nil {
				t.Errorf("FindPlugins: %+v", s)
			}
			_, err = Open("xla:cpu")
			xlaErrorMustMention(t, "xla:cpu", err, path, want)
			// Given by path, it is refused before go-xla sees it (go-xla would SIGSEGV).
			_, err = Open(path)
			xlaErrorMustMention(t, path, err, want)
			_, err = Open("xla:" + path)
			xlaErrorMustMention(t, "xla:"+path, err, want)
		})
	}
}

// With gcc, build real shared libraries: one exporting GetPjrtApi (returning NULL) and one not.
func TestCheckPluginStub(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: compiles with gcc")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	build := func(name, src string) string {
		c := filepath.Join(dir, name+".c")
		so := filepath.Join(dir, "plugins", name)
		_ = os.MkdirAll(filepath.Dir(so), 0o755)
		if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", so, c).CombinedOutput(); err != nil {
			t.Skipf("gcc failed: %v\n%s", err, out)
		}
		return so
	}
	good := build("pjrt_c_api_cpu_plugin.so", "void *GetPjrtApi(void) { return 0; }\n")
	bad := build("pjrt_plugin_tpu.so", "int NotTheApi(void) { return 1; }\n")
	if err := pjrtplugin.CheckPlugin(good); err != nil {
		t.Errorf("pjrtplugin.CheckPlugin(stub with GetPjrtApi): %v", err)
	}
	if err := pjrtplugin.CheckPlugin(bad); err == nil || !strings.Contains(err.Error(), "GetPjrtApi") {
		t.Errorf("pjrtplugin.CheckPlugin(stub without GetPjrtApi): %v", err)
	}
	t.Setenv(pjrtplugin.PluginPathEnv, filepath.Dir(good))
	s := pjrtplugin.FindPlugins()
	if p, ok := s.Find("cpu"); !ok || p.Path != good {
		t.Errorf("Find(cpu) = %+v, %v in %+v", p, ok, s)
	}
	if _, ok := s.Find("tpu"); ok {
		t.Errorf("Find(tpu) found the stub without GetPjrtApi")
	}
	if !pjrtplugin.Available {
		return
	}
	// The stub passes our checks but its GetPjrtApi returns NULL, on which go-xla dereferences nil:
	// Open must return an error, not crash.
	if _, err := Open("xla:cpu"); err == nil {
		t.Errorf("Open on a stub plugin succeeded")
	} else {
		t.Logf("stub plugin refused: %v", err)
	}
}

func TestDescribeGo(t *testing.T) {
	d, err := Describe("go")
	if err != nil {
		t.Fatal(err)
	}
	if d.Backend != "go" || d.NumDevices != 1 || len(d.Devices) != 1 || !strings.Contains(d.Text, "ops_sequential") {
		t.Errorf("Describe(go) = %+v", d)
	}
	if s := d.String(); !strings.Contains(s, "devices:        1") || !strings.Contains(s, "backend:        go") {
		t.Errorf("Describe(go).String():\n%s", s)
	}
}

func TestDescribeGoDevices(t *testing.T) {
	d, err := Describe("go:devices=4")
	if err != nil {
		t.Fatal(err)
	}
	if d.NumDevices != 4 || len(d.Devices) != 4 || !strings.Contains(d.Text, "devices=4") {
		t.Errorf("Describe(go:devices=4) = %+v", d)
	}
	s := d.String()
	for _, want := range []string{"devices:        4", "#3: cpu device 3 of 4", "share this process's"} {
		if !strings.Contains(s, want) {
			t.Errorf("Describe(go:devices=4).String() lacks %q:\n%s", want, s)
		}
	}
}

func TestCheckDevicesGo(t *testing.T) {
	b, err := Open("go:devices=2")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if err := CheckDevices(b, 2); err != nil {
		t.Errorf("CheckDevices(go:devices=2, 2): %v", err)
	}
	if err := CheckDevices(b, 3); err == nil || !strings.Contains(err.Error(), "replicas 3: backend go has 2 device(s)") ||
		!strings.Contains(err.Error(), "go:devices=3") {
		t.Errorf("CheckDevices(go:devices=2, 3): %v", err)
	}
}
