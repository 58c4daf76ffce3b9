package kernels

import "unsafe"

// Packing helpers for panels narrower than 8 rows (the AVX2 kernel's 6-row A panels) and for the short
// copies packing does per contracting index.

// maxPanelRows bounds the rows of a packed A panel (the kernels' mr: 14 at most).
const maxPanelRows = 16

// packRowOffsets writes panel[k·w + r] = src[offs[r]+k] for rows r < w = len(offs) and k < n: w rows of
// an operand into the columns of a packed panel. Rows go through the 8×8 transpose 8 at a time, the
// last chunk first: a chunk of fewer than 8 rows repeats its last one, and each k's store of 8 values
// spills onto the next k's first rows, which the earlier chunks (or, for the last k, the caller's next
// contracting indices, packed after) write again.
func packRowOffsets[T Float](panel, src []T, offs []int, n, w int) {
	for c0 := ((w - 1) / 8) * 8; c0 >= 0; c0 -= 8 {
		var o8 [8]int
		for r := range o8 {
			o8[r] = offs[min(c0+r, w-1)]
		}
		packColumnsPartial(panel[c0:], src, &o8, n, min(8, w-c0), w)
	}
}

// packColumnsPartial writes, for rows r < rows (at most 8) starting at src offsets offs[r] and k < n,
// panel[k·w + r] = src[offs[r]+k], with offs[rows:] repeating a real row. The AVX2 transpose stores 8
// values per k, w apart, in increasing k: with fewer than 8 rows each store's extra values land on
// what follows (see packRowOffsets); the last one's must stay inside panel, which bounds the groups
// of 8 k done that way.
func packColumnsPartial[T Float](panel, src []T, offs *[8]int, n, rows, w int) {
	done := 0
	if n8 := n &^ 7; hasRowsAVX2 && !IsFloat64[T]() && rows >= 1 {
		for n8 > 0 && (n8-1)*w+8 > len(panel) {
			n8 -= 8
		}
		if n8 > 0 {
			for _, o := range offs {
				_ = src[o : o+n8] // The kernel's reads.
			}
			_ = panel[(n8-1)*w+7]
			transpose8(&AsFloat32(src)[0], &offs[0], n8, &AsFloat32(panel)[0], w)
			done = n8
		}
	}
	for k := done; k < n; k++ {
		row := panel[k*w : k*w+rows]
		for r := range row {
			row[r] = src[offs[r]+k]
		}
	}
}

// packColumnsNarrow is packColumnsPartial for a panel of w < 8 rows, offs[w:] filled in here.
func packColumnsNarrow[T Float](panel, src []T, offs *[8]int, n, w int) {
	for r := w; r < 8; r++ {
		offs[r] = offs[w-1]
	}
	packColumnsPartial(panel, src, offs, n, w, w)
}

// copyRows copies len(offs) rows of w values, row i from src[base+offs[i]:], into dst one after another:
// the panel of w rows adjacent in memory (a row-major B, the kernel gradient's A), per contracting index.
func copyRows[T Float](dst, src []T, base int, offs []int, w int) {
	n := len(offs)
	if n == 0 {
		return
	}
	if hasCopyRows && !IsFloat64[T]() && (w == 16 || w == 6) {
		lo, hi := offs[0], offs[0]
		for _, o := range offs {
			lo, hi = min(lo, o), max(hi, o)
		}
		// base itself must lie in src: the kernel's address src+base must point into src's allocation
		// (Go's rule for unsafe.Add, which -race's checkptr enforces), even where every base+offs[i]
		// does. Border rows of a padded convolution, whose base is negative, take the loop below.
		if base >= 0 && base+lo >= 0 {
			_, _ = src[base+hi+w-1], dst[n*w-1] // The kernel's reads and writes.
			at := (*float32)(unsafe.Add(unsafe.Pointer(&src[0]), base*4))
			if w == 16 {
				copyRows16(n, &AsFloat32(dst)[0], at, &offs[0])
			} else {
				copyRows6(n, &AsFloat32(dst)[0], at, &offs[0])
			}
			return
		}
	}
	if g := interleavedRun(offs, w); g > 0 {
		// Consecutive rows far apart in src, every g-th one next to the one before (the kernel gradient's
		// B: the batches of one output position, then the next position): copied as interleavedStreams
		// sequences of rows adjacent in src at a time, so the reads stream through memory instead of
		// touching a new page per row.
		for i0 := 0; i0 < g; i0 += interleavedStreams {
			i1 := min(i0+interleavedStreams, g)
			for p := 0; p+i0 < n; p += g {
				for j := p + i0; j < min(p+i1, n); j++ {
					o := offs[j]
					copy(dst[j*w:j*w+w], src[base+o:base+o+w])
				}
			}
		}
		return
	}
	for i, o := range offs {
		copy(dst[i*w:i*w+w], src[base+o:base+o+w])
	}
}

// interleavedStreams is how many of copyRows' interleaved sequences it copies side by side: CIFAR-8's
// 32×32×64 kernel gradient's B (8 MB, 32 sequences) took 1.4-1.9 ms in row order on Zen 4, 1.2-1.4
// one sequence at a time, 0.7-1.0 four or eight at a time, 1.3-1.5 sixteen.
const interleavedStreams = 8

// interleavedFar is the distance in elements from which consecutive rows count as far apart for
// copyRows (a 4 KB page of float32).
const interleavedFar = 1024

// interleavedRun returns g when offs starts with a run of g rows a constant far stride apart whose
// successor (row g) starts where row 0's w values end, so rows g apart are adjacent in memory (the
// kernel gradient's B when one panel holds all its output channels); 0 otherwise. Rows further
// apart (a panel of 64 of 128 or 256 channels) are left in row order: each sequence would read a
// fraction of every line it passes, and at 8 px that was slower than row order.
func interleavedRun(offs []int, w int) int {
	n := len(offs)
	if n < 3 {
		return 0
	}
	d := offs[1] - offs[0]
	if d < interleavedFar {
		return 0
	}
	g := 2
	for g < n && offs[g]-offs[g-1] == d {
		g++
	}
	if g == n || offs[g]-offs[0] != w {
		return 0
	}
	return g
}

// Transpose8Rows writes 8 rows of src as 8 adjacent columns of dst: dst[k·w + i] = src[offs[i] + k] for
// k < n and i < 8, through the AVX2 8×8 transposes where the CPU has them (the multiple of 8 of n).
func Transpose8Rows(dst []float32, w int, src []float32, offs *[8]int, n int) {
	done := 0
	if n8 := n &^ 7; hasRowsAVX2 && n8 > 0 {
		for _, o := range offs {
			_ = src[o : o+n8] // The kernel's reads.
		}
		_ = dst[(n8-1)*w+7]
		transpose8(&src[0], &offs[0], n8, &dst[0], w)
		done = n8
	}
	for k := done; k < n; k++ {
		row := dst[k*w : k*w+8]
		for i := range row {
			row[i] = src[offs[i]+k]
		}
	}
}
