package gobackend

import "github.com/trainer/trainer/gobackend/kernels"

// Peak is the machine's float32 matrix-multiply rate measured with the backend's own GEMM.
type Peak = kernels.Peak

// MeasurePeak is kernels.MeasurePeak: the best rate of reps n×n products on every core.
func MeasurePeak(n, reps int) Peak { return kernels.MeasurePeak(n, reps) }
