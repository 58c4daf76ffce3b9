package kernels

import "math"

// Dispatch of the element-wise row loops to the AVX2 kernels (rows_amd64.s) where the CPU has them;
// the kernels do whole groups of 8 values and these functions the tail, so every value gets the same
// IEEE operation as in the Go loops.

type rowKernel = func(n int, dst, a, b *float32)

// rowKernels[op][kind]: kind 0 vector·vector, 1 vector·scalar, 2 scalar·vector; ops Add, Sub, Mul, Div,
// Max, Min (the BinOp order).
var rowKernels = [6][3]rowKernel{
	{rowAddVV, rowAddVS, rowAddSV},
	{rowSubVV, rowSubVS, rowSubSV},
	{rowMulVV, rowMulVS, rowMulSV},
	{rowDivVV, rowDivVS, rowDivSV},
	{rowMaxVV, rowMaxVS, rowMaxSV},
	{rowMinVV, rowMinVS, rowMinSV},
}

// binaryRowVec runs the AVX2 kernel on the first n/8*8 values of a binary row when it applies, and
// returns how many values it did.
func binaryRowVec(op BinOp, out, a, b []float32, sa, sb int) int {
	n8 := len(out) &^ 7
	if !hasRowsAVX2 || op > BinMin || n8 == 0 || (sa == 0 && sb == 0) {
		return 0
	}
	kind := 0
	switch {
	case sb == 0:
		kind = 1
	case sa == 0:
		kind = 2
	}
	checkRowArgs(n8, a, sa, b, sb)
	rowKernels[op][kind](n8, &out[0], &a[0], &b[0])
	return n8
}

// whereRowVec: dst[i] = cond[i] ? t[i·st] : f[i·sf] for the first n/8*8 values, AVX2; returns the count.
func whereRowVec(dst []float32, cond []bool, t, f []float32, st, sf int) int {
	n8 := len(dst) &^ 7
	if !hasRowsAVX2 || n8 == 0 {
		return 0
	}
	_ = cond[n8-1]
	checkRowArgs(n8, t, st, f, sf)
	switch {
	case st == 1 && sf == 1:
		rowWhereVV(n8, &dst[0], &cond[0], &t[0], &f[0])
	case st == 1:
		rowWhereVS(n8, &dst[0], &cond[0], &t[0], &f[0])
	case sf == 1:
		rowWhereSV(n8, &dst[0], &cond[0], &t[0], &f[0])
	default:
		rowWhereSS(n8, &dst[0], &cond[0], &t[0], &f[0])
	}
	return n8
}

// GreaterRow: dst[i] = a[i·sa] > b[i·sb] (false when either is NaN, as Go's >).
func GreaterRow[T Float](dst []bool, aT, bT []T, sa, sb int) {
	done := 0
	if n8 := len(dst) &^ 7; hasGreaterAVX2 && !IsFloat64[T]() && n8 > 0 && (sa == 1 || sb == 1) {
		a, b := AsFloat32(aT), AsFloat32(bT)
		checkRowArgs(n8, a, sa, b, sb)
		switch {
		case sa == 1 && sb == 1:
			rowGreaterVV(n8, &dst[0], &a[0], &b[0])
		case sa == 1:
			rowGreaterVS(n8, &dst[0], &a[0], &b[0])
		default:
			rowGreaterSV(n8, &dst[0], &a[0], &b[0])
		}
		done = n8
	}
	for j := done; j < len(dst); j++ {
		dst[j] = aT[j*sa] > bT[j*sb]
	}
}

// WhereRow: dst[i] = cond[i·sc] ? t[i·st] : f[i·sf].
func WhereRow(dst []float32, cond []bool, t, f []float32, sc, st, sf int) {
	done := 0
	if sc == 1 {
		done = whereRowVec(dst, cond, t, f, st, sf)
	}
	for j := done; j < len(dst); j++ {
		if cond[j*sc] {
			dst[j] = t[j*st]
		} else {
			dst[j] = f[j*sf]
		}
	}
}

// AccumulateRow: o[i] += x[i].
func AccumulateRow[T Float](o, x []T) {
	done := 0
	if n8 := len(o) &^ 7; hasRowsAVX2 && !IsFloat64[T]() && n8 > 0 {
		o32, x32 := AsFloat32(o), AsFloat32(x)
		checkRowArgs(n8, x32, 1, x32, 1)
		rowAddVV(n8, &o32[0], &o32[0], &x32[0])
		done = n8
	}
	x = x[:len(o)]
	for j := done; j < len(o); j++ {
		o[j] += x[j]
	}
}

