package kernels

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"unsafe"
)

// A blocked, packed matrix multiply (GotoBLAS-style) for the pure-Go backend's DotGeneral and
// convolutions, in float32 and float64 (one generic implementation; the verification checks run
// float64): C[b] = A[b]·B[b] over batch b. Operands are packers: a DotGeneral operand addressed through
// offset tables (any layout of batch, cross and contracting axes is read in place, with no transposed
// copy), or a convolution's input read window by window (gemm_conv.go). They are packed into panels of
// mr rows / nr columns, and a micro-kernel (AVX-512 or AVX2+FMA assembly where the CPU has it, NEON on
// arm64, plain Go otherwise) adds one mr×nr tile into C, whose rows may be anywhere (an offset per row).

// gemmKC is the depth of a packed block: a B micro-panel (KC×NR: 8 to 32 KB at 256) stays in L1, the
// packed A block (mc×KC) in L2. Set per CPU in init (gemm_amd64.go): on AMD Zen 4 a B panel streamed
// from its 1 MB L2 costs less than the passes over C that shallower blocks add (a 576-deep convolution
// at 256: three passes over its output), so it is 1024 there.
var gemmKC = 256

const (
	gemmNC = 1024 // Columns of a packed B block (KC×NC: L2/L3), packed once and shared by the workers.

	// gemmSplitKDepth is the least depth of each part when a product deeper than it is tall is split
	// over the workers by K (whatever gemmKC is).
	gemmSplitKDepth = 256

	// The largest tile and packed A block the workers' scratch holds (gemmScratch); every kernel's mr,
	// nr and mc fit (TestGemmKernelsFitScratch).
	gemmMaxMR, gemmMaxNR, gemmMaxMC = 16, 64, 128
)

// gemmKernelOf is a micro-kernel: it adds the mr×nr product of k packed steps (a: k steps of mr values of
// A, b: k steps of nr values of B) into c, row r of the tile at c[rows[r] : rows[r]+nr]. With store set
// it writes the tile instead, without reading c (the first K block of an output that holds nothing yet):
// each value is +0 plus its sum, the bits that clearing c and adding gave (a sum that underflowed to -0
// is written as +0).
type gemmKernelOf[T Float] struct {
	name   string
	mr, nr int
	fn     func(k int, a, b, c []T, rows []int, store bool)
	// direct, where the kernel has it, computes the same tile with A read in place instead of packed:
	// A's row r at step p is data[rowsA[r]+koff[p]] (the caller checks those reads are inside data).
	direct func(k int, data []T, rowsA, koff []int, b, c []T, rows []int, store bool)
	// directB, where the kernel has it, is direct with B read in place too: B's nr values at step p are
	// b[koffB[p]:] (the caller checks those reads are inside b).
	directB func(k int, data []T, rowsA, koff []int, b []T, koffB []int, c []T, rows []int, store bool)
}

// gemmDirectA is an A operand some of whose panels a kernel with a direct form reads in place (a
// DotGeneral operand; a convolution's input, rows whose windows lie inside it), so they are not packed.
type gemmDirectA[T Float] interface {
	// markDirect sets mark[q] for the panels q of w rows from i0 (up to i1) read in place, and reports
	// whether any is.
	markDirect(mark []bool, i0, i1, w int) bool
	// packUnmarked packs like pack (batch b), leaving the marked panels out.
	packUnmarked(dst []T, b, i0, i1, k0, k1, w int, mark []bool)
	// directTables returns what batch b's marked panels are read from: A(b, i, k) = data[rowBase[i]+kOff[k]].
	directTables(b int) (data []T, rowBase, kOff []int)
}

// Float is the element type of a GEMM: float32 (the nets) or float64 (the verification checks).
type Float interface{ float32 | float64 }

type (
	gemmKernel   = gemmKernelOf[float32]
	gemmKernel64 = gemmKernelOf[float64]
)

// mc is the number of rows of a packed A block (about 120 rows of 256: ~120 KB, in L2).
func (kern *gemmKernelOf[T]) mc() int { return max(120/kern.mr, 1) * kern.mr }

// nc is the number of columns of a packed B block: whole panels of nr within gemmNC, so a block's
// padded panels fit the packed-B buffer.
func (kern *gemmKernelOf[T]) nc() int { return max(gemmNC/kern.nr, 1) * kern.nr }

// checkKernelArgs panics (like a slice index) unless an assembly kernel stays inside a, b and c.
func checkKernelArgs[T Float](k, mr, nr int, a, b, c []T, rows []int) {
	_, _, _ = a[k*mr-1], b[k*nr-1], rows[mr-1]
	for _, r := range rows[:mr] {
		_ = c[r : r+nr]
	}
}

// gemmKernelGo4x8 and gemmKernelGo4x8F64 are the portable micro-kernels.
var (
	gemmKernelGo4x8    = &gemmKernel{name: "portable Go", mr: 4, nr: 8, fn: gemmKernelGo[float32]}
	gemmKernelGo4x8F64 = &gemmKernel64{name: "portable Go", mr: 4, nr: 8, fn: gemmKernelGo[float64]}
)

// gemmKernelGoGeneric computes any tile shape in plain Go: the reference the assembly kernels are
// checked against.
func gemmKernelGoGeneric(mr, nr int) *gemmKernel { return gemmKernelGoGenericOf[float32](mr, nr) }

func gemmKernelGoGenericOf[T Float](mr, nr int) *gemmKernelOf[T] {
	return &gemmKernelOf[T]{name: "portable Go (generic)", mr: mr, nr: nr, fn: func(k int, a, b, c []T, rows []int, store bool) {
		acc := make([]T, mr*nr)
		for p := range k {
			bp := b[p*nr : p*nr+nr]
			for r, ar := range a[p*mr : p*mr+mr] {
				row := acc[r*nr : r*nr+nr]
				for j, bv := range bp {
					row[j] += ar * bv
				}
			}
		}
		for r := range mr {
			crow := c[rows[r] : rows[r]+nr]
			for j, v := range acc[r*nr : r*nr+nr] {
				if store {
					var zero T
					crow[j] = zero + v
				} else {
					crow[j] += v
				}
			}
		}
	}}
}

// gemmDefaultKernel is the fastest kernel the CPU runs; set in init (gemm_amd64.go, gemm_arm64.go), and
// overridden by TRAINER_GEMM_KERNEL=go (or avx2 on amd64) for comparisons.
var (
	gemmDefaultKernel   = gemmKernelGo4x8
	gemmDefaultKernel64 = gemmKernelGo4x8F64
)

// gemmNarrowKernel, when set, computes float32 products of at most gemmNarrowMaxN columns (a classifier's
// 10 classes, a convolution's 16 channels) and the small products narrowFits picks: a default kernel
// twice as wide (AVX-512's 32 columns) would spend half its multiplications or more on the zero columns
// of the edge tile.
var gemmNarrowKernel *gemmKernel

