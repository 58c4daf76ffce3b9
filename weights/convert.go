package weights

import (
	"encoding/binary"
	"fmt"
	"math"
)

// FromFloat64s encodes values as a tensor of a float dtype (F64, F32, F16, BF16, rounding to nearest
// even) or of an integer dtype (values must then be integral and in range).
func FromFloat64s(dtype DType, shape []int, values []float64) (*Tensor, error) {
	t := &Tensor{DType: dtype, Shape: append([]int{}, shape...)}
	if n := t.NumElements(); n != len(values) {
		return nil, fmt.Errorf("shape %v holds %d values, got %d", shape, n, len(values))
	}
	size := dtype.Size()
	if size == 0 {
		return nil, fmt.Errorf("unknown dtype %q", dtype)
	}
	t.Data = make([]byte, len(values)*size)
	le := binary.LittleEndian
	for i, v := range values {
		b := t.Data[i*size:]
		switch dtype {
		case F64:
			le.PutUint64(b, math.Float64bits(v))
		case F32:
			le.PutUint32(b, math.Float32bits(float32(v)))
		case F16:
			le.PutUint16(b, encodeMiniFloat(v, 5, 10))
		case BF16:
			le.PutUint16(b, encodeMiniFloat(v, 8, 7))
		default:
			lo, hi := intRange(dtype)
			if v != math.Trunc(v) || v < lo || v > hi {
				return nil, fmt.Errorf("value %v at index %d is not representable as %s", v, i, dtype)
			}
			putInt(b, dtype, int64(v))
		}
	}
	return t, nil
}

// FromInt64s encodes values as an I64 tensor.
func FromInt64s(shape []int, values []int64) (*Tensor, error) {
	t := &Tensor{DType: I64, Shape: append([]int{}, shape...)}
	if n := t.NumElements(); n != len(values) {
		return nil, fmt.Errorf("shape %v holds %d values, got %d", shape, n, len(values))
	}
	t.Data = make([]byte, 8*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint64(t.Data[8*i:], uint64(v))
	}
	return t, nil
}

// Float64s decodes every element (of any dtype) to float64; F16 and BF16 decode exactly.
func (t *Tensor) Float64s() ([]float64, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	size := t.DType.Size()
	out := make([]float64, t.NumElements())
	le := binary.LittleEndian
	for i := range out {
		b := t.Data[i*size:]
		switch t.DType {
		case F64:
			out[i] = math.Float64frombits(le.Uint64(b))
		case F32:
			out[i] = float64(math.Float32frombits(le.Uint32(b)))
		case F16:
			out[i] = decodeMiniFloat(le.Uint16(b), 5, 10)
		case BF16:
			out[i] = decodeMiniFloat(le.Uint16(b), 8, 7)
		default:
			out[i] = float64(getInt(b, t.DType))
		}
	}
	return out, nil
}

// Float32s decodes every element to float32.
func (t *Tensor) Float32s() ([]float32, error) {
	v, err := t.Float64s()
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out, nil
}

// IsFloat reports whether the dtype is a floating-point one.
func (d DType) IsFloat() bool { return d == F64 || d == F32 || d == F16 || d == BF16 }

func intRange(d DType) (lo, hi float64) {
	switch d {
	case I64:
		return -(1 << 63), (1 << 63) - 1024 // the largest float64 below 2^63
	case I32:
		return math.MinInt32, math.MaxInt32
	case I16:
		return math.MinInt16, math.MaxInt16
	case I8:
		return math.MinInt8, math.MaxInt8
	case U8:
		return 0, math.MaxUint8
	}
	return 0, 1 // Bool
}

func putInt(b []byte, d DType, v int64) {
	le := binary.LittleEndian
	switch d {
	case I64:
		le.PutUint64(b, uint64(v))
	case I32:
		le.PutUint32(b, uint32(v))
	case I16:
		le.PutUint16(b, uint16(v))
	default: // I8, U8, Bool
		b[0] = byte(v)
	}
}

func getInt(b []byte, d DType) int64 {
	le := binary.LittleEndian
	switch d {
	case I64:
		return int64(le.Uint64(b))
	case I32:
		return int64(int32(le.Uint32(b)))
	case I16:
		return int64(int16(le.Uint16(b)))
	case I8:
		return int64(int8(b[0]))
	}
	return int64(b[0]) // U8, Bool
}

// encodeMiniFloat rounds x to the nearest (ties to even) binary float with expBits exponent and
// mantBits mantissa bits: (5, 10) is IEEE half, (8, 7) bfloat16. Overflow gives ±Inf.
func encodeMiniFloat(x float64, expBits, mantBits uint) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign = 1 << (expBits + mantBits)
		x = -x
	}
	expMask := uint16(1)<<expBits - 1
	inf := sign | expMask<<mantBits
	switch {
	case math.IsNaN(x):
		return inf | 1<<(mantBits-1)
	case math.IsInf(x, 0):
		return inf
	case x == 0:
		return sign
	}
	bias := 1<<(expBits-1) - 1
	emin := 1 - bias
	if x < math.Ldexp(1, emin) {
		// Subnormal: units of 2^(emin-mantBits); rounding up to 2^mantBits lands on the smallest normal.
		return sign | uint16(math.RoundToEven(math.Ldexp(x, -(emin-int(mantBits)))))
	}
	_, e := math.Frexp(x) // x = f·2^e, f in [0.5, 1)
	exp := e - 1
	q := math.RoundToEven(math.Ldexp(x, -(exp - int(mantBits)))) // in [2^mantBits, 2^(mantBits+1)]
	if q == math.Ldexp(1, int(mantBits)+1) {
		exp++
		q /= 2
	}
	if exp > bias {
		return inf
	}
	return sign | uint16(exp+bias)<<mantBits | uint16(q)&(1<<mantBits-1)
}

// decodeMiniFloat is the exact inverse of encodeMiniFloat.
func decodeMiniFloat(h uint16, expBits, mantBits uint) float64 {
	sign := 1.0
	if h>>(expBits+mantBits)&1 == 1 {
		sign = -1
	}
	expMask := uint16(1)<<expBits - 1
	exp := int(h >> mantBits & expMask)
	frac := float64(h & (1<<mantBits - 1))
	bias := 1<<(expBits-1) - 1
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, 1-bias-int(mantBits))
	case int(expMask):
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(math.Ldexp(1, int(mantBits))+frac, exp-bias-int(mantBits))
}
