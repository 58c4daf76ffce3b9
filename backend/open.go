package backend

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/pkg/errors"
	"github.com/trainer/trainer/backend/pjrtplugin"
	"github.com/trainer/trainer/gobackend"
)

// AcceptedForms lists the backend configurations Open accepts, for help texts and errors.
const AcceptedForms = `accepted backends:
  go | go:<options>              pure-Go backend (default; options e.g. "devices=4" for 4 in-process devices,
                                 "parallelism=2", "nofuse")
  xla:cpu | xla:cuda | xla:tpu   XLA through a PJRT plugin found in the plugin directories (xla: best of cuda, cpu)
  xla:<name>                     the PJRT plugin named pjrt_c_api_<name>_plugin.so
  /abs/path/plugin.so            that PJRT plugin file (also xla:/abs/path/plugin.so), e.g. JAX's xla_cuda_plugin.so
  any xla form may end in ",<plugin options>" (e.g. xla:cuda,tf32)`

// Spec is a parsed backend configuration.
type Spec struct {
	Config     string   // As given.
	Backend    string   // "go" or "xla".
	GoConfig   string   // simplego options ("go" only).
	Devices    int      // "go": the devices its config asks for (devices=R, else 1); 0 for xla (known when opened).
	Platform   string   // PJRT platform ("cpu", "cuda", "tpu", other plugin name); "" for the default or a path.
	PluginPath string   // Absolute plugin path, when given.
	Options    []string // PJRT backend options after the first ",".
	// DevicesGiven says a "go" config names its devices (devices=R); without, a data-parallel run opens
	// it with as many devices as replicas (ForReplicas).
	DevicesGiven bool
}

var rePlatform = regexp.MustCompile(`^[a-z][a-z0-9_.-]*$`)

// ParseConfig parses a backend configuration (see AcceptedForms).
func ParseConfig(config string) (Spec, error) {
	spec := Spec{Config: config}
	c := strings.TrimSpace(config)
	switch {
	case c == "" || c == "go":
		spec.Backend, spec.Devices = "go", 1
		return spec, nil
	case strings.HasPrefix(c, "go:"):
		spec.Backend = "go"
		spec.GoConfig = strings.TrimPrefix(c, "go:")
		var err error
		if spec.Devices, err = gobackend.Devices(spec.GoConfig); err != nil {
			return spec, errors.WithMessagef(err, "backend %q", config)
		}
		for _, o := range strings.Split(spec.GoConfig, ",") {
			spec.DevicesGiven = spec.DevicesGiven || strings.HasPrefix(strings.TrimSpace(o), "devices=")
		}
		return spec, nil
	case filepath.IsAbs(c):
		c = "xla:" + c
	case c == "xla":
		c = "xla:"
	}
	rest, ok := strings.CutPrefix(c, "xla:")
	if !ok {
		return spec, errors.Errorf("unknown backend %q\n%s", config, AcceptedForms)
	}
	spec.Backend = "xla"
	parts := strings.Split(rest, ",")
	target := strings.TrimSpace(parts[0])
	for _, o := range parts[1:] {
		if o = strings.TrimSpace(o); o != "" {
			spec.Options = append(spec.Options, o)
		}
	}
	switch {
	case target == "":
	case filepath.IsAbs(target):
		spec.PluginPath = filepath.Clean(target)
	case rePlatform.MatchString(target):
		spec.Platform = target
		if target == "gpu" {
			spec.Platform = "cuda"
		}
	default:
		return spec, errors.Errorf("unknown backend %q: %q is neither a plugin name nor an absolute path\n%s", config, target, AcceptedForms)
	}
	return spec, nil
}

// ForReplicas is the backend config a run over replicas devices opens: the pure-Go backend, when its
// config names no device count, gets devices=replicas (in-process devices sharing the cores); every
// other config is returned as it is (an XLA backend has the devices its plugin sees, and CheckDevices
// refuses too few).
func ForReplicas(config string, replicas int) (string, error) {
	spec, err := ParseConfig(config)
	if err != nil || replicas <= 1 || spec.Backend != "go" || spec.DevicesGiven {
		return config, err
	}
	options := fmt.Sprintf("devices=%d", replicas)
	if spec.GoConfig != "" {
		options = spec.GoConfig + "," + options
	}
	return "go:" + options, nil
}

// Open opens the backend named by config (see AcceptedForms). For PJRT backends, the plugin is found and
// checked here first: when there is none, the error lists every directory searched and how to install one.
func Open(config string) (backends.Backend, error) {
	b, _, err := open(config)
	return b, err
}

// openResult holds what open learned on the way, for Describe.
type openResult struct {
	spec   Spec
	search *pjrtplugin.PluginSearch
	plugin string
}

