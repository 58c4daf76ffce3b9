// Package kernels holds the compute kernels of the pure-Go backend: the packed GEMM and its micro-kernels
// (AVX-512, AVX2+FMA, NEON, portable Go), convolution as one GEMM without im2col (gemm_conv.go) and the
// direct depthwise convolution, the element-wise row loops (arithmetic, comparisons, logical ops, max
// and min), the max-pool gradient's choice of cell per window, the vectorised exp and erf, and the
// peak-rate measurement. It works on Go slices and dims and imports no
// GoMLX package (no backend, simplego included): gobackend holds the glue that hands simplego's nodes
// and buffers to these functions, so the kernels carry over unchanged to another backend.
package kernels
