// Package kernels holds the compute kernels of the pure-Go backend: the packed GEMM and its micro-kernels
// (AVX-512, AVX2+FMA, NEON, portable Go), convolutions as one GEMM (gemm_conv.go) and the direct depthwise
// convolution, the element-wise row loops (arithmetic, comparisons, logical ops), the vectorised exp, and
// the peak-rate measurement. It works on Go slices and dims only and imports no GoMLX backend (simplego
// included): gobackend holds the glue that hands simplego's nodes and buffers to these functions, so the
// kernels would carry over to another backend unchanged.
package kernels