const gemmNarrowMaxN = 16

// gemmWideKernel, when set, computes the float32 products that wideColumns takes: a tile half as tall
// and twice as wide as the default's (AVX-512's 7×64 against 14×32 on AMD's cores) reads each value of
// A once per 64 columns instead of 32, and its 7 rows fit the general registers: a direct panel's
// rows are read in place with no per-step reload, and 7 rows cannot overfill an 8-way L1 set. Same
// bits as the default kernel: each output adds its products in the same order.
var gemmWideKernel *gemmKernel

// gemmHalfKernel, when set, computes float32 products of one panel of the default kernel's width (17 to
// 32 columns: a 32-channel convolution) with the wide kernel's 7 rows at that width (AVX-512's 7×32 on
// AMD's cores): the same reads of A as 14×32, with the rows' addresses in registers. Same bits.
var gemmHalfKernel *gemmKernel

// wideColumns reports whether n columns go to gemmWideKernel: whenever 64-column panels pad n no
// further than 32-column ones (n = 96 would multiply 128 columns instead of 96).
func wideColumns(n int) bool { return n > gemmNarrowMaxN && (n+63)/64*64 == (n+31)/32*32 }

// narrowFits reports whether an m×n product takes the narrow kernel instead of the default one (mr×nr
// tiles): at most gemmNarrowMaxN columns, or a small product (attention's 17×17 or 17×64 per head)
// that the narrow tiles cover with fewer padded rows and columns: a 17×17 product is 576 values of 6×16
// tiles against 896 of 14×32 ones. Larger products keep the default kernel, whose edge tiles are a
// small part of them.
func narrowFits(m, n, mr, nr int) bool {
	if n <= gemmNarrowMaxN {
		return true
	}
	if max(m, n) >= gemmNarrowSmall {
		return false
	}
	pad := func(x, w int) int { return (x + w - 1) / w * w }
	return pad(m, gemmNarrowKernel.mr)*pad(n, gemmNarrowKernel.nr) < pad(m, mr)*pad(n, nr)
}

// smallProductKernel is the float32 kernel whose tiles pad a small product (more than gemmNarrowMaxN
// columns, both sides under gemmNarrowSmall) least, nil where none pads it less than the narrow one: a
// head of Swin-T's 49-token windows (49×49, 49×32) is seven whole 7×32 rows against nine 6×16 ones, the
// last with one row, and each 6×16 column panel's edge (one column of 49) ran a whole tile through the
// scratch tile. Every kernel adds the same terms in the same order: same bits.
func smallProductKernel(m, n int) *gemmKernel {
	if n <= gemmNarrowMaxN || max(m, n) >= gemmNarrowSmall || gemmNarrowKernel == nil {
		return nil
	}
	area := func(k *gemmKernel) int { return (m + k.mr - 1) / k.mr * k.mr * ((n + k.nr - 1) / k.nr * k.nr) }
	var best *gemmKernel
	least := area(gemmNarrowKernel)
	for _, k := range []*gemmKernel{gemmHalfKernel, gemmWideKernel} {
		if k != nil && area(k) < least {
			best, least = k, area(k)
		}
	}
	return best
}

// gemmNarrowSmall bounds the rows and columns of the small products narrowFits considers.
const gemmNarrowSmall = 128

// defaultKernelOf is the default kernel for element type T.
func defaultKernelOf[T Float]() *gemmKernelOf[T] {
	var k any = gemmDefaultKernel
	if IsFloat64[T]() {
		k = gemmDefaultKernel64
	}
	return k.(*gemmKernelOf[T])
}

// IsFloat64 reports whether T is float64.
func IsFloat64[T Float]() bool { return unsafe.Sizeof(T(0)) == 8 }

// gemmOperand addresses one operand: element (b, i, k) is data[batchOff[b] + crossOff[i] + kOff[k]],
// where i is a row of A or a column of B and k the contracting index.
type gemmOperandOf[T Float] struct {
	data                     []T
	batchOff, crossOff, kOff []int
}

// gemmPacker packs an operand: rows [i0, i1) (rows of A, columns of B) × contracting indices [k0, k1)
// of batch b into dst as panels of width w: panel q holds, for each k, the w values of rows
// i0+q·w .. i0+q·w+w-1 ([k][w]); rows past i1 are zeros.
type gemmPackerOf[T Float] interface {
	pack(dst []T, b, i0, i1, k0, k1, w int)
}

type (
	gemmOperand = gemmOperandOf[float32]
	gemmPacker  = gemmPackerOf[float32]
	gemmProblem = GemmProblemOf[float32]
)

func (o *gemmOperandOf[T]) pack(dst []T, b, i0, i1, k0, k1, w int) {
	packPanels(dst, o.data, o.batchOff[b], o.crossOff[i0:i1], o.kOff[k0:k1], w)
}

// markDirect implements gemmDirectA: every full panel is read in place (a DotGeneral operand's
// offsets are all inside it).
func (o *gemmOperandOf[T]) markDirect(mark []bool, i0, i1, w int) bool {
	any := false
	for q := range mark {
		mark[q] = i0+q*w+w <= i1
		any = any || mark[q]
	}
	return any
}

// packUnmarked implements gemmDirectA: the panels not marked, packed as pack does.
func (o *gemmOperandOf[T]) packUnmarked(dst []T, b, i0, i1, k0, k1, w int, mark []bool) {
	kl := k1 - k0
	for q := range mark {
		if !mark[q] {
			r0 := i0 + q*w
			packPanels(dst[q*kl*w:], o.data, o.batchOff[b], o.crossOff[r0:min(r0+w, i1)], o.kOff[k0:k1], w)
		}
	}
}

// directTables implements gemmDirectA.
func (o *gemmOperandOf[T]) directTables(b int) ([]T, []int, []int) {
	return o.data[o.batchOff[b]:], o.crossOff, o.kOff
}

// gemmProblem is out[b, i, j] = Σ_k lhs(b, i, k)·rhs(b, j, k). Row i of batch b's output starts at
// b·batchStride + rowOff[i] and its columns are contiguous; by default (nil rowOff, 0 batchStride) out
// is row-major [batch, m, n]. Run overwrites out unless accumulate is set (then the product is added
// to what out holds: several problems writing disjoint rows of one output).
type GemmProblemOf[T Float] struct {
	lhs, rhs       gemmPackerOf[T]
	batch, m, n, k int
	rowOff         []int
	batchStride    int
	accumulate     bool
	threads        int // Goroutines at most; 0: GOMAXPROCS.
	kernel         *gemmKernelOf[T]
	forceSplit     gemmSplit // Tests force a split to cover every path.

	// rowsOnly (without accumulate) writes the product's rows and leaves the rest of out as it is:
	// problems over disjoint rows that cover out between them, none clearing what another wrote.
	rowsOnly bool
}

