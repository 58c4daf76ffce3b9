package data

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// withAVX2 runs f with the AVX2 kernels on or off, restoring the setting after.
func withAVX2(on bool, f func()) {
	old := resampleAVX2
	resampleAVX2 = on
	defer func() { resampleAVX2 = old }()
	f()
}

// resampleCase is one resize of TestResampleAVX2MatchesGo.
type resampleCase struct {
	src          pixels
	w, h         int
	filter       Interp
	flip         bool
	tightSrc     bool // src.pix ends at the image's last byte: the last rows go through r.pad
	kind, source string
	view         pixels // the same box where it lies in the whole image, rows viewRow bytes apart
	viewRow      int
}

// TestResampleAVX2MatchesGo: the AVX2 kernels give the portable passes' bytes (themselves tested
// against resize, which is Pillow's arithmetic) on random crops of random images: both filters,
// flipped or not, RGB and grey, shrinking up to ~9× (the bicubic tables' limit, then the Go
// fallback) and enlarging, widths that are not multiples of 8, saturated content that makes
// bicubic overshoot (clipping), sources with and without slack after their last row; and the same
// boxes read in place in the whole image (resizeView), their slices ending at the box's last byte.
func TestResampleAVX2MatchesGo(t *testing.T) {
	if !resampleAVX2 {
		t.Skip("no AVX2 on this machine: the Go passes are the only ones")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var cases []resampleCase
	for it := range 400 {
		c := 3
		if it%7 == 6 {
			c = 1
		}
		sw, sh := 1+rng.IntN(500), 1+rng.IntN(500)
		if it%10 == 0 {
			sw, sh = 1000+rng.IntN(1200), 100+rng.IntN(200) // large shrinks horizontally
		}
		kind := []string{"noise", "saturated", "smooth"}[it%3]
		img := pixels{w: sw, h: sh, c: c, pix: make([]uint8, sw*sh*c, sw*sh*c+rng.IntN(64))}
		for i := range img.pix {
			switch kind {
			case "noise":
				img.pix[i] = uint8(rng.IntN(256))
			case "saturated":
				img.pix[i] = uint8(255 * ((i/c/3 + i/(sw*c)/2) % 2))
			default:
				img.pix[i] = uint8(128 + 100*((i/c)%sw)/max(sw, 1) - 50*(i/(sw*c))/max(sh, 1))
			}
		}
		// A RandomResizedCrop box (sometimes the whole image), then an output size.
		x, y, bw, bh := 0, 0, sw, sh
		if it%4 != 0 {
			x, y, bw, bh = RandomResizedCropParams(sw, sh, [2]float64{0.08, 1}, [2]float64{3.0 / 4, 4.0 / 3}, rand.NewPCG(uint64(it), 1))
		}
		src := cropPixels(img, x, y, bw, bh, nil)
		tight := it%2 == 0
		if !tight {
			src.pix = append(src.pix, make([]uint8, rng.IntN(40))...)[:len(src.pix)]
		}
		w, h := 1+rng.IntN(300), 1+rng.IntN(300)
		switch it % 5 {
		case 0:
			w, h = 224, 224
		case 1:
			w = bw // vertical pass only
		case 2:
			h = bh // horizontal pass only
		}
		start := (y*sw + x) * c
		view := pixels{w: bw, h: bh, c: c, pix: img.pix[start : start+(bh-1)*sw*c+bw*c]}
		cases = append(cases, resampleCase{src: src, w: w, h: h, filter: Interp(it % 2), flip: it%3 == 1, tightSrc: tight, kind: kind,
			view: view, viewRow: sw * c})
	}
	var fast, slow resampler
	simd := 0
	for i, tc := range cases {
		var got, want pixels
		withAVX2(true, func() { got = fast.resize(tc.src, tc.w, tc.h, tc.filter, tc.flip) })
		withAVX2(false, func() { want = slow.resize(tc.src, tc.w, tc.h, tc.filter, tc.flip) })
		name := fmt.Sprintf("case %d: %dx%dx%d (%s, tight %v) -> %dx%d %v flip %v", i, tc.src.w, tc.src.h, tc.src.c,
			tc.kind, tc.tightSrc, tc.w, tc.h, tc.filter, tc.flip)
		if got.w != tc.w || got.h != tc.h || got.c != tc.src.c || !bytes.Equal(got.pix, want.pix) {
			t.Fatalf("%s: AVX2 differs from the Go passes", name)
		}
		for _, avx := range []bool{true, false} {
			withAVX2(avx, func() { got = fast.resizeView(tc.view, tc.viewRow, tc.w, tc.h, tc.filter, tc.flip) })
			if got.w != tc.w || got.h != tc.h || got.c != tc.src.c || !bytes.Equal(got.pix, want.pix) {
				t.Fatalf("%s, AVX2 %v: the box read in place (rows %d bytes apart) differs from the box copied out", name, avx, tc.viewRow)
			}
		}
		if tc.src.c == 3 && tc.w != tc.src.w {
			simd++
		}
	}
	if simd < 200 {
		t.Errorf("only %d cases ran the AVX2 horizontal pass", simd)
	}
	// And on a few, both equal resize then HFlip (the reference arithmetic).
	for _, tc := range cases[:40] {
		var tmp, dst []uint8
		want := resize(tc.src, tc.w, tc.h, tc.filter, &tmp, &dst)
		if tc.flip {
			HFlip(want)
		}
		if got := fast.resize(tc.src, tc.w, tc.h, tc.filter, tc.flip); !bytes.Equal(got.pix, want.pix) {
			t.Fatalf("%dx%d -> %dx%d %v flip %v: AVX2 differs from resize", tc.src.w, tc.src.h, tc.w, tc.h, tc.filter, tc.flip)
		}
	}
}

// TestResampleAVX2Allocs: no allocation per resize once the tables have grown.
func TestResampleAVX2Allocs(t *testing.T) {
	src := pixels{w: 301, h: 263, c: 3, pix: make([]uint8, 301*263*3)}
	var r resampler
	for _, f := range []Interp{Bilinear, Bicubic} {
		r.resize(src, 224, 224, f, true)
		if a := testing.AllocsPerRun(10, func() { r.resize(src, 224, 224, f, true) }); a != 0 {
			t.Errorf("%v: %v allocations per resize, want 0", f, a)
		}
	}
}

// BenchmarkResampler: one RandomResizedCrop's resampling (265×250 RGB to 224², flipped; and a box
// narrower than the output, 150×170, enlarged), the kernels against the Go passes.
func BenchmarkResampler(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	shrink := pixels{w: 265, h: 250, c: 3, pix: make([]uint8, 265*250*3)}
	enlarge := pixels{w: 150, h: 170, c: 3, pix: make([]uint8, 150*170*3)}
	for _, p := range [][]uint8{shrink.pix, enlarge.pix} {
		for i := range p {
			p[i] = uint8(rng.IntN(256))
		}
	}
	for _, avx := range []bool{true, false} {
		if avx && !resampleAVX2 {
			continue
		}
		for _, f := range []Interp{Bilinear, Bicubic} {
			b.Run(fmt.Sprintf("%v/avx2=%v", f, avx), func(b *testing.B) {
				withAVX2(avx, func() {
					var r resampler
					for b.Loop() {
						r.resize(shrink, 224, 224, f, true)
					}
				})
			})
		}
		b.Run(fmt.Sprintf("enlarge/avx2=%v", avx), func(b *testing.B) {
			withAVX2(avx, func() {
				var r resampler
				for b.Loop() {
					r.resize(enlarge, 224, 224, Bilinear, true)
				}
			})
		})
	}
}

// TestResampleAVX2EveryTapCount sweeps source widths so that the horizontal kernel runs with every
// tap-pair count it takes (1 to hMaxPairs: its straight-line bodies for 1-5 and its loop for the
// rest), for both filters, flipped, against the Go passes.
func TestResampleAVX2EveryTapCount(t *testing.T) {
	if !resampleAVX2 {
		t.Skip("no AVX2 on this machine")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	seen := map[int]bool{}
	var fast, slow resampler
	for _, f := range []Interp{Bilinear, Bicubic} {
		for sw := 3; sw <= 620; sw += 1 + sw/12 {
			const w, h = 37, 5
			pairs := 0
			fast.coeffs(sw, w, f)
			for x := range w {
				pairs = max(pairs, (int(fast.counts[x])+1)/2)
			}
			src := pixels{w: sw, h: 9, c: 3, pix: make([]uint8, sw*9*3)}
			for i := range src.pix {
				src.pix[i] = uint8(rng.IntN(256))
			}
			var got, want pixels
			withAVX2(true, func() { got = fast.resize(src, w, h, f, true) })
			withAVX2(false, func() { want = slow.resize(src, w, h, f, true) })
			if !bytes.Equal(got.pix, want.pix) {
				t.Fatalf("%v, %d -> %d wide (%d tap pairs): AVX2 differs from the Go passes", f, sw, w, pairs)
			}
			seen[pairs] = true
		}
	}
	for p := 1; p <= hMaxPairs; p++ {
		if !seen[p] {
			t.Errorf("no width gave %d tap pairs: %v", p, seen)
		}
	}
}

// TestNormalizeInto: the loader's normalisation gives NormalizeTable's floats bit for bit, for 1, 3
// and 4 channels, per-channel and shared constants, none, and lengths around its 4-pixel steps,
// with and without the AVX2 kernel.
func TestNormalizeInto(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range []int{1, 3, 4} {
		perChannel := make([]float32, 2*c)
		for i := range perChannel {
			perChannel[i] = rng.Float32() + 0.01
		}
		for _, ms := range [][2][]float32{{nil, nil}, {{0.485}, {0.229}}, {perChannel[:c], perChannel[c:]}} {
			table, err := NormalizeTable(ms[0], ms[1], c)
			if err != nil {
				t.Fatal(err)
			}
			norm := newNormalizer(ms[0], ms[1], table, c)
			for _, pixels := range []int{0, 1, 3, 4, 5, 7, 256, 224 * 224} {
				pix := make([]uint8, pixels*c)
				for i := range pix {
					pix[i] = uint8(i / c) // every byte value of every channel at 256 pixels
					if pixels > 256 {
						pix[i] = uint8(rng.IntN(256))
					}
				}
				for _, avx := range []bool{false, true} {
					dst := make([]float32, len(pix)+1)
					dst[len(pix)] = -1
					withAVX2(avx && resampleAVX2, func() { normalizeInto(dst[:len(pix)], pix, norm) })
					for i, v := range pix {
						if want := table[int(v)*c+i%c]; math.Float32bits(dst[i]) != math.Float32bits(want) {
							t.Fatalf("%d channels, mean %v std %v, %d pixels, AVX2 %v: dst[%d] = %g, want table[%d*%d+%d] = %g",
								c, ms[0], ms[1], pixels, avx, i, dst[i], v, c, i%c, want)
						}
					}
					if dst[len(pix)] != -1 {
						t.Fatalf("%d channels, %d pixels, AVX2 %v: wrote past the end", c, pixels, avx)
					}
				}
			}
		}
	}
}

// TestCoeffCache: the resampler's tables, computed (a miss, then cached) and read back from its
// cache (a hit), are resampleCoeffs' for each input size, both filters, two output sizes sharing
// the cache (a size cached for one output is computed for the other), and inputs past the cache's
// range; once the cache is full, new sizes are still computed right and nothing is overwritten.
func TestCoeffCache(t *testing.T) {
	check := func(r *resampler, in, out int, f Interp, pass string) {
		t.Helper()
		ks := r.coeffs(in, out, f)
		starts, weights := resampleCoeffs(in, out, f)
		for o := range out {
			n := int(r.counts[o])
			if int(r.starts[o]) != starts[o] || n != len(weights[o]) || n > ks {
				t.Fatalf("%s: %d -> %d %v, output %d: start %d, %d taps (ks %d), want %d, %d",
					pass, in, out, f, o, r.starts[o], n, ks, starts[o], len(weights[o]))
			}
			for i, w := range weights[o] {
				if r.weights[o*ks+i] != w {
					t.Fatalf("%s: %d -> %d %v, output %d: weight %d = %d, want %d", pass, in, out, f, o, i, r.weights[o*ks+i], w)
				}
			}
		}
	}
	var r resampler
	ins := []int{1, 2, 3, 50, 223, 224, 225, 301, 449, 1000, coeffCacheMaxIn - 1, coeffCacheMaxIn, 5000}
	for _, f := range []Interp{Bilinear, Bicubic} {
		for _, out := range []int{224, 97} {
			for _, in := range ins {
				check(&r, in, out, f, "first")
				check(&r, in, out, f, "again")
			}
		}
	}
	if r.tables.used == 0 {
		t.Fatal("nothing cached")
	}
	if _, ok := r.tables.get(224, 224, Bilinear); !ok {
		t.Error("224 -> 224 bilinear not cached")
	}
	if _, ok := r.tables.get(coeffCacheMaxIn, 224, Bilinear); ok {
		t.Errorf("input %d cached", coeffCacheMaxIn)
	}
	// Fill it: 1000 outputs from 3000+ inputs, bicubic, 15,000 ints a table, until one is refused.
	in := 3000
	for used := -1; used != r.tables.used; in++ {
		used = r.tables.used
		check(&r, in, 1000, Bicubic, "filling")
	}
	used := r.tables.used
	if used < coeffCacheInts-1000*(2+13) {
		t.Fatalf("a table refused with %d of %d ints used", used, coeffCacheInts)
	}
	for i := range 5 {
		check(&r, in+i, 1000, Bicubic, "full")
		check(&r, in+i, 1000, Bicubic, "full, again")
	}
	if r.tables.used != used {
		t.Errorf("full cache grew from %d to %d ints", used, r.tables.used)
	}
	for _, f := range []Interp{Bilinear, Bicubic} {
		for _, in := range ins {
			check(&r, in, 224, f, "after filling")
		}
	}
}

// BenchmarkCoeffs: the tables of a RandomResizedCrop's two passes (box sides 100-449, 224
// outputs), from the cache once it holds every size, against computing them each time.
func BenchmarkCoeffs(b *testing.B) {
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cached=%v", cached), func(b *testing.B) {
			var r resampler
			if !cached {
				r.tables.used = coeffCacheInts // full from the start
			}
			in := 100
			for b.Loop() {
				r.coeffs(in, 224, Bilinear)
				r.coeffs(449-in+100, 224, Bilinear)
				if in++; in == 450 {
					in = 100
				}
			}
		})
	}
}
