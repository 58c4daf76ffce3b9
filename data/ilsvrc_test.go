package data

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFindILSVRC: a folder is ImageNet's when it holds either tar; the val tar takes the given labels,
// else the first label file beside it in ILSVRCLabelFiles' order, and without any the error names
// the files it looked for.
func TestFindILSVRC(t *testing.T) {
	dir := t.TempDir()
	touch := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, ok, err := FindILSVRC(dir, ""); ok || err != nil {
		t.Fatalf("empty folder: ok %v, err %v", ok, err)
	}
	if err := os.Mkdir(filepath.Join(dir, ILSVRCValTar), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := FindILSVRC(dir, ""); ok {
		t.Error("a folder named like the val tar counted as the tar")
	}
	os.Remove(filepath.Join(dir, ILSVRCValTar))

	train := touch(ILSVRCTrainTar)
	files, ok, err := FindILSVRC(dir, "")
	if !ok || err != nil || files != (ILSVRCFiles{TrainTar: train}) {
		t.Errorf("train tar alone: %+v, ok %v, err %v", files, ok, err)
	}

	val := touch(ILSVRCValTar)
	_, ok, err = FindILSVRC(dir, "")
	if !ok || err == nil || !strings.Contains(err.Error(), ILSVRCValTar) || !strings.Contains(err.Error(), "LOC_val_solution.csv") ||
		!strings.Contains(err.Error(), dir) {
		t.Errorf("val tar without labels: ok %v, err %v", ok, err)
	}
	if got := ILSVRCValLabels(val, ""); got != "" {
		t.Errorf("val tar without labels beside it: labels %q", got)
	}

	csv := touch("LOC_val_solution.csv")
	files, _, err = FindILSVRC(dir, "")
	if err != nil || files != (ILSVRCFiles{TrainTar: train, ValTar: val, ValLabels: csv}) {
		t.Errorf("with Kaggle's labels: %+v, %v", files, err)
	}
	devkit := touch("ILSVRC2012_devkit_t12.tar.gz")
	if files, _, _ = FindILSVRC(dir, ""); files.ValLabels != devkit {
		t.Errorf("the devkit comes first: labels %s", files.ValLabels)
	}
	if files, _, _ = FindILSVRC(dir, "/given/labels.csv"); files.ValLabels != "/given/labels.csv" {
		t.Errorf("given labels are kept: %s", files.ValLabels)
	}
	if got := ILSVRCValLabels(val, ""); got != devkit {
		t.Errorf("labels beside the val tar: %q, want %q", got, devkit)
	}
	if got := ILSVRCValLabels(train, ""); got != "" {
		t.Errorf("the train tar takes no labels: %q", got)
	}
}