type gemmSplit int

const (
	splitAuto gemmSplit = iota
	splitNone
	splitBatch
	splitShared // Workers share each packed B block and split its rows and column panels.
	splitK
	splitRows // Each worker multiplies a range of rows by the whole B, packing B itself.
	splitCols // Each worker multiplies all of A by a range of B's columns.
)

// gemmScratch is one worker's packing space.
type gemmScratch[T Float] struct {
	packA, tile []T
	tileRows    []int
	direct      []bool // Per panel of the packed A block: read in place instead (gemmDirectA).
	anyDirect   bool
	// What the direct panels are read from (gemmDirectA.directTables), while anyDirect.
	directData             []T
	directRows, directKOff []int
	// While bDirect, B's full column panels are read in place (readBInPlace): column j at step p is
	// bData[bCross[j]+bKOff[p]]; packed A panels are then read through packRows and packKOff.
	bDirect            bool
	bData              []T
	bCross, bKOff      []int
	packRows, packKOff []int
	// edgeRows is a direct A panel's row table when the panel has fewer than mr rows: its rows, then
	// the last one repeated (read again, its sums left in the scratch tile).
	edgeRows []int
}

func newGemmScratch[T Float]() any {
	return &gemmScratch[T]{packA: make([]T, gemmMaxMC*gemmKC), tile: make([]T, gemmMaxMR*gemmMaxNR), tileRows: make([]int, gemmMaxMR), direct: make([]bool, gemmMaxMC),
		packRows: make([]int, gemmMaxMR), packKOff: make([]int, gemmKC), edgeRows: make([]int, gemmMaxMR)}
}

// packA packs rows [ic, ic+ml) of A over [pc, pcEnd) into s.packA for kern, leaving out the panels the
// kernel reads in place (s.direct); the block serves panels column panels of B.
func (p *GemmProblemOf[T]) packA(s *gemmScratch[T], kern *gemmKernelOf[T], b, ic, ml, pc, pcEnd, panels int) {
	s.anyDirect = false
	if d, ok := p.lhs.(gemmDirectA[T]); ok && kern.direct != nil {
		mark := s.direct[:(ml+kern.mr-1)/kern.mr]
		if s.anyDirect = d.markDirect(mark, ic, ic+ml, kern.mr); s.anyDirect {
			s.directData, s.directRows, s.directKOff = d.directTables(b)
			if panels >= gemmAliasedPackPanels {
				s.anyDirect = false
				for q, m := range mark {
					if m && setConflicts[T](s.directRows[ic+q*kern.mr:min(ic+(q+1)*kern.mr, ic+ml)]) {
						mark[q] = false
					}
					s.anyDirect = s.anyDirect || mark[q]
				}
			}
			d.packUnmarked(s.packA, b, ic, ic+ml, pc, pcEnd, kern.mr, mark)
			return
		}
	}
	p.lhs.pack(s.packA, b, ic, ic+ml, pc, pcEnd, kern.mr)
}

// gemmAliasedPackPanels is the number of B column panels from which a direct A panel whose rows conflict
// in the L1 cache (setConflicts) is packed instead: packing costs a pass over the panel, read once per
// column panel (on Zen 4 at 1024³, rows 4 KB apart: 76 GFLOP/s in place, 95 packed; with 2 column
// panels the packing costs more than the misses).
const gemmAliasedPackPanels = 4

// setConflicts reports whether the rows of a direct A panel (their element offsets) start in more
// distinct lines of one set of the L1 data cache than the set holds (8 ways, 64 sets of 64-byte lines,
// as on current x86 cores): a kernel step reads one value of every row, so those lines would evict each
// other every step (rows a multiple of 4 KB apart: a row-major operand of 1024 or 2048 columns). Rows
// in the same line share it.
func setConflicts[T Float](rows []int) bool {
	const ways, sets, lineBytes = 8, 64, 64
	size := int(unsafe.Sizeof(T(0)))
	var count [sets]uint8
	for i, r := range rows {
		line := r * size / lineBytes
		seen := false
		for _, o := range rows[:i] {
			seen = seen || o*size/lineBytes == line
		}
		if seen {
			continue
		}
		set := line & (sets - 1)
		if count[set]++; count[set] > ways {
			return true
		}
	}
	return false
}

func newPackB[T Float]() any {
	b := make([]T, gemmKC*gemmNC)
	return &b
}

// Pools by element type: [0] float32, [1] float64.
var (
	gemmScratchPools = [2]sync.Pool{{New: newGemmScratch[float32]}, {New: newGemmScratch[float64]}}
	gemmPackBPools   = [2]sync.Pool{{New: newPackB[float32]}, {New: newPackB[float64]}}
)

func poolIndex[T Float]() int {
	if IsFloat64[T]() {
		return 1
	}
	return 0
}

func getScratch[T Float]() *gemmScratch[T] {
	return gemmScratchPools[poolIndex[T]()].Get().(*gemmScratch[T])
}

func putScratch[T Float](s *gemmScratch[T]) { gemmScratchPools[poolIndex[T]()].Put(s) }

func getPackB[T Float]() []T { return *gemmPackBPools[poolIndex[T]()].Get().(*[]T) }

func putPackB[T Float](b []T) { gemmPackBPools[poolIndex[T]()].Put(&b) }

// GemmKernelName names the micro-kernel in use (and the other tiles of its kind, where they are set).
func GemmKernelName() string {
	if gemmWideKernel != nil {
		d := gemmDefaultKernel
		name := fmt.Sprintf("%s %d×%d", d.name, d.mr, d.nr)
		for _, k := range []*gemmKernel{gemmHalfKernel, gemmWideKernel} {
			if k != nil {
				name += fmt.Sprintf(", %d×%d", k.mr, k.nr)
			}
		}
		return name
	}
	return gemmDefaultKernel.name
}

