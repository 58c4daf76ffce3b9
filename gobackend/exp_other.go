//go:build !amd64

package gobackend

// Off amd64 Exp, Logistic and Erf run the math package's functions value by value.
var hasExpAVX2, hasErfAVX2 = false, false

func expF32(n int, dst, src *float32, logistic bool) int { return 0 }

func expF64(n int, dst, src *float64, logistic bool) int { return 0 }

func erfF32(n int, dst, src *float32) int { return 0 }

func erfF64(n int, dst, src *float64) int { return 0 }