// checkRowArgs panics (like an index) unless the kernels' reads stay inside a and b: n values of a
// vector operand, one of a scalar.
func checkRowArgs(n int, a []float32, sa int, b []float32, sb int) {
	_, _ = a[max(n*sa, 1)-1], b[max(n*sb, 1)-1]
}

// packColumns8 writes, for rows r < 8 starting at src offsets offs[r] and k < n, panel[k·w + r] =
// src[offs[r]+k]: eight rows of an operand into eight columns of a packed panel (whose column 0 is
// panel[0]), with the AVX2 8×8 transpose for whole groups of 8 k and Go for the rest (float64: Go).
func packColumns8[T Float](panel, src []T, offs *[8]int, n, w int) {
	packColumnsPartial(panel, src, offs, n, 8, w)
}

// SumRows adds rows of x (rows·stride apart, len(o) values each) into o: o[j] += x[j], then
// x[stride+j], ... in row order, so each sum is the sequential one (the AVX2 kernel runs across j).
func SumRows[T Float](o, x []T, rows, stride int) {
	n := len(o)
	if rows == 0 || n == 0 {
		return
	}
	_ = x[(rows-1)*stride+n-1]
	done := 0
	if n8 := n &^ 7; hasRowsAVX2 && !IsFloat64[T]() && n8 > 0 {
		rowSumRows(n8, rows, &AsFloat32(o)[0], &AsFloat32(x)[0], stride)
		done = n8
	}
	for j := done; j < n; j++ {
		acc := o[j]
		for r := range rows {
			acc += x[r*stride+j]
		}
		o[j] = acc
	}
}

// AddRowSums adds to each out[i] the n values of row i of x, one at a time in order from out[i]: a
// sequential sum per row, so the bits of a plain loop over each row. Four rows go at a time (then two),
// so their chains of dependent additions overlap instead of each waiting on the last addition.
func AddRowSums[T Float](out, x []T, n int) {
	rows := len(out)
	if rows == 0 || n == 0 {
		return
	}
	_ = x[rows*n-1]
	i := 0
	for ; i+4 <= rows; i += 4 {
		x0 := x[i*n : i*n+n]
		x1, x2, x3 := x[(i+1)*n:][:len(x0)], x[(i+2)*n:][:len(x0)], x[(i+3)*n:][:len(x0)]
		a0, a1, a2, a3 := out[i], out[i+1], out[i+2], out[i+3]
		for j, v := range x0 {
			a0 += v
			a1 += x1[j]
			a2 += x2[j]
			a3 += x3[j]
		}
		out[i], out[i+1], out[i+2], out[i+3] = a0, a1, a2, a3
	}
	if i+2 <= rows {
		x0 := x[i*n : i*n+n]
		x1 := x[(i+1)*n:][:len(x0)]
		a0, a1 := out[i], out[i+1]
		for j, v := range x0 {
			a0 += v
			a1 += x1[j]
		}
		out[i], out[i+1] = a0, a1
		i += 2
	}
	if i < rows {
		acc := out[i]
		for _, v := range x[i*n : i*n+n] {
			acc += v
		}
		out[i] = acc
	}
}

// BinaryRowBlock computes the rows of out (n values each) as x's row op r (swapped: r op x's row),
// with the same IEEE operations as BinaryRow.
func BinaryRowBlock[T Float](op BinOp, out, x, r []T, n int, swapped bool) {
	r = r[:n]
	for i := 0; i+n <= len(out); i += n {
		o, v := out[i:i+n:i+n], x[i:i+n:i+n]
		switch {
		case op == BinAdd && !swapped:
			for j, c := range r {
				o[j] = v[j] + c
			}
		case op == BinAdd:
			for j, c := range r {
				o[j] = c + v[j]
			}
		case op == BinSub && !swapped:
			for j, c := range r {
				o[j] = v[j] - c
			}
		case op == BinSub:
			for j, c := range r {
				o[j] = c - v[j]
			}
		case op == BinMul && !swapped:
			for j, c := range r {
				o[j] = v[j] * c
			}
		case op == BinMul:
			for j, c := range r {
				o[j] = c * v[j]
			}
		case op == BinDiv && !swapped:
			for j, c := range r {
				o[j] = v[j] / c
			}
		case op == BinDiv:
			for j, c := range r {
				o[j] = c / v[j]
			}
		case op == BinMax && !swapped:
			for j, c := range r {
				o[j] = max(v[j], c)
			}
		case op == BinMax:
			for j, c := range r {
				o[j] = max(c, v[j])
			}
		case op == BinMin && !swapped:
			for j, c := range r {
				o[j] = min(v[j], c)
			}
		default:
			for j, c := range r {
				o[j] = min(c, v[j])
			}
		}
	}
}