// Run computes the product into out, using up to p.threads goroutines.
func (p *GemmProblemOf[T]) Run(out []T) {
	// Without accumulate the tiles of the first K block are stored instead of added into a cleared out
	// (clearing was a pass over out, and the kernels then read it back). out is still cleared where the
	// stores may not write all of it: no contracting index, or rows placed by rowOff (gaps possible).
	store := !p.accumulate
	if store && p.k == 0 && p.rowsOnly {
		panic("kernels: a rowsOnly GEMM problem with no contracting index writes nothing")
	}
	if store && !p.rowsOnly && (p.k == 0 || p.rowOff != nil || (p.batchStride != 0 && p.batchStride != p.m*p.n) || len(out) != p.batch*p.m*p.n) {
		clear(out)
	}
	kern := p.kernel
	if kern == nil {
		kern = productKernel[T](p.m, p.n)
	}
	threads := p.threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if p.swapWins(out, kern, threads) {
		p.runSwapped(out, threads)
		return
	}
	rowOff := p.rowOff
	if rowOff == nil {
		rowOff = rowMajorOffsets(p.m, p.n)
	}
	bs := p.batchStride
	if bs == 0 {
		bs = p.m * p.n
	}
	split := p.forceSplit
	if split == splitAuto {
		switch {
		case threads == 1 || !WorthSplitting(float64(p.batch*p.m*p.n*p.k)*GemmNsPerMAC):
			split = splitNone
		case p.batch >= threads:
			split = splitBatch
		case (p.n+defaultKernelOf[T]().nr-1)/defaultKernelOf[T]().nr >= gemmAliasedPackPanels*threads:
			// Four column panels or more per worker: each multiplies all of A by its columns of B with no
			// join before the end and no partial sums; A's panels are read in place or packed once per
			// worker (with fewer panels, rows that alias in L1 would be read in place: slow). On Zen 4 at
			// 2 threads this beat sharing B and splitting K on every such product measured (ResNet-50's
			// at batch 8: 32×512×2048 63-78 -> 88-104 GFLOP/s, 128×2304×256 108-127 -> 160, 1024³
			// 166-181 -> 174-197). Counted in the default kernel's panels: the wide one's are twice as
			// wide, and its tiles split the same columns.
			split = splitCols
		case p.k > p.m && p.k >= 2*gemmSplitKDepth && (p.m < threads*kern.mc() || p.k >= 8*p.m):
			// Few row blocks, or a product far deeper than tall: splitting K packs nothing twice and
			// costs a private m×n sum; sharing B would synchronise the workers once per K block. With
			// rows enough for every worker, sharing B is faster (512×1152×128: 110-144 -> 154 GFLOP/s).
			split = splitK
		default:
			split = splitShared
		}
	}
	batchOut := func(b int) []T { return out[b*bs:] }
	switch split {
	case splitNone:
		s := getScratch[T]()
		packB := getPackB[T]()
		for b := range p.batch {
			p.serial(s, packB, kern, b, 0, p.m, 0, p.k, 0, p.n, batchOut(b), rowOff, store)
		}
		putPackB(packB)
		putScratch(s)

	case splitBatch:
		// The caller works too, so a worker the OS is slow to schedule delays nothing.
		ParallelChunks(SplitRange(p.batch, p.batch, 1), min(threads, p.batch), func(b0, b1 int) {
			s := getScratch[T]()
			packB := getPackB[T]()
			for b := b0; b < b1; b++ {
				p.serial(s, packB, kern, b, 0, p.m, 0, p.k, 0, p.n, batchOut(b), rowOff, store)
			}
			putPackB(packB)
			putScratch(s)
		})

	case splitK:
		chunks := min(threads, (p.k+gemmSplitKDepth-1)/gemmSplitKDepth)
		bounds := SplitRange(p.k, chunks, 1)
		mn := p.m * p.n
		partial := make([][]T, chunks)
		defer func() {
			for _, part := range partial {
				putPartial(part)
			}
		}()
		rowMajor := make([]int, p.m)
		for i := range rowMajor {
			rowMajor[i] = i * p.n
		}
		for b := range p.batch {
			c := batchOut(b)
			// The caller takes chunks too: if the OS is slow to run a worker, it does them all.
			ParallelChunks(SplitRange(chunks, chunks, 1), chunks, func(t, _ int) {
				dst, rows, first := c, rowOff, store
				if t > 0 {
					// Each part's first block stores into its own sum (every value written: no clearing).
					if partial[t] == nil {
						partial[t] = getPartial[T](mn)
					}
					dst, rows, first = partial[t], rowMajor, true
				}
				s := getScratch[T]()
				packB := getPackB[T]()
				p.serial(s, packB, kern, b, 0, p.m, bounds[t], bounds[t+1], 0, p.n, dst, rows, first)
				putPackB(packB)
				putScratch(s)
			})
			for _, part := range partial[1:] {
				for i := range p.m {
					crow := c[rowOff[i] : rowOff[i]+p.n]
					for j, v := range part[i*p.n : (i+1)*p.n] {
						crow[j] += v
					}
				}
			}
		}

	case splitShared:
		packB := getPackB[T]()
		for b := range p.batch {
			p.shared(packB, kern, threads, b, batchOut(b), rowOff, store)
		}
		putPackB(packB)

	case splitRows, splitCols:
		// One join per product instead of two per K block: B (or A) is packed by every worker.
		for b := range p.batch {
			c := batchOut(b)
			var bounds []int
			if split == splitRows {
				bounds = SplitRange(p.m, min(threads, (p.m+kern.mr-1)/kern.mr), kern.mr)
			} else {
				bounds = SplitRange(p.n, min(threads, (p.n+kern.nr-1)/kern.nr), kern.nr)
			}
			ParallelChunks(bounds, len(bounds)-1, func(lo, hi int) {
				s := getScratch[T]()
				packB := getPackB[T]()
				if split == splitRows {
					p.serial(s, packB, kern, b, lo, hi, 0, p.k, 0, p.n, c, rowOff, store)
				} else {
					p.serial(s, packB, kern, b, 0, p.m, 0, p.k, lo, hi, c, rowOff, store)
				}
				putPackB(packB)
				putScratch(s)
			})
		}
	}
}

// productKernel is the kernel for an m×n float32 product (the default one for float64): the narrow or
// a 7-row one for the small products they pad least, the 7×32 one for a single 32-wide column panel,
// the 7×64 one where its panels pad no further than 32-wide ones.
func productKernel[T Float](m, n int) *gemmKernelOf[T] {
	kern := defaultKernelOf[T]()
	if IsFloat64[T]() {
		return kern
	}
	if gemmNarrowKernel != nil && narrowFits(m, n, kern.mr, kern.nr) {
		kern = any(gemmNarrowKernel).(*gemmKernelOf[T])
		if small := smallProductKernel(m, n); small != nil {
			kern = any(small).(*gemmKernelOf[T])
		}
	} else if gemmHalfKernel != nil && n <= gemmHalfKernel.nr {
		kern = any(gemmHalfKernel).(*gemmKernelOf[T])
	} else if gemmWideKernel != nil && wideColumns(n) {
		kern = any(gemmWideKernel).(*gemmKernelOf[T])
	}
	return kern
}

// rowMajorOffsets is the row offsets of a row-major m×n output.
func rowMajorOffsets(m, n int) []int {
	rows := make([]int, m)
	for i := range rows {
		rows[i] = i * n
	}
	return rows
}

