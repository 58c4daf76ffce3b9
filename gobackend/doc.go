// Package gobackend is the pure-Go CPU backend behind `backend: go`: GoMLX's simplego completed with the
// ops its gradients need and accelerated (packed GEMM, fused convolutions, element-wise fusion).
package gobackend
