//go:build !amd64

package gobackend

// Off amd64 Exp and Logistic run math.Exp value by value.
var hasExpAVX2 = false

func expF32(n int, dst, src *float32, logistic bool) int { return 0 }

func expF64(n int, dst, src *float64, logistic bool) int { return 0 }
