//go:build cgo

package pjrtplugin

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla"
	"github.com/pkg/errors"
)

// Available says whether this build can load PJRT plugins: GoMLX's xla backend is compiled in (it
// needs cgo).
const Available = true

// noAutoInstall switches GoMLX's plugin auto-install off, once, before the first xla backend opens.
var noAutoInstall sync.Once

// Open opens GoMLX's xla backend on the plugin at pluginPath (absolute, already checked by Resolve or
// CheckPlugin) with the PJRT backend options, so go-xla never runs its own plugin search and GoMLX
// never downloads a plugin: xla.New auto-installs only for a plugin given by name (and only while auto-install is on, which it is by default unless
// GOMLX_NO_AUTO_INSTALL was set when the program started). A download is not what a user asking for
// "xla:cpu" expects, and these machines are offline.
func Open(pluginPath string, options []string) (b backends.Backend, err error) {
	if !filepath.IsAbs(pluginPath) {
		return nil, errors.Errorf("PJRT plugin %q: an absolute path is required (a name would let GoMLX search and download)", pluginPath)
	}
	noAutoInstall.Do(func() { xla.EnableAutoInstall(false) })
	options = slices.Clone(options)
	// GoMLX shares host and device buffers when the plugin is *named* "cpu"; loaded by path it isn't.
	if name := pluginName(pluginPath); name != "" && platformMatches("cpu", name) &&
		!slices.Contains(options, "noshared_buffers") && !slices.Contains(options, "shared_buffers") {
		options = append(options, "shared_buffers")
	}
	if err := setCUDAEnv(pluginPath); err != nil {
		return nil, err
	}
	config := strings.Join(append([]string{pluginPath}, options...), ",")
	defer func() {
		// go-xla dereferences nil on some load failures (e.g. GetPjrtApi returning NULL): report, don't die.
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("loading PJRT plugin %s panicked: %v", pluginPath, r)
		}
	}()
	inner, err := xla.New(config)
	if err != nil {
		return nil, err
	}
	xb, ok := inner.(*xla.Backend)
	if !ok {
		return inner, nil
	}
	return spmdBackend{xb}, nil
}
