package pjrtplugin

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/pkg/errors"
)

// PJRT plugin discovery, done by us before GoMLX/go-xla ever sees a plugin. The order (docs/distributed.md):
//
//  1. an explicit plugin path (--backend /path/plugin.so, xla:/path/plugin.so, or --plugin): only that file;
//  2. else the directories below, with go-xla's rules (github.com/gomlx/go-xla/pkg/pjrt,
//     dynamiclib_base.go and dynamiclib_posix.go);
//  3. then, unless PJRT_PLUGIN_LIBRARY_PATH is set, the plugins Python wheels install (PythonSitePackages):
//     jax_plugins/xla_cuda12|13/xla_cuda_plugin.so (jax-cuda12-pjrt, jax-cuda13-pjrt) and libtpu/libtpu.so.
//
// The first usable file of the asked platform wins. go-xla's rules:
//
//   - PJRT_PLUGIN_LIBRARY_PATH (a ":"-separated list) replaces the default directories, which are
//     ~/.local/lib/go-xla (and its nvidia/), ~/.local/lib/gomlx/pjrt, /usr/local/lib/go-xla (and its nvidia/),
//     /usr/local/lib/gomlx/pjrt, the absolute entries of LD_LIBRARY_PATH, and the directories listed in
//     /etc/ld.so.conf (following its includes);
//   - plugin files are named pjrt_c_api_<name>_plugin.so, pjrt-plugin-<name>.so or pjrt_plugin_<name>.so;
//   - go-xla skips CUDA plugins when no NVIDIA device is present.
//
// Why not let go-xla search: it reads PJRT_PLUGIN_LIBRARY_PATH once at program start, its errors don't say
// where it looked, and a file with a plugin's name that fails to dlopen (or lacks GetPjrtApi) crashes it
// (checkPlugin closes a nil handle). We hand GoMLX the absolute path of a plugin we checked instead.

// PluginPathEnv is the environment variable that replaces the default plugin directories.
const PluginPathEnv = "PJRT_PLUGIN_LIBRARY_PATH"

// pjrtAPISymbol is the function every PJRT plugin exports.
const pjrtAPISymbol = "GetPjrtApi"

// pluginPatterns are go-xla's file name patterns (Linux).
var pluginPatterns = []string{"pjrt-plugin-*.so", "pjrt_plugin_*.so", "pjrt_c_api_*_plugin.so"}

var pluginNameRes = []*regexp.Regexp{
	regexp.MustCompile(`^pjrt_c_api_(.+)_plugin\.so$`),
	regexp.MustCompile(`^pjrt[-_]plugin[-_](.+)\.so$`),
}

// Plugin is a PJRT plugin file found in a search directory.
type Plugin struct {
	Name string // Platform name from the file name: "cpu", "cuda", ...
	Path string
	Err  error // Why the file can't be used (not an ELF shared library, no GetPjrtApi, no GPU); nil if usable.
}

// String renders the plugin as "path [platform] usable" or "... unusable: why".
func (p Plugin) String() string {
	status := "usable"
	if p.Err != nil {
		status = "unusable: " + p.Err.Error()
	}
	return fmt.Sprintf("%s [%s] %s", p.Path, p.Name, status)
}

// MarshalJSON renders the plugin with its error as text.
func (p Plugin) MarshalJSON() ([]byte, error) {
	view := struct {
		Name  string `json:"name"`
		Path  string `json:"path"`
		Error string `json:"error,omitempty"`
	}{Name: p.Name, Path: p.Path}
	if p.Err != nil {
		view.Error = p.Err.Error()
	}
	return json.Marshal(view)
}

// PluginSearch is the result of a plugin search.
type PluginSearch struct {
	FromEnv bool     // Dirs came from PJRT_PLUGIN_LIBRARY_PATH.
	Dirs    []string // Directories searched, in order.
	// PythonDirs are the Python package directories searched after Dirs for the plugins that wheels
	// ship (not searched when PJRT_PLUGIN_LIBRARY_PATH is set).
	PythonDirs []string
	Plugins    []Plugin // Files found, in search order (the first usable one of a platform wins).
}

