// Package data reads image-classification datasets and feeds them to the trainer: sources (MNIST and
// Fashion-MNIST idx files, CIFAR-10 binary batches, ImageFolder trees of JPEG/PNG files, the book's
// prepared Imagenette .bin files, and our packed shards), tar archives read as downloaded (Imagenette's
// .tgz, ImageNet's ILSVRC2012 tars with their labels), the datasets the recipes name, the shard packer,
// decoding and augmentation, and a seeded, parallel, prefetching Loader.
//
// Every source is a Source; NewSourceLoader cuts one into fixed-shape float32 batches, decoding and
// transforming each example (Transform: RandomResizedCrop, flip, or eval resize + center crop). The
// order is a pure function of (seed, epoch) and the augmentation of (seed, epoch, position), so
// Batch(epoch, step) gives any batch directly and a run can resume mid-epoch; Iterate decodes ahead
// of the consumer with parallel workers into reused buffers. docs/data.md documents the shard format.
package data
