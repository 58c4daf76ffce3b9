package data

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ImageNet's archives as image-net.org and Kaggle name them.
const (
	ILSVRCTrainTar = "ILSVRC2012_img_train.tar"
	ILSVRCValTar   = "ILSVRC2012_img_val.tar"
)

// ILSVRCLabelFiles are the files that label ImageNet's validation tar (the devkit, gzipped or not, or
// Kaggle's solution file), looked for beside it in this order.
var ILSVRCLabelFiles = []string{"ILSVRC2012_devkit_t12.tar.gz", "ILSVRC2012_devkit_t12.tar", "LOC_val_solution.csv"}

// ILSVRCFiles are ImageNet's archives found in one folder: the paths of the train tar, the val tar
// and the val tar's labels, each "" when absent.
type ILSVRCFiles struct {
	TrainTar, ValTar, ValLabels string
}

// FindILSVRC looks in dir for ImageNet's train and val tars; ok is false when it holds neither. The
// val tar's labels are labels when given, else the first of ILSVRCLabelFiles in dir; a val tar
// without either is an error that names the files looked for.
func FindILSVRC(dir, labels string) (files ILSVRCFiles, ok bool, err error) {
	if p := filepath.Join(dir, ILSVRCTrainTar); isRegularFile(p) {
		files.TrainTar = p
	}
	if p := filepath.Join(dir, ILSVRCValTar); isRegularFile(p) {
		files.ValTar = p
	}
	if files.TrainTar == "" && files.ValTar == "" {
		return files, false, nil
	}
	if files.ValTar != "" {
		if labels == "" {
			labels = ILSVRCLabelsBeside(dir)
		}
		if labels == "" {
			return files, true, fmt.Errorf("%s needs its labels: put one of %s in %s",
				ILSVRCValTar, strings.Join(ILSVRCLabelFiles, ", "), dir)
		}
		files.ValLabels = labels
	}
	return files, true, nil
}

// ILSVRCValLabels returns the labels of the archive at path: labels when given, else, when path is
// ImageNet's val tar, the first of ILSVRCLabelFiles beside it; "" when there are none.
func ILSVRCValLabels(path, labels string) string {
	if labels == "" && filepath.Base(path) == ILSVRCValTar {
		return ILSVRCLabelsBeside(filepath.Dir(path))
	}
	return labels
}

// ILSVRCLabelsBeside returns the first of ILSVRCLabelFiles in dir, or "".
func ILSVRCLabelsBeside(dir string) string {
	for _, name := range ILSVRCLabelFiles {
		if p := filepath.Join(dir, name); isRegularFile(p) {
			return p
		}
	}
	return ""
}

func isRegularFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
