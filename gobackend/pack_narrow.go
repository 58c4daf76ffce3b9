package gobackend

import "unsafe"

// Packing helpers for panels narrower than 8 rows (the AVX2 kernel's 6-row A panels) and for the short
// copies packing does per contracting index.

// packColumnsNarrow writes, for rows r < w (w < 8) starting at src offsets offs[r] and k < n,
// panel[k·w + r] = src[offs[r]+k]: like packColumns8, through the same 8×8 transpose with offs[w:]
// repeating a real row. The transpose stores 8 values per k, w apart, in increasing k, so each store's
// extra values land on the next k's first rows and are overwritten; the last one's must stay inside
// panel (the caller's later rows or contracting indices, packed after it), which bounds the groups
// done that way.
func packColumnsNarrow[T gemmFloat](panel, src []T, offs *[8]int, n, w int) {
	done := 0
	if n8 := n &^ 7; hasRowsAVX2 && !isFloat64[T]() && w >= 1 && w < 8 {
		for n8 > 0 && (n8-1)*w+8 > len(panel) {
			n8 -= 8
		}
		if n8 > 0 {
			for r := w; r < 8; r++ {
				offs[r] = offs[w-1]
			}
			for _, o := range offs {
				_ = src[o : o+n8] // The kernel's reads.
			}
			_ = panel[(n8-1)*w+7]
			transpose8(&asFloat32(src)[0], &offs[0], n8, &asFloat32(panel)[0], w)
			done = n8
		}
	}
	for k := done; k < n; k++ {
		row := panel[k*w : k*w+w]
		for r := range row {
			row[r] = src[offs[r]+k]
		}
	}
}

// copyRows copies len(offs) rows of w values, row i from src[base+offs[i]:], into dst one after another:
// the panel of w rows adjacent in memory (a row-major B, the kernel gradient's A), per contracting index.
func copyRows[T gemmFloat](dst, src []T, base int, offs []int, w int) {
	n := len(offs)
	if n == 0 {
		return
	}
	if hasCopyRows && !isFloat64[T]() && (w == 16 || w == 6) {
		lo, hi := offs[0], offs[0]
		for _, o := range offs {
			lo, hi = min(lo, o), max(hi, o)
		}
		if base+lo >= 0 {
			_, _ = src[base+hi+w-1], dst[n*w-1] // The kernel's reads and writes.
			at := (*float32)(unsafe.Add(unsafe.Pointer(&src[0]), base*4))
			if w == 16 {
				copyRows16(n, &asFloat32(dst)[0], at, &offs[0])
			} else {
				copyRows6(n, &asFloat32(dst)[0], at, &offs[0])
			}
			return
		}
	}
	for i, o := range offs {
		copy(dst[i*w:i*w+w], src[base+o:base+o+w])
	}
}
