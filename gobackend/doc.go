// Package gobackend is the pure-Go CPU backend behind `backend: go`: GoMLX's simplego completed and accelerated
// (packed GEMM, fused convolutions, element-wise fusion), with R in-process devices for SPMD programs.
package gobackend
