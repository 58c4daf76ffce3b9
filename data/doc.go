// Package data reads datasets (MNIST and Fashion-MNIST idx files) and feeds them to the trainer
// through a seeded, shuffling, batching Loader.
package data
