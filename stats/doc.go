// Package stats holds the statistics that tell a real accuracy gap from noise: the Wilson score
// interval of a top-1 accuracy, McNemar's exact test on two evaluations paired image by image, and the
// per-image result file (docs/data.md#per-image-results) that pairs them.
package stats