// paddedArea is the number of values kern's tiles compute for an m×n product.
func paddedArea[T Float](kern *gemmKernelOf[T], m, n int) int {
	return (m + kern.mr - 1) / kern.mr * kern.mr * ((n + kern.nr - 1) / kern.nr * kern.nr)
}

// swapWins reports whether Run computes each product of this small float32 problem (rows, columns and
// depth under gemmNarrowSmall) as its transpose, B·Aᵀ, whose tiles pad it less, each head's result
// transposed into out from L1. Attention's v gradient, [head dim × tokens], is such a product: Swin-T's
// 32×49 is five 7-row tiles by two 32-wide panels (30% of the values computed are padding, six edge
// tiles go through the scratch tile) where 49×32 is seven whole 7×32 tiles; ViT-Tiny's 64×17 is 11
// narrow row tiles by two 16-wide panels against three by four. Only for a plain output (row-major,
// overwritten) that one worker writes a whole head of (no split, or split by batch); a deeper product
// would pack the swapped B, read in place before, at more cost. Swapping the operands changes no bits:
// each output adds the same products, a·b = b·a, in the same order.
func (p *GemmProblemOf[T]) swapWins(out []T, kern *gemmKernelOf[T], threads int) bool {
	if p.kernel != nil || p.forceSplit != splitAuto || IsFloat64[T]() || p.accumulate || p.rowsOnly || p.rowOff != nil ||
		(p.batchStride != 0 && p.batchStride != p.m*p.n) || len(out) != p.batch*p.m*p.n || p.k == 0 ||
		max(p.m, p.n, p.k) >= gemmNarrowSmall {
		return false
	}
	if threads > 1 && WorthSplitting(float64(p.batch*p.m*p.n*p.k)*GemmNsPerMAC) && p.batch < threads {
		return false // Run would split a product: its workers would share heads.
	}
	return paddedArea(productKernel[T](p.n, p.m), p.n, p.m) < paddedArea(kern, p.m, p.n)
}

// runSwapped computes out as swapWins says: per head, the n×m product of B by A into a worker's
// scratch, then transposed into the head's m×n rows of out. Heads are split over the workers when
// Run would split them.
func (p *GemmProblemOf[T]) runSwapped(out []T, threads int) {
	q := *p
	q.lhs, q.rhs, q.m, q.n = p.rhs, p.lhs, p.n, p.m
	kern := productKernel[T](q.m, q.n)
	rowMajor := rowMajorOffsets(q.m, q.n)
	mn := p.m * p.n
	heads := func(b0, b1 int) {
		s := getScratch[T]()
		packB := getPackB[T]()
		tmp := getPartial[T](mn)
		for b := b0; b < b1; b++ {
			q.serial(s, packB, kern, b, 0, q.m, 0, q.k, 0, q.n, tmp, rowMajor, true)
			transposeInto(out[b*mn:(b+1)*mn], tmp, q.m, q.n)
		}
		putPartial(tmp)
		putPackB(packB)
		putScratch(s)
	}
	if threads == 1 || !WorthSplitting(float64(p.batch*p.m*p.n*p.k)*GemmNsPerMAC) {
		heads(0, p.batch)
		return
	}
	ParallelChunks(SplitRange(p.batch, p.batch, 1), min(threads, p.batch), heads)
}

// transposeInto writes the rows×cols row-major src transposed into dst (cols×rows): 8 rows of src at a
// time through the 8×8 transposes, the rest one value at a time.
func transposeInto[T Float](dst, src []T, rows, cols int) {
	_, _ = dst[rows*cols-1], src[rows*cols-1]
	r0 := 0
	if !IsFloat64[T]() {
		var offs [8]int
		for ; r0+8 <= rows; r0 += 8 {
			for i := range offs {
				offs[i] = (r0 + i) * cols
			}
			Transpose8Rows(AsFloat32(dst[r0:]), rows, AsFloat32(src), &offs, cols)
		}
	}
	for r := r0; r < rows; r++ {
		for c, v := range src[r*cols : (r+1)*cols] {
			dst[c*rows+r] = v
		}
	}
}

// partialPools keeps split K's private sums between products, by element type and power of two of
// capacity: each split product took a fresh m×n buffer, which the allocator cleared (its first K block
// stores every value, so a reused buffer needs no clearing).
var partialPools [2][64]sync.Pool

func getPartial[T Float](n int) []T {
	c := bits.Len(uint(max(n, 1) - 1))
	if b, ok := partialPools[poolIndex[T]()][c].Get().(*[]T); ok {
		return (*b)[:n]
	}
	return make([]T, n, 1<<c)
}

func putPartial[T Float](b []T) {
	if cap(b) == 0 {
		return
	}
	b = b[:cap(b)]
	partialPools[poolIndex[T]()][bits.Len(uint(cap(b)))-1].Put(&b)
}

// SplitRange cuts [0, n) into chunks boundaries, each a multiple of align except the last.
func SplitRange(n, chunks, align int) []int {
	bounds := make([]int, chunks+1)
	units := (n + align - 1) / align
	for t := range chunks + 1 {
		bounds[t] = min(n, (units*t/chunks)*align)
	}
	return bounds
}

// kBlocks cuts [k0, k1) into even blocks of at most gemmKC: a 257-deep product is two 129-deep
// blocks, not 256 + 1.
func kBlocks(k0, k1 int) []int {
	n := (k1 - k0 + gemmKC - 1) / gemmKC
	bounds := make([]int, n+1)
	for i := range bounds {
		bounds[i] = k0 + (k1-k0)*i/max(n, 1)
	}
	return bounds
}

// serial adds rows [m0, m1) and columns [n0, n1) of batch b's product, over contracting indices
// [k0, k1), into c; with store the first K block writes them instead (c's values there are not read).
func (p *GemmProblemOf[T]) serial(s *gemmScratch[T], packB []T, kern *gemmKernelOf[T], b, m0, m1, k0, k1, n0, n1 int, c []T, rowOff []int, store bool) {
	mc, nc, nr := kern.mc(), kern.nc(), kern.nr
	var oneBlock [2]int
	kb := oneBlock[:]
	if k1-k0 > 0 && k1-k0 <= gemmKC {
		oneBlock = [2]int{k0, k1} // No allocation per call: a batch of small products calls this per item.
	} else {
		kb = kBlocks(k0, k1)
	}
	for blk := range len(kb) - 1 {
		pc, pcEnd := kb[blk], kb[blk+1]
		kl := pcEnd - pc
		for jc := n0; jc < n1; jc += nc {
			nl := min(nc, n1-jc)
			if s.bDirect = p.readBInPlace(s, packB, kern, b, jc, nl, pc, pcEnd); !s.bDirect {
				p.rhs.pack(packB, b, jc, jc+nl, pc, pcEnd, nr)
			}
			for ic := m0; ic < m1; ic += mc {
				ml := min(mc, m1-ic)
				p.packA(s, kern, b, ic, ml, pc, pcEnd, (nl+nr-1)/nr)
				p.block(s, kern, kl, pc, ic, ml, jc, nl, 0, (nl+nr-1)/nr, packB, c, rowOff, store && blk == 0)
			}
		}
	}
	s.bDirect = false
}

