//go:build !amd64

package kernels

// Off amd64 Exp, Logistic and Erf run the math package's functions value by value.
var HasExpAVX2, HasErfAVX2 = false, false

func ExpF32(n int, dst, src *float32, logistic bool) int { return 0 }

func ExpF64(n int, dst, src *float64, logistic bool) int { return 0 }

func ErfF32(n int, dst, src *float32) int { return 0 }

func ErfF64(n int, dst, src *float64) int { return 0 }