func open(config string) (backends.Backend, openResult, error) {
	var r openResult
	spec, err := ParseConfig(config)
	r.spec = spec
	if err != nil {
		return nil, r, err
	}
	if spec.Backend == "go" {
		b, err := gobackend.New(spec.GoConfig)
		return b, r, err
	}
	// Search even without cgo, so that `trainer devices` still lists what it found.
	r.plugin, r.search, err = pjrtplugin.Resolve(spec.PluginPath, spec.Platform)
	if !pjrtplugin.Available {
		return nil, r, errors.Errorf("backend %q: this program was built without cgo, and the xla backend (PJRT plugins) "+
			"needs it: rebuild with CGO_ENABLED=1, or use --backend go", config)
	}
	if err != nil {
		return nil, r, err
	}
	b, err := pjrtplugin.Open(r.plugin, spec.Options)
	if err != nil {
		return nil, r, errors.WithMessagef(err, "backend %q (plugin %s)", config, r.plugin)
	}
	return b, r, nil
}

// Description describes a backend configuration, for `trainer devices`.
type Description struct {
	Config      string              `json:"config"`                 // As given.
	Backend     string              `json:"backend"`                // "go" or "xla".
	Name        string              `json:"name,omitempty"`         // The backend's Name().
	Text        string              `json:"description,omitempty"`  // The backend's Description().
	NumDevices  int                 `json:"num_devices"`            // Devices the backend can use.
	Devices     []string            `json:"devices,omitempty"`      // Description of each device.
	PluginPath  string              `json:"plugin,omitempty"`       // PJRT: the plugin used.
	SearchDirs  []string            `json:"search_dirs,omitempty"`  // PJRT: directories searched (empty when a path was given).
	SearchEnv   bool                `json:"search_env,omitempty"`   // PJRT: SearchDirs came from PJRT_PLUGIN_LIBRARY_PATH.
	PythonDirs  []string            `json:"python_dirs,omitempty"`  // PJRT: Python package directories searched for wheel plugins.
	PluginFiles []pjrtplugin.Plugin `json:"plugin_files,omitempty"` // PJRT: plugin files found.
	Err         error               `json:"-"`                      // Why the backend couldn't be opened (Describe also returns it).
	Error       string              `json:"error,omitempty"`        // Err's text, for JSON.
}

// Describe opens the backend named by config, describes it and its devices, and finalizes it. On failure
// the returned Description still holds what was learned (for PJRT, the directories searched and the
// plugins found) and Err.
func Describe(config string) (Description, error) {
	b, r, err := open(config)
	d := Description{Config: config, Backend: r.spec.Backend, PluginPath: r.plugin, Err: err}
	if err != nil {
		d.Error = err.Error()
	}
	if r.search != nil {
		d.SearchDirs, d.SearchEnv, d.PluginFiles = r.search.Dirs, r.search.FromEnv, r.search.Plugins
		d.PythonDirs = r.search.PythonDirs
	}
	if err != nil {
		return d, err
	}
	defer b.Finalize()
	d.Name, d.Text, d.NumDevices = b.Name(), b.Description(), b.NumDevices()
	for i := range d.NumDevices {
		d.Devices = append(d.Devices, b.DeviceDescription(backends.DeviceNum(i)))
	}
	return d, nil
}

// String renders the description as text.
func (d Description) String() string {
	var b strings.Builder
	cfg := d.Config
	if cfg == "" {
		cfg = `"" (default: go)`
	}
	fmt.Fprintf(&b, "backend config: %s\n", cfg)
	if d.Backend != "" {
		fmt.Fprintf(&b, "backend:        %s\n", d.Backend)
	}
	if d.Name != "" {
		fmt.Fprintf(&b, "name:           %s\n", d.Name)
		fmt.Fprintf(&b, "description:    %s\n", d.Text)
	}
	if d.PluginPath != "" {
		fmt.Fprintf(&b, "plugin:         %s\n", d.PluginPath)
	}
	if d.Err == nil {
		fmt.Fprintf(&b, "devices:        %d\n", d.NumDevices)
		for i, dev := range d.Devices {
			fmt.Fprintf(&b, "  #%d: %s\n", i, dev)
		}
	}
	if len(d.SearchDirs) > 0 {
		src := "defaults"
		if d.SearchEnv {
			src = pjrtplugin.PluginPathEnv
		}
		fmt.Fprintf(&b, "plugin directories searched (%s):\n", src)
		for _, dir := range d.SearchDirs {
			fmt.Fprintf(&b, "  %s\n", dir)
		}
		if len(d.PythonDirs) > 0 {
			b.WriteString("python package directories searched (jax_plugins/xla_cuda*/xla_cuda_plugin.so, libtpu/libtpu.so):\n")
			for _, dir := range d.PythonDirs {
				fmt.Fprintf(&b, "  %s\n", dir)
			}
		}
		if len(d.PluginFiles) == 0 {
			b.WriteString("plugin files found: none\n")
		} else {
			b.WriteString("plugin files found:\n")
			for _, p := range d.PluginFiles {
				fmt.Fprintf(&b, "  %s\n", p)
			}
		}
	}
	if d.Err != nil {
		msg := d.Err.Error()
		if len(d.SearchDirs) > 0 {
			// The directories are listed above: keep the error's first line and its install hint.
			first, _, _ := strings.Cut(msg, "\n")
			if i := strings.Index(msg, "To use PJRT"); i > 0 {
				first += "\n" + msg[i:]
			}
			msg = first
		}
		fmt.Fprintf(&b, "error: %s\n", msg)
	}
	return b.String()
}