// readBInPlace reports whether kern reads the full column panels of B's block [jc, jc+nl) over
// [pc, pcEnd) in place (a row-major B, whose panels' columns are adjacent in memory: the rows of a
// Linear layer's weight, or of the gradient in its kernel gradient), and if so packs only the partial
// last panel and sets up s for block. Packing such a B copied every value of it once more for products
// of few rows (a transformer's 136 tokens), where each value serves only a few row panels.
func (p *GemmProblemOf[T]) readBInPlace(s *gemmScratch[T], packB []T, kern *gemmKernelOf[T], b, jc, nl, pc, pcEnd int) bool {
	r, ok := p.rhs.(*gemmOperandOf[T])
	nr, mr, kl := kern.nr, kern.mr, pcEnd-pc
	if kern.directB == nil || !ok || nl < nr || p.m > gemmDirectBRows {
		return false
	}
	full := nl / nr
	for q := range full {
		if !isIota(r.crossOff[jc+q*nr : jc+q*nr+nr]) {
			return false
		}
	}
	if full*nr < nl {
		r.pack(packB[full*kl*nr:], b, jc+full*nr, jc+nl, pc, pcEnd, nr)
	}
	s.bData, s.bCross, s.bKOff = r.data[r.batchOff[b]:], r.crossOff, r.kOff[pc:pcEnd]
	for i := range mr {
		s.packRows[i] = i
	}
	for k := range kl {
		s.packKOff[k] = k * mr
	}
	return true
}

// gemmDirectBRows is the most rows of a product whose B readBInPlace reads in place: a B panel read by
// many row panels is packed once (its rows, a multiple of 4 KB apart in a Linear layer's weight, share
// few sets of the L1 cache; a packed panel is contiguous).
const gemmDirectBRows = 256

// shared computes batch b's product with the workers sharing each packed B block: for every K block
// and column block, B is packed once (its panels split among the workers), then the workers take
// (row block, column chunk) items, each packing its rows of A. Short products (fewer row blocks than
// workers) are split by column panels too. With store the first K block writes c instead of adding.
func (p *GemmProblemOf[T]) shared(packB []T, kern *gemmKernelOf[T], threads, b int, c []T, rowOff []int, store bool) {
	nc, nr := kern.nc(), kern.nr
	kb := kBlocks(0, p.k)
	rowBounds := sharedRowBlocks(p.m, kern.mr, kern.mc(), threads)
	icBlocks := len(rowBounds) - 1
	for blk := range len(kb) - 1 {
		pc, pcEnd := kb[blk], kb[blk+1]
		kl := pcEnd - pc
		for jc := 0; jc < p.n; jc += nc {
			nl := min(nc, p.n-jc)
			panels := (nl + nr - 1) / nr
			packChunks := min(threads, panels)
			if kl*nl < 1<<14 {
				packChunks = 1
			}
			pb := SplitRange(panels, packChunks, 1)
			ParallelChunks(pb, packChunks, func(q0, q1 int) {
				p.rhs.pack(packB[q0*kl*nr:], b, jc+q0*nr, min(jc+q1*nr, jc+nl), pc, pcEnd, nr)
			})
			colChunks := 1
			if icBlocks < 2*threads {
				colChunks = min(panels, (2*threads+icBlocks-1)/icBlocks)
			}
			cb := SplitRange(panels, colChunks, 1)
			items := icBlocks * colChunks
			bounds := make([]int, items+1)
			for i := range bounds {
				bounds[i] = i
			}
			ParallelChunks(bounds, min(threads, items), func(lo, hi int) {
				s := getScratch[T]()
				s.bDirect = false
				for it := lo; it < hi; it++ {
					ic := rowBounds[it/colChunks]
					cc := it % colChunks
					ml := rowBounds[it/colChunks+1] - ic
					p.packA(s, kern, b, ic, ml, pc, pcEnd, cb[cc+1]-cb[cc])
					p.block(s, kern, kl, pc, ic, ml, jc, nl, cb[cc], cb[cc+1], packB, c, rowOff, store && blk == 0)
				}
				putScratch(s)
			})
		}
	}
}

// sharedRowBlocks cuts m rows into blocks of at most mc rows (whole panels of mr but the last) for the
// shared split: as many blocks as mc needs, rounded up to a multiple of the workers, with their panels
// spread evenly, so every worker gets the same share (1024 rows as 112-row blocks: 9 full ones and a
// 16-row one, one worker doing five of them while the other did four and the small one).
func sharedRowBlocks(m, mr, mc, threads int) []int {
	panels := (m + mr - 1) / mr
	blocks := (m + mc - 1) / mc
	if r := blocks % threads; blocks > 1 && r != 0 && blocks+threads-r <= panels {
		blocks += threads - r
	}
	return SplitRange(m, blocks, mr)
}

// block runs the micro-kernel over the packed A rows [ic, ic+ml) (contracting indices from pc, kl of
// them) and B column panels [q0, q1) of the column block at jc (nl columns), adding into c (writing,
// with store); panels marked in s.direct are read in place. Edge tiles are stored into the scratch
// tile, then added (or copied) into c.
func (p *GemmProblemOf[T]) block(s *gemmScratch[T], kern *gemmKernelOf[T], kl, pc, ic, ml, jc, nl, q0, q1 int, packB, c []T, rowOff []int, store bool) {
	mr, nr := kern.mr, kern.nr
	var data []T
	var rowBase, koff []int
	if s.anyDirect {
		data, rowBase, koff = s.directData, s.directRows, s.directKOff[pc:pc+kl]
	}
	for q := q0; q < q1; q++ {
		jr := q * nr
		bp := packB[q*kl*nr:][:kl*nr]
		cols := min(nr, nl-jr)
		cq := c[jc+jr:]
		var bq []T // B's panel read in place: full panels while s.bDirect.
		if s.bDirect && cols == nr {
			bq = s.bData[s.bCross[jc+jr]:]
		}
		for ir := 0; ir < ml; ir += mr {
			direct := s.anyDirect && s.direct[ir/mr]
			ap := s.packA[(ir/mr)*kl*mr:][:kl*mr]
			rows := min(mr, ml-ir)
			var rowsA []int // A's rows, where the panel is direct.
			if direct {
				rowsA = rowBase[ic+ir : ic+ir+rows]
				if rows < mr {
					rowsA = edgeRowTable(s.edgeRows[:mr], rowsA)
				}
			}
			if bq != nil {
				ad, ar, ak := ap, s.packRows[:mr], s.packKOff[:kl]
				if direct {
					ad, ar, ak = data, rowsA, koff
				}
				if rows == mr {
					kern.directB(kl, ad, ar, ak, bq, s.bKOff, cq, rowOff[ic+ir:ic+ir+mr], store)
					continue
				}
				tile, tileRows := s.tile[:mr*nr], s.tileRows[:mr]
				for r := range tileRows {
					tileRows[r] = r * nr
				}
				kern.directB(kl, ad, ar, ak, bq, s.bKOff, tile, tileRows, true)
				addTile(cq, rowOff[ic+ir:ic+ir+rows], tile, nr, cols, store)
				continue
			}
			if rows == mr && cols == nr {
				if direct {
					kern.direct(kl, data, rowsA, koff, bp, cq, rowOff[ic+ir:ic+ir+mr], store)
				} else {
					kern.fn(kl, ap, bp, cq, rowOff[ic+ir:ic+ir+mr], store)
				}
				continue
			}
			tile, tileRows := s.tile[:mr*nr], s.tileRows[:mr]
			for r := range tileRows {
				tileRows[r] = r * nr
			}
			if direct {
				kern.direct(kl, data, rowsA, koff, bp, tile, tileRows, true)
			} else {
				kern.fn(kl, ap, bp, tile, tileRows, true)
			}
			addTile(cq, rowOff[ic+ir:ic+ir+rows], tile, nr, cols, store)
		}
	}
}

