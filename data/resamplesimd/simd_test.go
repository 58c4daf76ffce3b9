package resamplesimd

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSplitWeights: what VPMADDWD computes from the split words, p0·lo0 + p1·lo1 + 2¹⁵·(p0·hi0 +
// p1·hi1) with words read as int16, is p0·k0 + p1·k1 for every byte pair and weights of Pillow's
// range (22-bit, either sign, 1.0 = 2²² included).
func TestSplitWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ks := []int32{0, 1, -1, 1 << 22, -(1 << 22), 1<<22 - 1, 1 << 15, -(1 << 15), 1<<15 - 1, 32767, -32769}
	for range 2000 {
		ks = append(ks, rng.Int32N(1<<23)-1<<22)
	}
	for i, k0 := range ks {
		k1 := ks[(i*7+3)%len(ks)]
		lo, hi := SplitWeights(k0, k1)
		for _, p := range [][2]int32{{0, 0}, {255, 255}, {255, 0}, {0, 255}, {1, 254}, {rng.Int32N(256), rng.Int32N(256)}} {
			got := p[0]*word(lo, 0) + p[1]*word(lo, 1) + (p[0]*word(hi, 0)+p[1]*word(hi, 1))<<15
			if want := p[0]*k0 + p[1]*k1; got != want {
				t.Fatalf("weights %d, %d, pixels %v: split gives %d, want %d", k0, k1, p, got, want)
			}
		}
	}
}

// word is the i-th 16-bit word of d as VPMADDWD reads it (signed).
func word(d int32, i int) int32 { return int32(int16(uint32(d) >> (16 * i))) }

// weight undoes SplitWeights for tap i of a pair.
func weight(lo, hi int32, i int) int32 { return word(hi, i)<<15 + int32(uint16(word(lo, i))) }

// clip is Pillow's clip8 of a sum that includes the bias.
func clip(v int32) byte { return byte(min(max(v>>22, 0), 255)) }

const canary = 0xa5

