package kernels

import "unsafe"

// Rows of the bool-valued instructions of fused chains (gobackend/fuse.go): comparisons of float32 rows and
// logical ops on bool rows, each value as Go's operators compute it (a comparison with NaN is false).

// CompareRow: dst[i] = a[i·sa] op b[i·sb] for the comparison kinds.
func CompareRow(k FuseKind, dst []bool, a, b []float32, sa, sb int) {
	switch k {
	case FuseGreater:
		GreaterRow(dst, a, b, sa, sb)
	case FuseLess:
		GreaterRow(dst, b, a, sb, sa)
	case FuseGreaterEq:
		greaterEqRow(dst, a, b, sa, sb)
	case FuseLessEq:
		greaterEqRow(dst, b, a, sb, sa)
	default:
		panic("CompareRow: not a comparison")
	}
}

// greaterEqRow: dst[i] = a[i·sa] >= b[i·sb], with the AVX2 kernels for whole groups of 8.
func greaterEqRow(dst []bool, a, b []float32, sa, sb int) {
	done := 0
	if n8 := len(dst) &^ 7; hasGreaterAVX2 && n8 > 0 && (sa == 1 || sb == 1) {
		checkRowArgs(n8, a, sa, b, sb)
		switch {
		case sa == 1 && sb == 1:
			rowGreaterEqVV(n8, &dst[0], &a[0], &b[0])
		case sa == 1:
			rowGreaterEqVS(n8, &dst[0], &a[0], &b[0])
		default:
			rowGreaterEqSV(n8, &dst[0], &a[0], &b[0])
		}
		done = n8
	}
	for j := done; j < len(dst); j++ {
		dst[j] = a[j*sa] >= b[j*sb]
	}
}

// LogicalRow: dst[i] = a[i·sa] op b[i·sb] (FuseNot ignores b). Contiguous rows go 8 bools at a time as
// words: Go stores a bool as the byte 0 or 1.
func LogicalRow(k FuseKind, dst, a, b []bool, sa, sb int) {
	n := len(dst)
	done := 0
	if sa == 1 && (sb == 1 || k == FuseNot) && n >= 8 {
		words := n / 8
		_ = a[words*8-1]
		d := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), words)
		x := unsafe.Slice((*uint64)(unsafe.Pointer(&a[0])), words)
		var y []uint64
		if k != FuseNot {
			_ = b[words*8-1]
			y = unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), words)
		}
		switch k {
		case FuseAnd:
			for i := range d {
				d[i] = x[i] & y[i]
			}
		case FuseOr:
			for i := range d {
				d[i] = x[i] | y[i]
			}
		case FuseNot:
			for i := range d {
				d[i] = x[i] ^ 0x0101010101010101
			}
		}
		done = words * 8
	}
	for j := done; j < n; j++ {
		switch k {
		case FuseAnd:
			dst[j] = a[j*sa] && b[j*sb]
		case FuseOr:
			dst[j] = a[j*sa] || b[j*sb]
		case FuseNot:
			dst[j] = !a[j*sa]
		default:
			panic("LogicalRow: not a logical op")
		}
	}
}