// edgeRowTable fills dst (a panel's mr entries) with rows, then the last of them repeated: a direct
// panel of fewer rows than the tile reads only real rows, and the tile's extra rows are not stored.
func edgeRowTable(dst, rows []int) []int {
	n := copy(dst, rows)
	for i := n; i < len(dst); i++ {
		dst[i] = rows[n-1]
	}
	return dst
}

// addTile adds the first cols values of each of the tile's rows (nr apart) into c's rows at rowOff, or
// with store copies them: a stored tile value is never -0, so the copy has the bits that adding it to
// a cleared c gave.
func addTile[T Float](c []T, rowOff []int, tile []T, nr, cols int, store bool) {
	for r, off := range rowOff {
		crow := c[off:][:cols]
		if store {
			copy(crow, tile[r*nr:r*nr+cols])
			continue
		}
		for j, v := range tile[r*nr : r*nr+cols] {
			crow[j] += v
		}
	}
}

// packPanels copies the operand's rows (cross indices) × ks into panels of width w: panel q holds, for
// each k, the w values of rows q·w .. q·w+w-1 ([k][w]); rows past the end are zeros.
func packPanels[T Float](dst, data []T, base int, rows, ks []int, w int) {
	kl := len(ks)
	// Where the runs of consecutive offsets in ks end (a kernel's input channels at each of its
	// positions, when a K block spans several): each run goes through the transposes on its own.
	// Found on the first panel that needs them (a panel of adjacent rows is copied without).
	var endsBuf [16]int
	var ends []int
	for q := 0; q*w < len(rows); q++ {
		panel := dst[q*kl*w:][:kl*w]
		valid := min(w, len(rows)-q*w)
		if valid == w && rows[q*w+w-1]-rows[q*w] == w-1 && isIota(rows[q*w:q*w+w]) {
			// The panel's rows are adjacent in memory (a row-major B, or a transposed A): copy w at a time.
			copyRows(panel, data, base+rows[q*w], ks, w)
			continue
		}
		if ends == nil {
			ends = endsBuf[:0]
			for k := 1; k <= kl; k++ {
				if k == kl || ks[k] != ks[k-1]+1 {
					ends = append(ends, k)
					if len(ends)*8 > kl {
						break // Too many runs for the transposes: the loop below goes value by value.
					}
				}
			}
		}
		if len(ends)*8 > kl {
			// Runs too short for the transposes (consecutive contracting indices far apart): value by value.
			offs := rows[q*w : q*w+valid]
			for i, ko := range ks {
				step := panel[i*w : i*w+w]
				for r, o := range offs {
					step[r] = data[base+o+ko]
				}
				clear(step[valid:])
			}
			continue
		}
		k0 := 0
		for _, k1 := range ends {
			packRun(panel[k0*w:k1*w], data, base+ks[k0], rows[q*w:q*w+valid], k1-k0, w)
			k0 = k1
		}
	}
}

// packRun writes panel[k·w + r] = data[base+rows[r]+k] for k < n and the rows given (fewer than w:
// the others are zeros): n consecutive contracting offsets of one panel.
func packRun[T Float](panel, data []T, base int, rows []int, n, w int) {
	valid := len(rows)
	if w < 8 && valid == w {
		// A narrow panel (the AVX2 kernel's 6 rows): one transpose for all of them.
		var offs [8]int
		for i := range w {
			offs[i] = base + rows[i]
		}
		packColumnsNarrow(panel, data, &offs, n, w)
		return
	}
	if valid < w {
		// The rows past the operand's end are zeros: the whole run cleared at once (one call, where a
		// clear of each step's tail was one per step), the rows given written over it.
		clear(panel[:n*w])
	}
	r0 := 0
	if w >= 8 {
		// Eight rows at a time through the 8×8 transpose.
		var offs [8]int
		for ; r0+8 <= valid; r0 += 8 {
			for i := range offs {
				offs[i] = base + rows[r0+i]
			}
			packColumns8(panel[r0:], data, &offs, n, w)
		}
	}
	for r := r0; r < valid; r++ {
		src := data[base+rows[r]:][:n]
		for i, v := range src {
			panel[i*w+r] = v
		}
	}
}

// isIota reports whether ks is ks[0], ks[0]+1, ...; only called when the ends already say so.
func isIota(ks []int) bool {
	for i := 1; i < len(ks); i++ {
		if ks[i] != ks[i-1]+1 {
			return false
		}
	}
	return true
}