// TestHorizontalTables runs the kernel on random tables (any tap pairs, the specialised counts 1-5
// and the loop for the rest, negative weights, saturating sums) against the tables' meaning
// computed here, and checks that nothing is written past each row's 24·groups + 4 bytes.
func TestHorizontalTables(t *testing.T) {
	if !available {
		t.Skip("no AVX2 here")
	}
	kernels := []bool{false}
	if vnni {
		kernels = append(kernels, true)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for it := range 300 {
		pairs, groups, rows := 1+it%9, 1+rng.IntN(5), 1+rng.IntN(4)
		srcStride := 3*rng.IntN(40) + 12*pairs + 16
		src := make([]byte, rows*srcStride+rng.IntN(8))
		for i := range src {
			src[i] = byte(rng.IntN(256))
			if it%3 == 0 {
				src[i] = byte(255 * rng.IntN(2))
			}
		}
		maxOff := srcStride - (12*((pairs+1)/2-1) + 16)
		offs := make([]int32, groups*8)
		for i := range offs {
			offs[i] = int32(rng.IntN(maxOff + 1))
		}
		wts := make([]int32, groups*4*pairs*16)
		for i := 0; i < len(wts); i += 8 {
			if i/8%2 == 1 {
				continue // hi: filled with lo
			}
			for lane := range 2 {
				k0, k1 := rng.Int32N(1<<23)-1<<22, rng.Int32N(1<<23)-1<<22
				if it%2 == 1 { // Pillow-like: a few taps of a normalised filter
					k0, k1 = rng.Int32N(1<<21)-1<<18, rng.Int32N(1<<21)
				}
				lo, hi := SplitWeights(k0, k1)
				for l := range 4 {
					wts[i+4*lane+l], wts[i+8+4*lane+l] = lo, hi
				}
			}
		}
		dstStride := 24*groups + 4 + rng.IntN(8)
		for _, k := range kernels {
			dst := make([]byte, rows*dstStride+16)
			for i := range dst {
				dst[i] = canary
			}
			withVNNI(k, func() { Horizontal(dst, dstStride, src, srcStride, rows, offs, wts, groups, pairs) })
			for r := range rows {
				for g := range groups {
					for j := range 8 {
						q, lane := j%4, j/4
						off := r*srcStride + int(offs[g*8+2*q+lane])
						for ch := range 3 {
							sum := int32(1 << 21)
							for p := range pairs {
								e := ((g*4+q)*pairs+p)*16 + 4*lane
								for i := range 2 {
									sum += int32(src[off+3*(2*p+i)+ch]) * weight(wts[e], wts[e+8], i)
								}
							}
							if got, want := dst[r*dstStride+24*g+3*j+ch], clip(sum); got != want {
								t.Fatalf("case %d (%d pairs, %d groups, VNNI %v): row %d pixel %d channel %d = %d, want %d", it, pairs, groups, k, r, 8*g+j, ch, got, want)
							}
						}
					}
				}
				for i := r*dstStride + 24*groups + 4; i < (r+1)*dstStride; i++ {
					if dst[i] != canary {
						t.Fatalf("case %d: byte %d of row %d written (row is %d bytes + 4)", it, i-r*dstStride, r, 24*groups)
					}
				}
			}
		}
	}
}

// TestVertical: the kernel against the sum it stands for, lengths that are and are not multiples
// of 32, odd tap counts (B = A, zero weights), nothing written past dst.
func TestVertical(t *testing.T) {
	if !available {
		t.Skip("no AVX2 here")
	}
	kernels := []bool{false}
	if vnni {
		kernels = append(kernels, true)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for it := range 300 {
		n := 32 + rng.IntN(200)
		if it%4 == 0 {
			n = 32 * (1 + rng.IntN(6))
		}
		rows := 1 + rng.IntN(12)
		stride := n + rng.IntN(20)
		src := make([]byte, rows*stride)
		for i := range src {
			src[i] = byte(rng.IntN(256))
			if it%3 == 0 {
				src[i] = byte(255 * rng.IntN(2))
			}
		}
		taps := 1 + rng.IntN(rows)
		s := rng.IntN(rows - taps + 1)
		ks := make([]int32, taps)
		for i := range ks {
			ks[i] = rng.Int32N(1<<23) - 1<<22
		}
		var pairs []Pair
		for p := 0; p < taps; p += 2 {
			a := int64((s + p) * stride)
			b, k1 := a, int32(0)
			if p+1 < taps {
				b, k1 = a+int64(stride), ks[p+1]
			}
			lo, hi := SplitWeights(ks[p], k1)
			pairs = append(pairs, Pair{A: a, B: b, Lo: lo, Hi: hi})
		}
		for _, k := range kernels {
			buf := make([]byte, n+40)
			for i := range buf {
				buf[i] = canary
			}
			withVNNI(k, func() { Vertical(buf[:n], src, pairs) })
			for i := range n {
				sum := int32(1 << 21)
				for j, k := range ks {
					sum += int32(src[(s+j)*stride+i]) * k
				}
				if got, want := buf[i], clip(sum); got != want {
					t.Fatalf("case %d (%d bytes, %d taps, VNNI %v): byte %d = %d, want %d", it, n, taps, k, i, got, want)
				}
			}
			for i := n; i < len(buf); i++ {
				if buf[i] != canary {
					t.Fatalf("case %d: byte %d written past the %d of dst", it, i, n)
				}
			}
		}
	}
}

// withVNNI runs f with Vertical's VNNI kernel on or off (on only where the CPU has it).
func withVNNI(on bool, f func()) {
	old := vnni
	vnni = on && old
	defer func() { vnni = old }()
	f()
}

// BenchmarkVertical: the vertical pass of a RandomResizedCrop, 250 rows of 224 RGB pixels to 224
// (2 tap pairs a row), with each kernel.
func BenchmarkVertical(b *testing.B) {
	if !available {
		b.Skip("no AVX2 here")
	}
	const row, in, out = 224 * 3, 250, 224
	src := make([]byte, row*in)
	for i := range src {
		src[i] = byte(i * 13)
	}
	dst := make([]byte, row*out)
	pairs := make([][]Pair, out)
	for y := range pairs {
		s := min(y*in/out, in-4)
		lo, hi := SplitWeights(1<<20, 1<<21)
		pairs[y] = []Pair{{A: int64(s * row), B: int64((s + 1) * row), Lo: lo, Hi: hi}, {A: int64((s + 2) * row), B: int64((s + 3) * row), Lo: lo, Hi: hi}}
	}
	for _, k := range []bool{false, true} {
		if k && !vnni {
			continue
		}
		b.Run(fmt.Sprintf("vnni=%v", k), func(b *testing.B) {
			withVNNI(k, func() {
				for b.Loop() {
					for y := range out {
						Vertical(dst[y*row:(y+1)*row], src, pairs[y])
					}
				}
			})
		})
	}
}

// TestBoundsChecked: tables that would read or write outside the slices panic instead.
func TestBoundsChecked(t *testing.T) {
	if !available {
		t.Skip("no AVX2 here")
	}
	wts := make([]int32, 4*2*16)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"horizontal read past src", func() {
			Horizontal(make([]byte, 28), 28, make([]byte, 20), 20, 1, []int32{8, 0, 0, 0, 0, 0, 0, 0}, wts, 1, 2)
		}},
		{"horizontal negative offset", func() {
			Horizontal(make([]byte, 28), 28, make([]byte, 64), 64, 1, []int32{-3, 0, 0, 0, 0, 0, 0, 0}, wts, 1, 2)
		}},
		{"horizontal write past dst", func() { Horizontal(make([]byte, 27), 28, make([]byte, 64), 64, 1, make([]int32, 8), wts, 1, 2) }},
		{"horizontal short weights", func() { Horizontal(make([]byte, 28), 28, make([]byte, 64), 64, 1, make([]int32, 8), wts, 1, 3) }},
		{"vertical row past src", func() { Vertical(make([]byte, 32), make([]byte, 64), []Pair{{A: 33}}) }},
		{"vertical short dst", func() { Vertical(make([]byte, 31), make([]byte, 64), []Pair{{}}) }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", tc.name)
				}
			}()
			tc.f()
		}()
	}
}

