package pjrt

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// A blocked, packed float32 matrix multiply (GotoBLAS-style) for the pure-Go backend's DotGeneral:
// C[b] = A[b]·B[b] over batch b, with A [M, K] and B [K, N] addressed through offset tables, so any
// DotGeneral layout (batch, cross and contracting axes in any order) is read in place, with no
// transposed copy. Operands are packed into panels of gemmMR rows / gemmNR columns and a micro-kernel
// (AVX2+FMA assembly where the CPU has it, plain Go otherwise) computes one gemmMR×gemmNR tile.

const (
	gemmMR = 6    // Micro-tile rows: 6×16 uses 12 of the 16 AVX2 registers as accumulators.
	gemmNR = 16   // Micro-tile columns: two 8-float vectors.
	gemmKC = 256  // Depth of a packed block: an A micro-panel (6 KB) and a B micro-panel (16 KB) stay in L1.
	gemmMC = 96   // Rows of a packed A block (96 KB, in L2).
	gemmNC = 1024 // Columns of a packed B block.
)

// gemmOperand addresses one operand: element (b, i, k) is data[batchOff[b] + crossOff[i] + kOff[k]],
// where i is a row of A or a column of B and k the contracting index.
type gemmOperand struct {
	data                     []float32
	batchOff, crossOff, kOff []int
}

// gemmProblem is out[b, i, j] = Σ_k lhs(b, i, k)·rhs(b, j, k), out row-major [batch, m, n].
type gemmProblem struct {
	lhs, rhs       gemmOperand
	batch, m, n, k int
	threads        int
	kernel         func(k int, a, b []float32, tile *[gemmMR * gemmNR]float32)
	forceSplit     gemmSplit // Tests force a split to cover every path.
}

type gemmSplit int

const (
	splitAuto gemmSplit = iota
	splitNone
	splitBatch
	splitM
	splitK
)

// gemmScratch is one worker's packing space.
type gemmScratch struct {
	packA, packB []float32
	tile         [gemmMR * gemmNR]float32
}

var gemmScratchPool = sync.Pool{New: func() any {
	return &gemmScratch{packA: make([]float32, gemmMC*gemmKC), packB: make([]float32, gemmKC*gemmNC)}
}}

// gemmMicroKernel computes tile = Σ_p a[p·MR + r]·b[p·NR + j] over k packed steps; set per CPU in init.
var gemmMicroKernel = gemmKernelGo

// gemmKernelName names the micro-kernel in use.
func gemmKernelName() string {
	if hasAVX2FMA {
		return "AVX2+FMA"
	}
	return "portable Go"
}

// run computes the product into out (len batch·m·n), using up to p.threads goroutines.
func (p *gemmProblem) run(out []float32) {
	clear(out)
	threads := p.threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	mn := p.m * p.n
	split := p.forceSplit
	if split == splitAuto {
		switch {
		case threads == 1 || p.batch*mn*p.k < 1<<15:
			split = splitNone
		case p.batch >= threads:
			split = splitBatch
		case p.k > p.m && p.k >= 2*gemmKC:
			// Splitting K repacks nothing twice and costs a private m×n sum; splitting M would repack B
			// (n×k) per chunk.
			split = splitK
		default:
			split = splitM
		}
	}
	switch split {
	case splitNone:
		s := gemmScratchPool.Get().(*gemmScratch)
		for b := range p.batch {
			p.serial(s, b, 0, p.m, 0, p.k, out[b*mn:(b+1)*mn])
		}
		gemmScratchPool.Put(s)

	case splitBatch:
		var next atomic.Int64
		parallel(min(threads, p.batch), func() {
			s := gemmScratchPool.Get().(*gemmScratch)
			for b := int(next.Add(1) - 1); b < p.batch; b = int(next.Add(1) - 1) {
				p.serial(s, b, 0, p.m, 0, p.k, out[b*mn:(b+1)*mn])
			}
			gemmScratchPool.Put(s)
		})

	case splitK:
		chunks := min(threads, (p.k+gemmKC-1)/gemmKC)
		bounds := splitRange(p.k, chunks, 1)
		partial := make([][]float32, chunks)
		for b := range p.batch {
			c := out[b*mn : (b+1)*mn]
			var wg sync.WaitGroup
			for t := range chunks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					dst := c
					if t > 0 {
						if partial[t] == nil {
							partial[t] = make([]float32, mn)
						} else {
							clear(partial[t])
						}
						dst = partial[t]
					}
					s := gemmScratchPool.Get().(*gemmScratch)
					p.serial(s, b, 0, p.m, bounds[t], bounds[t+1], dst)
					gemmScratchPool.Put(s)
				}()
			}
			wg.Wait()
			for _, part := range partial[1:] {
				for i, v := range part {
					c[i] += v
				}
			}
		}

	case splitM:
		// Contiguous row chunks taken dynamically (the machine is shared: static halves finish unevenly).
		// Each chunk repacks B, so only ask for more chunks than threads when the rows are plentiful.
		chunks := threads
		if p.m >= 8*threads*gemmMC {
			chunks = 4 * threads
		}
		chunks = min(chunks, (p.m+gemmMR-1)/gemmMR)
		bounds := splitRange(p.m, chunks, gemmMR)
		for b := range p.batch {
			c := out[b*mn : (b+1)*mn]
			var next atomic.Int64
			parallel(min(threads, chunks), func() {
				s := gemmScratchPool.Get().(*gemmScratch)
				for t := int(next.Add(1) - 1); t < chunks; t = int(next.Add(1) - 1) {
					p.serial(s, b, bounds[t], bounds[t+1], 0, p.k, c)
				}
				gemmScratchPool.Put(s)
			})
		}
	}
}