// PluginSearchDirs returns the directories searched for PJRT plugins, read from the environment now.
func PluginSearchDirs() (dirs []string, fromEnv bool) {
	if env, found := os.LookupEnv(PluginPathEnv); found {
		for _, d := range strings.Split(env, ":") {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
		return uniqueStrings(dirs), true
	}
	if home, err := os.UserHomeDir(); err == nil {
		goXLA := filepath.Join(home, ".local", "lib", "go-xla")
		dirs = append(dirs, goXLA, filepath.Join(goXLA, "nvidia"), filepath.Join(home, ".local", "lib", "gomlx", "pjrt"))
	}
	dirs = append(dirs, "/usr/local/lib/go-xla", "/usr/local/lib/go-xla/nvidia", "/usr/local/lib/gomlx/pjrt")
	for _, d := range strings.Split(os.Getenv("LD_LIBRARY_PATH"), ":") {
		if d != "" && filepath.IsAbs(d) {
			dirs = append(dirs, d)
		}
	}
	dirs = ldSoConfDirs(dirs, "/etc/ld.so.conf", 0)
	return uniqueStrings(dirs), false
}

// ldSoConfDirs appends the directories listed in an ld.so.conf file, following "include" globs.
func ldSoConfDirs(dirs []string, file string, depth int) []string {
	if depth > 8 {
		return dirs
	}
	f, err := os.Open(file)
	if err != nil {
		return dirs
	}
	defer func() { _ = f.Close() }()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "include"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			pattern := strings.TrimSpace(rest)
			if !filepath.IsAbs(pattern) {
				pattern = filepath.Join(filepath.Dir(file), pattern)
			}
			matches, _ := filepath.Glob(pattern)
			for _, m := range matches {
				dirs = ldSoConfDirs(dirs, m, depth+1)
			}
			continue
		}
		dirs = append(dirs, line)
	}
	return dirs
}

func uniqueStrings(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// pluginName returns the platform name encoded in a plugin file name, or "".
func pluginName(path string) string {
	base := filepath.Base(path)
	for _, re := range pluginNameRes {
		if m := re.FindStringSubmatch(base); m != nil {
			return m[1]
		}
	}
	return ""
}

// FindPlugins searches the plugin directories (read from the environment now) and checks every
// candidate file without loading it.
func FindPlugins() PluginSearch {
	var s PluginSearch
	s.Dirs, s.FromEnv = PluginSearchDirs()
	seen := map[string]bool{}
	for _, dir := range s.Dirs {
		for _, pattern := range pluginPatterns {
			matches, _ := filepath.Glob(filepath.Join(dir, pattern))
			for _, path := range matches {
				name := pluginName(path)
				if name == "" || seen[path] {
					continue
				}
				seen[path] = true
				s.Plugins = append(s.Plugins, checkedPlugin(name, path))
			}
		}
	}
	if s.FromEnv {
		return s // PJRT_PLUGIN_LIBRARY_PATH replaces every default, the Python wheels' included
	}
	s.PythonDirs = PythonSitePackages()
	for _, dir := range s.PythonDirs {
		for _, w := range wheelPlugins {
			matches, _ := filepath.Glob(filepath.Join(dir, w.pattern))
			for _, path := range matches {
				if seen[path] {
					continue
				}
				seen[path] = true
				s.Plugins = append(s.Plugins, checkedPlugin(w.name(path), path))
			}
		}
	}
	return s
}

// checkedPlugin checks a candidate file without loading it.
func checkedPlugin(name, path string) Plugin {
	p := Plugin{Name: name, Path: path, Err: CheckPlugin(path)}
	if p.Err == nil && isCUDAName(name) && !hasNVIDIADevice() {
		p.Err = errors.New("CUDA plugin, but this machine has no NVIDIA device (/dev/nvidia*)")
	}
	return p
}

// wheelPlugins are the PJRT plugins Python wheels install under site-packages: jax-cuda12-pjrt and
// jax-cuda13-pjrt (jax_plugins/xla_cuda12|13/xla_cuda_plugin.so, named cuda12/cuda13 here) and libtpu
// (libtpu/libtpu.so, named tpu).
var wheelPlugins = []struct {
	pattern string
	name    func(path string) string
}{
	{filepath.Join("jax_plugins", "xla_cuda*", "xla_cuda_plugin.so"), func(path string) string {
		return strings.TrimPrefix(filepath.Base(filepath.Dir(path)), "xla_") // xla_cuda13 -> cuda13
	}},
	{filepath.Join("libtpu", "libtpu.so"), func(string) string { return "tpu" }},
}

// PythonSitePackages returns the Python package directories searched for wheel plugins, in order:
// $VIRTUAL_ENV's and $CONDA_PREFIX's, the prefix of each python3 on $PATH (the folder above its bin/:
// an activated or PATH-placed virtualenv without $VIRTUAL_ENV, as on the GPU image we check on), then
// ~/.local (pip --user), /usr/local, /usr, /opt/conda and pyenv's versions. Only existing
// directories are returned.
func PythonSitePackages() []string {
	var prefixes []string
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := os.Getenv(env); p != "" && filepath.IsAbs(p) {
			prefixes = append(prefixes, p)
		}
	}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if !filepath.IsAbs(dir) || filepath.Base(dir) != "bin" {
			continue
		}
		if info, err := os.Stat(filepath.Join(dir, "python3")); err == nil && !info.IsDir() {
			prefixes = append(prefixes, filepath.Dir(dir))
		}
	}
	home, _ := os.UserHomeDir()
	if home != "" {
		prefixes = append(prefixes, filepath.Join(home, ".local"))
	}
	prefixes = append(prefixes, "/usr/local", "/usr", "/opt/conda")
	if home != "" {
		versions, _ := filepath.Glob(filepath.Join(home, ".pyenv", "versions", "*"))
		prefixes = append(prefixes, versions...)
	}
	var dirs []string
	for _, prefix := range prefixes {
		for _, sub := range []string{"site-packages", "dist-packages"} {
			matches, _ := filepath.Glob(filepath.Join(prefix, "lib", "python3*", sub))
			for _, m := range matches {
				if info, err := os.Stat(m); err == nil && info.IsDir() {
					dirs = append(dirs, m)
				}
			}
		}
	}
	return uniqueStrings(dirs)
}

