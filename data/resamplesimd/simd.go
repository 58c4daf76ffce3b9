// Package resamplesimd holds the AVX2 kernels of package data's Pillow-exact resampler and of its
// loader's normalisation (Normalize), apart from data so that a cgo file in data (which cannot sit
// beside Go assembly) stays possible. GODEBUG=cpu.avx2=off turns them off (the Go paths run).
//
// The kernels do Pillow's arithmetic exactly: int32 sums of uint8 pixels times 22-bit fixed-point
// weights, plus the rounding bias 2²¹, shifted right by 22 and clipped to 0..255. VPMADDWD
// multiplies 16-bit words, so each weight k is split as hi·2¹⁵ + lo with lo in [0, 2¹⁵) and hi in
// [-128, 128] (SplitWeights): Σ p·k = Σ p·lo + 2¹⁵·Σ p·hi, both sums exact in int32 (and int32
// wrap-around cannot change a total that fits, as Pillow's own does). The caller's tables put every
// output's weights where the kernels want them, so that the kernels have no per-pixel branches.
package resamplesimd

import (
	"fmt"
	"math"
	"unsafe"
)

// SplitWeights returns the dwords (lo, hi) that VPMADDWD multiplies a word pair of pixels (p0, p1)
// by to get p0·k0 + p1·k1 as lo-sum + hi-sum·2¹⁵: words lo0 = k0 mod 2¹⁵, lo1 = k1 mod 2¹⁵ and
// hi0 = k0 >> 15, hi1 = k1 >> 15 (arithmetic). |k| <= 2²² (Pillow's weights).
func SplitWeights(k0, k1 int32) (lo, hi int32) {
	lo = k0&0x7fff | (k1&0x7fff)<<16
	hi = int32(uint32(uint16(k0>>15)) | uint32(k1>>15)<<16)
	return lo, hi
}

// Horizontal resamples rows RGB rows of src (srcStride bytes apart) into dst (dstStride apart), 8
// output pixels (a group) at a time: groups of them a row, each from pairs tap pairs (2·pairs taps).
// The 8 pixels of a group are computed as 4 ymm registers whose 128-bit lanes are pixels (j, j+4),
// j = 0..3, a lane holding 3 channels × 2 taps as word pairs gathered by VPSHUFB from a 16-byte load
// at the pixel's input (4 taps a load). Tables, per group: offs, 8 input byte offsets in the order
// of pixels 0, 4, 1, 5, 2, 6, 3, 7; wts, for each of the 4 registers in turn and each tap pair, 8
// lo dwords then 8 hi dwords (SplitWeights; 4 for lane 0, then 4 for lane 1). Taps past a pixel's
// own count have zero weights. Each output row gets 24·groups bytes, plus 4 bytes of junk after
// them; each input row is read 16 bytes at offset + 12·m for m < ⌈pairs/2⌉. Bounds are checked
// (a panic, not a stray write).
func Horizontal(dst []byte, dstStride int, src []byte, srcStride, rows int, offs, wts []int32, groups, pairs int) {
	if rows < 1 || groups < 1 || pairs < 1 {
		return
	}
	maxOff := int32(-1)
	minOff := int32(0)
	for _, o := range offs[:groups*8] {
		maxOff, minOff = max(maxOff, o), min(minOff, o)
	}
	reads := (rows-1)*srcStride + int(maxOff) + 12*((pairs+1)/2-1) + 16
	writes := (rows-1)*dstStride + 24*groups + 4
	if !available || minOff < 0 || reads > len(src) || writes > len(dst) || len(wts) < groups*4*pairs*16 ||
		srcStride < 0 || dstStride < 24*groups+4 {
		panic(fmt.Sprintf("resamplesimd: Horizontal: %d rows of %d groups, %d pairs: reads %d of %d bytes, writes %d of %d, %d weights (AVX2 %v)",
			rows, groups, pairs, reads, len(src), writes, len(dst), len(wts), available))
	}
	if vnni {
		horizontalVNNI(&dst[0], dstStride, &src[0], srcStride, rows, &offs[0], &wts[0], groups, pairs)
		return
	}
	horizontalAVX2(&dst[0], dstStride, &src[0], srcStride, rows, &offs[0], &wts[0], groups, pairs)
}

// Pair is one step of Vertical: the source rows at byte offsets A and B and their weights, split
// (SplitWeights). An odd last tap is a Pair with B = A and zero weights for B.
type Pair struct {
	A, B   int64
	Lo, Hi int32
}

