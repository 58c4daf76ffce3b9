package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadRefusesDevices: a checkpoint path that is /dev/zero, or a ckpt-*.tckpt link to it (which
// --resume would pick as the newest), is refused at once as no regular file, not read until memory
// runs out.
func TestLoadRefusesDevices(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, FileName(100))
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", link} {
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "is a device") || !strings.Contains(err.Error(), p) {
			t.Errorf("Load(%s): %v; want an error naming it as a device", p, err)
		}
	}
	if _, _, err := Latest(dir); err == nil || !strings.Contains(err.Error(), "is a device") {
		t.Errorf("Latest with a ckpt link to /dev/zero: %v", err)
	}
}

// TestCheckpointNamesAreParsedStrictly: a ckpt-old.tckpt (or ckpt-1.tckpt) beside the real
// checkpoints is neither the newest for --resume nor counted by pruning, which keeps the newest real ones.
func TestCheckpointNamesAreParsedStrictly(t *testing.T) {
	dir := t.TempDir()
	ctx := contextWithVariables(t)
	odd := []string{"ckpt-old.tckpt", "ckpt-1.tckpt", "ckpt-0000000010.tckpt"}
	for _, name := range odd {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("not a checkpoint"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for step := 1; step <= 3; step++ {
		if _, err := Save(dir, ctx, testHeader(step*100), 2); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || filepath.Base(paths[0]) != FileName(200) || filepath.Base(paths[1]) != FileName(300) {
		t.Errorf("List = %v; want the checkpoints of steps 200 and 300 only", paths)
	}
	ckpt, ok, err := Latest(dir)
	if err != nil || !ok || ckpt.Header.Step != 300 {
		t.Errorf("Latest = %v, %v, %v; want step 300", ckpt, ok, err)
	}
	for _, name := range odd {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v (a file that is not a checkpoint is not pruned)", name, err)
		}
	}
}

// TestSaveFileRefusesAnotherStepsName: `trainer import --out runs/X/checkpoints/ckpt-000000100.tckpt`
// would write a step-0 checkpoint under a step-100 name, which Load then refuses: SaveFile refuses it
// and writes nothing; under its own step's name, or any other name, it writes.
func TestSaveFileRefusesAnotherStepsName(t *testing.T) {
	dir := t.TempDir()
	ctx := contextWithVariables(t)
	wrong := filepath.Join(dir, FileName(100))
	if err := SaveFile(wrong, ctx, testHeader(0)); err == nil || !strings.Contains(err.Error(), "named for step 100") {
		t.Errorf("a step-0 checkpoint named for step 100: %v", err)
	}
	if _, err := os.Stat(wrong); err == nil {
		t.Error("the misnamed checkpoint was written")
	}
	for _, name := range []string{FileName(0), "imported.tckpt"} {
		p := filepath.Join(dir, name)
		if err := SaveFile(p, ctx, testHeader(0)); err != nil {
			t.Errorf("SaveFile(%s): %v", name, err)
		} else if _, err := Load(p); err != nil {
			t.Errorf("Load(%s): %v", name, err)
		}
	}
}
