package kernels

import "unsafe"

// Ordered are the element types max-pool's gradient handles.
type Ordered interface {
	float32 | float64 | int32 | int64
}

// SelectWindow picks, for each j < len(arg), the cell of one pooling window that max-pool's gradient
// routes to among x[offs[c]+j], c over offs in order: the first maximal one (minimal one with isMin),
// except that a NaN cell takes the place of any earlier choice (so the last NaN wins). It writes
// arg[j] = offs[c]+j. offs holds at least one cell; every offs[c]+len(arg) is at most len(x).
// float32 runs on the AVX2 kernel (pool_select_amd64.s) for whole groups of 8 j.
func SelectWindow[T Ordered](x []T, offs, arg []int32, isMin bool) {
	n := len(arg)
	if n == 0 {
		return
	}
	for _, o := range offs {
		_ = x[int(o) : int(o)+n] // Bounds for the kernel, which reads x[o : o+n] for every cell.
	}
	done := 0
	if n8 := n &^ 7; hasRowsAVX2 && n8 > 0 && unsafe.Sizeof(T(0)) == 4 && isFloat32[T]() {
		x32 := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
		if isMin {
			selectMinWindow(n8, &x32[0], &offs[0], len(offs), &arg[0])
		} else {
			selectMaxWindow(n8, &x32[0], &offs[0], len(offs), &arg[0])
		}
		done = n8
	}
	for j := done; j < n; j++ {
		first := int(offs[0]) + j
		best, at := x[first], first
		for _, o := range offs[1:] {
			i := int(o) + j
			v := x[i]
			if (v > best && !isMin) || (v < best && isMin) || v != v {
				best, at = v, i
			}
		}
		arg[j] = int32(at)
	}
}

// isFloat32 reports whether T is float32 (not int32, of the same size).
func isFloat32[T Ordered]() bool {
	var one T = 1
	return one/2 != 0 // 0.5 for a float, 0 for an integer.
}