// Find returns the first usable plugin for the platform ("cpu", "cuda", "tpu", or any plugin name).
// A plugin matches when its name is the platform or starts with it followed by "_", "-" or a digit
// ("cpu_v0.83.1", "cuda13"); "gpu" plugins also match "cuda".
func (s PluginSearch) Find(platform string) (Plugin, bool) {
	for _, p := range s.Plugins {
		if p.Err == nil && platformMatches(platform, p.Name) {
			return p, true
		}
	}
	return Plugin{}, false
}

func platformMatches(platform, name string) bool {
	if name == platform || (platform == "cuda" && name == "gpu") {
		return true
	}
	rest, ok := strings.CutPrefix(name, platform)
	if !ok || rest == "" {
		return false
	}
	return rest[0] == '_' || rest[0] == '-' || (rest[0] >= '0' && rest[0] <= '9')
}

func isCUDAName(name string) bool {
	n := strings.ToUpper(name)
	return strings.Contains(n, "CUDA") || strings.Contains(n, "NVIDIA") || n == "GPU"
}

func hasNVIDIADevice() bool {
	matches, _ := filepath.Glob("/dev/nvidia*")
	return len(matches) > 0
}

// elfMachines maps GOARCH to the ELF machine a plugin must be built for.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// CheckPlugin checks, without loading it, that path is an ELF shared library for this machine that
// defines the GetPjrtApi function every PJRT plugin exports. go-xla crashes (SIGSEGV) on a file with a
// plugin's name that fails these checks, so nothing is handed to it unchecked.
func CheckPlugin(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return errors.Wrap(err, "PJRT plugin")
	}
	if info.IsDir() {
		return errors.Errorf("PJRT plugin %s is a directory", path)
	}
	f, err := elf.Open(path)
	if err != nil {
		return errors.Errorf("PJRT plugin %s is not an ELF shared library (%v)", path, err)
	}
	defer func() { _ = f.Close() }()
	if f.Type != elf.ET_DYN {
		return errors.Errorf("PJRT plugin %s is an ELF %s, not a shared library", path, f.Type)
	}
	if want, ok := elfMachines[runtime.GOARCH]; ok && f.Machine != want {
		return errors.Errorf("PJRT plugin %s is built for %s, this program for %s (%s)", path, f.Machine, want, runtime.GOARCH)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return errors.Errorf("PJRT plugin %s has no dynamic symbol table (%v), so no %s", path, err, pjrtAPISymbol)
	}
	for _, sym := range syms {
		if sym.Name == pjrtAPISymbol && sym.Section != elf.SHN_UNDEF && elf.ST_TYPE(sym.Info) == elf.STT_FUNC {
			return nil
		}
	}
	return errors.Errorf("PJRT plugin %s does not define %s: it is not a PJRT plugin (go-xla would crash loading it)",
		path, pjrtAPISymbol)
}

