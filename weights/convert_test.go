package weights

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Every 16-bit pattern of half and bfloat16 decodes to a value that encodes back to the same bits.
func TestMiniFloatsRoundTripExhaustively(t *testing.T) {
	for _, f := range []struct {
		name      string
		exp, mant uint
	}{{"F16", 5, 10}, {"BF16", 8, 7}} {
		for h := range 1 << 16 {
			x := decodeMiniFloat(uint16(h), f.exp, f.mant)
			if math.IsNaN(x) {
				continue
			}
			if got := encodeMiniFloat(x, f.exp, f.mant); got != uint16(h) {
				t.Fatalf("%s: %#04x decodes to %g, which encodes to %#04x", f.name, h, x, got)
			}
		}
	}
}

func TestMiniFloatKnownValues(t *testing.T) {
	f16 := map[float64]uint16{
		1: 0x3c00, -2: 0xc000, 65504: 0x7bff, 65520: 0x7c00, 1e6: 0x7c00, 0.1: 0x2e66, 1.0 / 3: 0x3555,
		math.Ldexp(1, -14): 0x0400, math.Ldexp(1, -24): 0x0001, math.Ldexp(1, -26): 0,
		math.Ldexp(3, -26):       0x0001, // 0.75 of the smallest subnormal rounds up
		1 + math.Ldexp(1, -11):   0x3c00, // a tie rounds to the even mantissa
		1 + 3*math.Ldexp(1, -11): 0x3c02,
		math.Inf(-1):             0xfc00,
	}
	for x, want := range f16 {
		if got := encodeMiniFloat(x, 5, 10); got != want {
			t.Errorf("F16(%g) = %#04x, want %#04x", x, got, want)
		}
	}
	bf16 := map[float64]uint16{1: 0x3f80, 3.140625: 0x4049, math.Pi: 0x4049, -0.5: 0xbf00,
		1 + math.Ldexp(1, -8): 0x3f80, 1 + 3*math.Ldexp(1, -8): 0x3f82, 3.4e38: 0x7f80}
	for x, want := range bf16 {
		if got := encodeMiniFloat(x, 8, 7); got != want {
			t.Errorf("BF16(%g) = %#04x, want %#04x", x, got, want)
		}
	}
	if h := encodeMiniFloat(math.NaN(), 5, 10); !math.IsNaN(decodeMiniFloat(h, 5, 10)) {
		t.Errorf("NaN encodes to %#04x", h)
	}
}

// Encoding picks the nearest representable value: no neighbour of the result is closer.
func TestMiniFloatRoundsToNearest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		x := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(8)-4))
		h := encodeMiniFloat(x, 5, 10)
		got := decodeMiniFloat(h, 5, 10)
		if math.IsInf(got, 0) {
			continue
		}
		for _, n := range []uint16{h - 1, h + 1} {
			if y := decodeMiniFloat(n, 5, 10); !math.IsNaN(y) && math.Abs(y-x) < math.Abs(got-x) {
				t.Fatalf("F16(%g) = %g, but %g is closer", x, got, y)
			}
		}
	}
}

func TestIntegerDTypes(t *testing.T) {
	for _, dt := range []DType{I64, I32, I16, I8} {
		st, err := FromFloat64s(dt, []int{3}, []float64{-5, 0, 7})
		if err != nil {
			t.Fatal(err)
		}
		v, _ := st.Float64s()
		if v[0] != -5 || v[1] != 0 || v[2] != 7 {
			t.Errorf("%s round trip: %v", dt, v)
		}
	}
	if _, err := FromFloat64s(I8, []int{1}, []float64{200}); err == nil {
		t.Error("200 accepted as I8")
	}
	if _, err := FromFloat64s(I32, []int{1}, []float64{1.5}); err == nil {
		t.Error("1.5 accepted as I32")
	}
}
