// Package recipe resolves a config against the world config does not know: it checks the rules that
// need the registered nets and NetSpecs, the data sources and datasets, weights URLs and backend
// names; it builds the net a recipe trains (once per run), opens the data section's splits and makes
// the loader's options (normalisation, augmentation, bad records), and counts the training examples
// without opening a compute backend. config stays the schema, a leaf; everything that reads a recipe
// for a run goes through here.
package recipe