// gemmKernelGo is the portable 4×8 micro-kernel: c[rows[r]+j] += Σ_p a[p][r]·b[p][j], with the
// tile's 32 sums in local variables (registers, where the architecture has enough) instead of an
// array in memory. Each sum adds its products in p order, like the other kernels. With store it
// clears the tile's rows first (the same bits as a store of +0 plus the sum).
func gemmKernelGo[T Float](k int, a, b, c []T, rows []int, store bool) {
	const mr, nr = 4, 8
	if store {
		clearTileRows(c, rows[:mr], nr)
	}
	var c00, c01, c02, c03, c04, c05, c06, c07, c10, c11, c12, c13, c14, c15, c16, c17, c20, c21, c22, c23, c24, c25, c26, c27, c30, c31, c32, c33, c34, c35, c36, c37 T
	a, b = a[:k*mr], b[:k*nr]
	for p := range k {
		ap := a[p*mr : p*mr+mr : p*mr+mr]
		bp := b[p*nr : p*nr+nr : p*nr+nr]
		a0, a1, a2, a3 := ap[0], ap[1], ap[2], ap[3]
		b0, b1, b2, b3, b4, b5, b6, b7 := bp[0], bp[1], bp[2], bp[3], bp[4], bp[5], bp[6], bp[7]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c04 += a0 * b4
		c05 += a0 * b5
		c06 += a0 * b6
		c07 += a0 * b7
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c14 += a1 * b4
		c15 += a1 * b5
		c16 += a1 * b6
		c17 += a1 * b7
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c24 += a2 * b4
		c25 += a2 * b5
		c26 += a2 * b6
		c27 += a2 * b7
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
		c34 += a3 * b4
		c35 += a3 * b5
		c36 += a3 * b6
		c37 += a3 * b7
	}
	row0 := c[rows[0] : rows[0]+nr : rows[0]+nr]
	row0[0] += c00
	row0[1] += c01
	row0[2] += c02
	row0[3] += c03
	row0[4] += c04
	row0[5] += c05
	row0[6] += c06
	row0[7] += c07
	row1 := c[rows[1] : rows[1]+nr : rows[1]+nr]
	row1[0] += c10
	row1[1] += c11
	row1[2] += c12
	row1[3] += c13
	row1[4] += c14
	row1[5] += c15
	row1[6] += c16
	row1[7] += c17
	row2 := c[rows[2] : rows[2]+nr : rows[2]+nr]
	row2[0] += c20
	row2[1] += c21
	row2[2] += c22
	row2[3] += c23
	row2[4] += c24
	row2[5] += c25
	row2[6] += c26
	row2[7] += c27
	row3 := c[rows[3] : rows[3]+nr : rows[3]+nr]
	row3[0] += c30
	row3[1] += c31
	row3[2] += c32
	row3[3] += c33
	row3[4] += c34
	row3[5] += c35
	row3[6] += c36
	row3[7] += c37
}

// clearTileRows zeroes the nr values of each tile row of c: a store for the kernels that only add.
func clearTileRows[T Float](c []T, rows []int, nr int) {
	for _, r := range rows {
		clear(c[r : r+nr])
	}
}

// axisOffsets enumerates, row-major over axes (in the given order), the flat offsets of the sub-tensor
// indices of a tensor with the given row-major strides.
func axisOffsets(dims, strides, axes []int) []int {
	size := 1
	for _, a := range axes {
		size *= dims[a]
	}
	offs := make([]int, size)
	idx := make([]int, len(axes))
	off := 0
	for i := range offs {
		offs[i] = off
		for j := len(axes) - 1; j >= 0; j-- {
			a := axes[j]
			idx[j]++
			off += strides[a]
			if idx[j] < dims[a] {
				break
			}
			off -= idx[j] * strides[a]
			idx[j] = 0
		}
	}
	return offs
}

// RowMajorStrides returns the element strides of a row-major tensor.
func RowMajorStrides(dims []int) []int {
	strides := make([]int, len(dims))
	s := 1
	for i := len(dims) - 1; i >= 0; i-- {
		strides[i] = s
		s *= dims[i]
	}
	return strides
}

// newGemmOperand builds the offset tables of a DotGeneral operand with the given dims; cross axes are
// the ones neither batch nor contracting, in axis order (DotGeneral's output order). The tables depend
// on the dims and axes alone and are only read, so they are kept per layout (operandTables).
func newGemmOperand[T Float](data []T, dims, contracting, batch []int) *gemmOperandOf[T] {
	t := operandTablesOf(dims, contracting, batch)
	return &gemmOperandOf[T]{data: data, batchOff: t.batchOff, crossOff: t.crossOff, kOff: t.kOff}
}

// operandTables are a DotGeneral operand's offset tables: building them took about 6% of a linear
// net's 0.2-ms step (a 784-entry table per product, allocated and filled on every call).
type operandTables struct {
	batchOff, crossOff, kOff []int
}

// operandTableCache holds the tables of up to maxOperandTables layouts (a net has a few dozen; the
// bound keeps a process that sees endless shapes from growing), keyed by the layout's varint bytes.
var operandTableCache = struct {
	sync.RWMutex
	m map[string]operandTables
}{m: map[string]operandTables{}}

const maxOperandTables = 4096

func operandTablesOf(dims, contracting, batch []int) operandTables {
	var buf [128]byte
	key := buf[:0]
	for _, list := range [][]int{dims, contracting, batch} {
		key = binary.AppendUvarint(key, uint64(len(list)))
		for _, v := range list {
			key = binary.AppendUvarint(key, uint64(v))
		}
	}
	operandTableCache.RLock()
	t, ok := operandTableCache.m[string(key)] // no allocation for the lookup
	operandTableCache.RUnlock()
	if ok {
		return t
	}
	kind := make([]int, len(dims))
	for _, a := range contracting {
		kind[a] = 1
	}
	for _, a := range batch {
		kind[a] = 2
	}
	var cross []int
	for a, k := range kind {
		if k == 0 {
			cross = append(cross, a)
		}
	}
	strides := RowMajorStrides(dims)
	t = operandTables{batchOff: axisOffsets(dims, strides, batch), crossOff: axisOffsets(dims, strides, cross),
		kOff: axisOffsets(dims, strides, contracting)}
	operandTableCache.Lock()
	if len(operandTableCache.m) < maxOperandTables {
		operandTableCache.m[string(key)] = t
	}
	operandTableCache.Unlock()
	return t
}

// AsFloat32 reinterprets a float32 slice of the generic code (callers check IsFloat64 first).
func AsFloat32[T Float](s []T) []float32 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&s[0])), len(s))
}

// NewDotProblem is the GEMM of a DotGeneral with these operands (flat row-major data and dims, the
// contracting and batch axes of each) and output dims [batch, m, n]; ok is false if the operands'
// axes do not make those sizes.
func NewDotProblem[T Float](lhs, rhs []T, lhsDims, rhsDims, lhsContracting, lhsBatch, rhsContracting, rhsBatch []int, batch, m, n, k int) (*GemmProblemOf[T], bool) {
	l := newGemmOperand(lhs, lhsDims, lhsContracting, lhsBatch)
	r := newGemmOperand(rhs, rhsDims, rhsContracting, rhsBatch)
	if len(l.crossOff) != m || len(r.crossOff) != n || len(l.kOff) != k || len(r.kOff) != k ||
		len(l.batchOff) != batch || len(r.batchOff) != batch {
		return nil, false
	}
	return &GemmProblemOf[T]{lhs: l, rhs: r, batch: batch, m: m, n: n, k: k}, true
}