// parallel runs fn on n goroutines and waits for them.
func parallel(n int, fn func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	wg.Wait()
}

// splitRange cuts [0, n) into chunks boundaries, each a multiple of align except the last.
func splitRange(n, chunks, align int) []int {
	bounds := make([]int, chunks+1)
	units := (n + align - 1) / align
	for t := range chunks + 1 {
		bounds[t] = min(n, (units*t/chunks)*align)
	}
	return bounds
}

// serial adds rows [m0, m1) of batch b's product, over contracting indices [k0, k1), into c ([m, n]).
func (p *gemmProblem) serial(s *gemmScratch, b, m0, m1, k0, k1 int, c []float32) {
	lhs, rhs := &p.lhs, &p.rhs
	aBase, bBase := lhs.batchOff[b], rhs.batchOff[b]
	n := p.n
	kernel := p.kernel
	if kernel == nil {
		kernel = gemmMicroKernel
	}
	// Even K blocks: a 257-deep product is two 129-deep blocks, not 256 + 1.
	kBlocks := (k1 - k0 + gemmKC - 1) / gemmKC
	for kb := range kBlocks {
		pc, pcEnd := k0+(k1-k0)*kb/kBlocks, k0+(k1-k0)*(kb+1)/kBlocks
		kl := pcEnd - pc
		for jc := 0; jc < n; jc += gemmNC {
			nl := min(gemmNC, n-jc)
			packPanels(s.packB, rhs.data, bBase, rhs.crossOff[jc:jc+nl], rhs.kOff[pc:pcEnd], gemmNR)
			for ic := m0; ic < m1; ic += gemmMC {
				ml := min(gemmMC, m1-ic)
				packPanels(s.packA, lhs.data, aBase, lhs.crossOff[ic:ic+ml], lhs.kOff[pc:pcEnd], gemmMR)
				for jr := 0; jr < nl; jr += gemmNR {
					bp := s.packB[(jr/gemmNR)*kl*gemmNR:][:kl*gemmNR]
					cols := min(gemmNR, nl-jr)
					for ir := 0; ir < ml; ir += gemmMR {
						ap := s.packA[(ir/gemmMR)*kl*gemmMR:][:kl*gemmMR]
						kernel(kl, ap, bp, &s.tile)
						rows := min(gemmMR, ml-ir)
						for r := range rows {
							crow := c[(ic+ir+r)*n+jc+jr:][:cols]
							trow := s.tile[r*gemmNR:][:cols]
							for j := range crow {
								crow[j] += trow[j]
							}
						}
					}
				}
			}
		}
	}
}

// packPanels copies the operand's rows (cross indices) × ks into panels of width w: panel q holds, for
// each k, the w values of rows q·w .. q·w+w-1 ([k][w]); rows past the end are zeros.
func packPanels(dst, data []float32, base int, rows, ks []int, w int) {
	kl := len(ks)
	contiguous := kl > 0 && ks[kl-1]-ks[0] == kl-1 && isIota(ks)
	for q := 0; q*w < len(rows); q++ {
		panel := dst[q*kl*w:][:kl*w]
		valid := min(w, len(rows)-q*w)
		if valid == w && rows[q*w+w-1]-rows[q*w] == w-1 && isIota(rows[q*w:q*w+w]) {
			// The panel's rows are adjacent in memory (a row-major B, or a transposed A): copy w at a time.
			src := data[base+rows[q*w]:]
			for i, ko := range ks {
				copy(panel[i*w:i*w+w], src[ko:ko+w])
			}
			continue
		}
		for r := range w {
			if r >= valid {
				for i := r; i < len(panel); i += w {
					panel[i] = 0
				}
				continue
			}
			rowBase := base + rows[q*w+r]
			if contiguous {
				src := data[rowBase+ks[0]:][:kl]
				for i, v := range src {
					panel[i*w+r] = v
				}
				continue
			}
			for i, ko := range ks {
				panel[i*w+r] = data[rowBase+ko]
			}
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

// gemmKernelGo is the portable micro-kernel: tile[r][j] = Σ_p a[p][r]·b[p][j].
func gemmKernelGo(k int, a, b []float32, tile *[gemmMR * gemmNR]float32) {
	var acc [gemmMR * gemmNR]float32
	a, b = a[:k*gemmMR], b[:k*gemmNR]
	for p := range k {
		bp := b[p*gemmNR : p*gemmNR+gemmNR]
		ap := a[p*gemmMR : p*gemmMR+gemmMR]
		for r, ar := range ap {
			row := acc[r*gemmNR : r*gemmNR+gemmNR]
			for j, bv := range bp {
				row[j] += ar * bv
			}
		}
	}
	*tile = acc
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

// rowMajorStrides returns the element strides of a row-major tensor.
func rowMajorStrides(dims []int) []int {
	strides := make([]int, len(dims))
	s := 1
	for i := len(dims) - 1; i >= 0; i-- {
		strides[i] = s
		s *= dims[i]
	}
	return strides
}

// newGemmOperand builds the offset tables of a DotGeneral operand with the given dims; cross axes are
// the ones neither batch nor contracting, in axis order (DotGeneral's output order).
func newGemmOperand(data []float32, dims, contracting, batch []int) gemmOperand {
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
	strides := rowMajorStrides(dims)
	return gemmOperand{
		data:     data,
		batchOff: axisOffsets(dims, strides, batch),
		crossOff: axisOffsets(dims, strides, cross),
		kOff:     axisOffsets(dims, strides, contracting),
	}
}
