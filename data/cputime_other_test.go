//go:build !unix

package data

import "time"

// processCPU is not measured here: the benchmarks' cpu-ms/image then reads 0.
func processCPU() time.Duration { return 0 }