// TestNormalize: (v/255 - mean)/std in float32 for 1 and 3 channels, with each kernel (the
// division-free one where FMA is there, the dividing one), at every 4-byte alignment of dst (the Go
// head up to 32 bytes, the kernel, the Go tail) and lengths around the kernel's 24-value steps,
// against Go's scalar float32 arithmetic: ImageNet's constants, none (0 and 1), random ones, and
// stds so small or so large that results overflow or go subnormal. Nothing is written past the
// end; other channel counts and mismatched lengths are refused.
func TestNormalize(t *testing.T) {
	if !available {
		t.Skip("no AVX2 here")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	params := [][2][]float32{
		{{0.485, 0.456, 0.406}, {0.229, 0.224, 0.225}},
		{{0, 0, 0}, {1, 1, 1}},
		{{0.5, -3, 1e-3}, {1e-38, 3e38, 1e-30}},
		{{0.25, 0.5, 0.75}, {1e-45, 1.592664e-39, 1}}, // 1/std overflows; a subnormal std
	}
	const inexactFMA = 3 // params[3]: the division-free kernel's floats differ, the dividing one runs
	for range 5 {
		params = append(params, [2][]float32{
			{rng.Float32()*4 - 2, rng.Float32(), rng.Float32()},
			{rng.Float32() + 1e-3, rng.Float32()*10 + 1e-3, rng.Float32() + 1e-3},
		})
	}
	for pi, ms := range params {
		for _, c := range []int{1, 3} {
			mean, std := ms[0][:c], ms[1][:c]
			norm, ok := NewNormalizer(mean, std)
			if !ok {
				t.Fatalf("%d channels: refused", c)
			}
			if want := fmaAvailable && pi != inexactFMA; norm.FMA() != want {
				t.Errorf("parameters %d, %d channels: division-free kernel %v, want %v (FMA here: %v)", pi, c, norm.FMA(), want, fmaAvailable)
			}
			kernels := []bool{false}
			if norm.FMA() {
				kernels = append(kernels, true)
			}
			for _, fma := range kernels {
				norm.fma = fma
				for _, n := range []int{0, 1, 5, 23, 24, 25, 47, 48, 49, 96 + 7, 3 * 256, 224 * 224 * c} {
					for shift := range 8 {
						pix := make([]byte, n)
						for i := range pix {
							pix[i] = byte(i / 3) // every value of every channel when n >= 768
							if n > 3*256 {
								pix[i] = byte(rng.IntN(256))
							}
						}
						buf := make([]float32, n+16)
						for i := range buf {
							buf[i] = -7
						}
						dst := buf[shift : shift+n]
						norm.Apply(dst, pix)
						for i, v := range pix {
							want := (float32(v)/255 - mean[i%c]) / std[i%c]
							if math.Float32bits(dst[i]) != math.Float32bits(want) {
								t.Fatalf("parameters %d, %d channels, FMA kernel %v, %d values at float offset %d: dst[%d] = %g, want %g",
									pi, c, fma, n, shift, i, dst[i], want)
							}
						}
						for i := range buf {
							if (i < shift || i >= shift+n) && buf[i] != -7 {
								t.Fatalf("%d channels, %d values at offset %d: buf[%d] written", c, n, shift, i)
							}
						}
					}
				}
			}
		}
	}
	if _, ok := NewNormalizer(make([]float32, 4), make([]float32, 4)); ok {
		t.Error("4 channels accepted")
	}
	if _, ok := NewNormalizer(make([]float32, 3), make([]float32, 1)); ok {
		t.Error("3 means with 1 std accepted")
	}
}

// TestNormalizerRefusesInexactFMA: where 1/std overflows (std 1e-45) or std is subnormal, the
// division-free kernel's floats are not the division's, and NewNormalizer keeps the dividing kernel.
func TestNormalizerRefusesInexactFMA(t *testing.T) {
	if !fmaAvailable {
		t.Skip("no AVX2 with FMA here")
	}
	for _, std := range []float32{1e-45, 1.592664e-39} {
		norm, _ := NewNormalizer([]float32{0.5993351}, []float32{std})
		if norm.FMA() {
			t.Errorf("std %g: division-free kernel chosen", std)
		}
		norm.fma = true
		if norm.fmaExact() {
			t.Errorf("std %g: the division-free kernel gives the division's floats: this test needs another std", std)
		}
	}
}

// BenchmarkNormalize: one 224×224 RGB example into a batch of 64 (38.5 MB, far beyond the caches),
// row after row, with each kernel.
func BenchmarkNormalize(b *testing.B) {
	if !available {
		b.Skip("no AVX2 here")
	}
	const size, rows = 224 * 224 * 3, 64
	pix := make([]byte, size)
	for i := range pix {
		pix[i] = byte(i * 7)
	}
	batch := make([]float32, size*rows)
	for _, fma := range []bool{false, true} {
		if fma && !fmaAvailable {
			continue
		}
		b.Run(fmt.Sprintf("fma=%v", fma), func(b *testing.B) {
			norm, _ := NewNormalizer([]float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225})
			norm.fma = fma
			b.SetBytes(size)
			row := 0
			for b.Loop() {
				norm.Apply(batch[row*size:(row+1)*size], pix)
				row = (row + 1) % rows
			}
		})
	}
}
