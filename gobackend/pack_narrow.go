package gobackend

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

// copyShort copies len(dst) values of src: fixed-size moves for the panel widths the kernels use,
// which cost less than a call to memmove for a few dozen bytes.
func copyShort[T gemmFloat](dst, src []T) {
	switch len(dst) {
	case 4:
		*(*[4]T)(dst) = *(*[4]T)(src)
	case 6:
		*(*[6]T)(dst) = *(*[6]T)(src)
	case 8:
		*(*[8]T)(dst) = *(*[8]T)(src)
	case 14:
		*(*[14]T)(dst) = *(*[14]T)(src)
	case 16:
		*(*[16]T)(dst) = *(*[16]T)(src)
	case 32:
		*(*[32]T)(dst) = *(*[32]T)(src)
	default:
		copy(dst, src)
	}
}