// Resolve returns the absolute path of the checked plugin to load: pluginPath itself when given (no
// search), else the first usable plugin of platform ("" for GoMLX's preference: cuda, then cpu). The
// search is returned when one ran; when it found nothing usable, the error lists every directory searched
// and how to install a plugin.
func Resolve(pluginPath, platform string) (string, *PluginSearch, error) {
	if pluginPath != "" {
		if err := CheckPlugin(pluginPath); err != nil {
			return "", nil, err
		}
		return pluginPath, nil, nil
	}
	search := FindPlugins()
	platforms := []string{platform}
	if platform == "" {
		platforms = []string{"cuda", "cpu"} // GoMLX's default preference.
	}
	for _, p := range platforms {
		if found, ok := search.Find(p); ok {
			return found.Path, &search, nil
		}
	}
	want := platform
	if want == "" {
		want = "cpu"
	}
	return "", &search, search.notFoundError(want)
}

// installHint says how to get a plugin for the platform.
func installHint(platform string) string {
	var b strings.Builder
	b.WriteString("To use PJRT, either:\n")
	switch platform {
	case "cuda":
		fmt.Fprintf(&b, "  - install JAX's CUDA plugin into a Python found above (trainer devices --install cuda prints the command),\n"+
			"  - or pass the absolute path of a CUDA plugin, e.g. JAX's (pip jax-cuda12-pjrt or jax-cuda13-pjrt):\n"+
			"      --backend /path/to/jax_plugins/xla_cuda13/xla_cuda_plugin.so   (or xla:/path/to/xla_cuda_plugin.so)\n"+
			"  - or put it (or a symlink to it) named pjrt_c_api_cuda_plugin.so in a directory and set %s to it;\n", PluginPathEnv)
	case "tpu":
		fmt.Fprintf(&b, "  - pass the absolute path of libtpu.so (pip libtpu) as --backend /path/to/libtpu.so,\n"+
			"  - or link it as pjrt_c_api_tpu_plugin.so in a directory and set %s to it;\n", PluginPathEnv)
	default:
		fmt.Fprintf(&b, "  - set %s to a directory holding pjrt_c_api_%s_plugin.so (CPU builds: github.com/gomlx/pjrt-cpu-binaries;\n"+
			"    go-xla's installer puts them in ~/.local/lib/go-xla),\n"+
			"  - or pass the absolute path of a plugin, e.g. --backend /path/to/pjrt_c_api_%s_plugin.so;\n", PluginPathEnv, platform, platform)
	}
	b.WriteString("  - or use the pure-Go backend: --backend go.")
	return b.String()
}

// notFoundError is returned when no usable plugin is found for a platform.
func (s PluginSearch) notFoundError(platform string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "no usable PJRT plugin for %q (GoMLX's plugin auto-download is disabled)\n", platform)
	if s.FromEnv {
		fmt.Fprintf(&b, "searched %s=%s:\n", PluginPathEnv, os.Getenv(PluginPathEnv))
	} else {
		fmt.Fprintf(&b, "searched (%s is not set):\n", PluginPathEnv)
	}
	for _, d := range s.Dirs {
		fmt.Fprintf(&b, "  %s\n", d)
	}
	if len(s.Dirs) == 0 {
		b.WriteString("  (no directories)\n")
	}
	if len(s.PythonDirs) > 0 {
		b.WriteString("and the Python package directories (jax_plugins/xla_cuda*/, libtpu/):\n")
		for _, d := range s.PythonDirs {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	if len(s.Plugins) > 0 {
		b.WriteString("plugin files found:\n")
		for _, p := range s.Plugins {
			fmt.Fprintf(&b, "  %s\n", p)
		}
	}
	b.WriteString(installHint(platform))
	return errors.New(b.String())
}