// BinaryRow computes out[i] = a[i·sa] op b[i·sb] with sa, sb ∈ {0, 1}, Go's float32 or float64
// arithmetic and max/min as simplego does (the AVX2 kernels for float32).
func BinaryRow[T Float](op BinOp, out, a, b []T, sa, sb int) {
	done := 0
	if !IsFloat64[T]() {
		done = binaryRowVec(op, AsFloat32(out), AsFloat32(a), AsFloat32(b), sa, sb)
	}
	if done > 0 {
		out = out[done:]
		if sa == 1 {
			a = a[done:]
		}
		if sb == 1 {
			b = b[done:]
		}
	}
	n := len(out)
	if sa == 1 {
		a = a[:n]
	}
	if sb == 1 {
		b = b[:n]
	}
	switch op {
	case BinAdd:
		switch {
		case sa == 1 && sb == 1:
			for i := range out {
				out[i] = a[i] + b[i]
			}
		case sa == 1:
			c := b[0]
			for i := range out {
				out[i] = a[i] + c
			}
		case sb == 1:
			c := a[0]
			for i := range out {
				out[i] = c + b[i]
			}
		default:
			FillRow(out, a[0]+b[0])
		}
	case BinSub:
		switch {
		case sa == 1 && sb == 1:
			for i := range out {
				out[i] = a[i] - b[i]
			}
		case sa == 1:
			c := b[0]
			for i := range out {
				out[i] = a[i] - c
			}
		case sb == 1:
			c := a[0]
			for i := range out {
				out[i] = c - b[i]
			}
		default:
			FillRow(out, a[0]-b[0])
		}
	case BinMul:
		switch {
		case sa == 1 && sb == 1:
			for i := range out {
				out[i] = a[i] * b[i]
			}
		case sa == 1:
			c := b[0]
			for i := range out {
				out[i] = a[i] * c
			}
		case sb == 1:
			c := a[0]
			for i := range out {
				out[i] = c * b[i]
			}
		default:
			FillRow(out, a[0]*b[0])
		}
	case BinDiv:
		switch {
		case sa == 1 && sb == 1:
			for i := range out {
				out[i] = a[i] / b[i]
			}
		case sa == 1:
			c := b[0]
			for i := range out {
				out[i] = a[i] / c
			}
		case sb == 1:
			c := a[0]
			for i := range out {
				out[i] = c / b[i]
			}
		default:
			FillRow(out, a[0]/b[0])
		}
	case BinMax:
		switch {
		case sa == 1 && sb == 1:
			for i := range out {
				out[i] = max(a[i], b[i])
			}
		case sa == 1:
			c := b[0]
			for i := range out {
				out[i] = max(a[i], c)
			}
		case sb == 1:
			c := a[0]
			for i := range out {
				out[i] = max(c, b[i])
			}
		default:
			FillRow(out, max(a[0], b[0]))
		}
	case BinMin:
		switch {
		case sa == 1 && sb == 1:
			for i := range out {
				out[i] = min(a[i], b[i])
			}
		case sa == 1:
			c := b[0]
			for i := range out {
				out[i] = min(a[i], c)
			}
		case sb == 1:
			c := a[0]
			for i := range out {
				out[i] = min(c, b[i])
			}
		default:
			FillRow(out, min(a[0], b[0]))
		}
	}
}

// FillRow sets every value of out to v.
func FillRow[T any](out []T, v T) {
	if zeroBits(v) {
		clear(out) // memclr
		return
	}
	for i := range out {
		out[i] = v
	}
}

// zeroBits reports whether v's representation is all zero bits (+0, not -0).
func zeroBits[T any](v T) bool {
	switch x := any(v).(type) {
	case float32:
		return math.Float32bits(x) == 0
	case float64:
		return math.Float64bits(x) == 0
	case int32:
		return x == 0
	case int64:
		return x == 0
	case bool:
		return !x
	}
	return false
}