// Vertical writes one output row of the vertical pass, len(dst) >= 32 bytes: dst[i] = Pillow's
// clip of Σ over pairs of src[A+i]·k_A + src[B+i]·k_B, 32 bytes at a time (the last 32 overlapping
// when len(dst) is not a multiple of 32). Bounds are checked.
func Vertical(dst, src []byte, pairs []Pair) {
	n := len(dst)
	if !available || n < 32 || len(pairs) == 0 {
		panic(fmt.Sprintf("resamplesimd: Vertical: %d bytes, %d pairs (AVX2 %v)", n, len(pairs), available))
	}
	for _, p := range pairs {
		if p.A < 0 || p.B < 0 || p.A+int64(n) > int64(len(src)) || p.B+int64(n) > int64(len(src)) {
			panic(fmt.Sprintf("resamplesimd: Vertical: rows at %d, %d of %d bytes outside the %d-byte source", p.A, p.B, n, len(src)))
		}
	}
	if vnni {
		verticalVNNI(&dst[0], n, &src[0], &pairs[0], len(pairs))
		return
	}
	verticalAVX2(&dst[0], n, &src[0], &pairs[0], len(pairs))
}

// Available reports whether the kernels run on this machine (amd64 with AVX2).
func Available() bool { return available }

// Normalizer is Normalize's arithmetic for one (mean, std), prepared once: the kernels' per-lane
// constants for each start channel, and which kernel gives Go's floats.
type Normalizer struct {
	c         int
	mean, std [3]float32
	// ms[k]: for a kernel run starting at channel k, the 24 means, 24 stds and 24 reciprocals
	// 1/std of its three registers' lanes.
	ms  [3][72]float32
	fma bool // normalizeFMA's floats are Go's for every byte of every channel
}

// NewNormalizer prepares Normalize's arithmetic for c = len(mean) = len(std) channels (1 or 3); ok
// is false, and Apply unusable, for other counts or without AVX2. With FMA it runs the
// division-free kernel over every byte value of every channel and keeps it only when each float
// equals Go's (v/255 - mean)/std bit for bit; else, and without FMA, the dividing kernel runs.
func NewNormalizer(mean, std []float32) (n *Normalizer, ok bool) {
	c := len(mean)
	if !available || (c != 1 && c != 3) || len(std) != c {
		return nil, false
	}
	n = &Normalizer{c: c}
	copy(n.mean[:], mean)
	copy(n.std[:], std)
	for k := range c {
		for i := range 24 {
			ch := (k + i) % c
			n.ms[k][i], n.ms[k][24+i], n.ms[k][48+i] = mean[ch], std[ch], 1/std[ch]
		}
	}
	if fmaAvailable {
		n.fma = n.fmaExact()
	}
	return n, true
}

// fmaExact runs normalizeFMA over 768 values, every byte value of every channel (its floats depend
// on nothing else), and compares them with Go's division.
func (n *Normalizer) fmaExact() bool {
	const size = 768 // a multiple of 24 and of 256·c
	var pix [size]byte
	for i := range pix {
		pix[i] = byte(i / n.c)
	}
	var buf [size + 8]float32
	dst := aligned32(buf[:])[:size]
	normalizeFMA(&dst[0], &pix[0], size, &n.ms[0][0])
	for i, v := range pix {
		want := (float32(v)/255 - n.mean[i%n.c]) / n.std[i%n.c]
		if math.Float32bits(dst[i]) != math.Float32bits(want) {
			return false
		}
	}
	return true
}

// aligned32 is buf from its first 32-byte aligned float (buf at least 4-byte aligned, 8 floats longer
// than needed).
func aligned32(buf []float32) []float32 {
	return buf[int((32-uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%32)%32/4):]
}

// FMA reports whether Apply runs the division-free kernel.
func (n *Normalizer) FMA() bool { return n.fma }

// Apply writes (float32(pix[i])/255 - mean[ch])/std[ch] into dst[i], channel ch = i mod c, each
// operation rounded to float32 in that order: the loader's normalisation of a resampled example
// into its batch, the floats of package data's NormalizeTable bit for bit. The kernels do 8 values
// a step (a table lookup would need VPGATHERDD, which takes twice as long): the two divisions
// replaced by multiplications and fused corrections where NewNormalizer found that exact (twice
// as fast: a VDIVPS takes several cycles), else divisions (IEEE division and subtraction are
// exactly rounded, vectors or not). Both store with VMOVNTPS, skipping the read of the batch's cache
// lines before writing them (a batch is far larger than the caches). The first few values, up to
// dst's 32-byte alignment, and the last < 24 are done in Go. len(dst) >= len(pix).
func (n *Normalizer) Apply(dst []float32, pix []byte) {
	c := n.c
	dst = dst[:len(pix)]
	// Head: to a 32-byte boundary (dst is at least 4-byte aligned).
	head := min(int((32-uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%32)%32/4), len(pix))
	for i := range head {
		dst[i] = (float32(pix[i])/255 - n.mean[i%c]) / n.std[i%c]
	}
	body := (len(pix) - head) / 24 * 24
	if body > 0 {
		// Each register's 8 values start at channel (head + 8k) mod c.
		ms := &n.ms[head%c]
		if n.fma {
			normalizeFMA(&dst[head], &pix[head], body, &ms[0])
		} else {
			normalizeAVX2(&dst[head], &pix[head], body, &ms[0])
		}
	}
	for i := head + body; i < len(pix); i++ {
		dst[i] = (float32(pix[i])/255 - n.mean[i%c]) / n.std[i%c]
	}
}
