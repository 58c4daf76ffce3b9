package data

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// LoaderOptions configures a Loader.
type LoaderOptions struct {
	BatchSize int  // examples per batch (per replica), >= 1
	Shuffle   bool // permute the examples each epoch; false keeps the source order
	Seed      uint64
	// DropLast drops the last partial batch (training). Without it (eval) the last batch has
	// Size < BatchSize and is padded with zeros, so shapes stay static.
	DropLast bool
	// Mean and Std normalise pixels after scaling them to [0,1]: (x/255 - Mean[c]) / Std[c]. Each holds
	// one value for all channels or one per channel; both empty means x/255.
	Mean, Std []float32
	// Uint8 hands the batches over as the transformed uint8 pixels (Batch.Pixels, HWC) instead of
	// normalised floats (Batch.Images is then nil): the consumer normalises, e.g. in the step graph
	// with NormalizeTable's values, and sends a quarter of the bytes to the device. Mean and Std are
	// still checked. Refused with random erasing and mixup/cutmix, which work on the normalised floats.
	Uint8 bool
	// Prefetch is how many batches an Iterator keeps decoded ahead of the consumer; 0 means 2.
	Prefetch int
	// Workers is how many goroutines an Iterator decodes examples with; 0 means runtime.NumCPU().
	Workers int
	// Replica of Replicas: each global batch is BatchSize*Replicas consecutive examples of the epoch's
	// order, and this loader yields rows [Replica*BatchSize, (Replica+1)*BatchSize) of it, so replicas
	// (and hosts, numbered globally) never overlap. Replicas 0 means 1.
	Replica, Replicas int
	// Transform decodes and resizes each example to Size×Size (with the training augmentation when
	// Train is set). Nil uses the stored pixels as they are: the source must then have a FixedShape.
	Transform *Transform
	// Mixup, when set, mixes each batch once it is decoded and gives it soft Targets; its generator
	// is seeded by (Seed, epoch, step, Replica).
	Mixup *Mixup
	// MaxImagePixels refuses an encoded image whose header declares more pixels (width × height),
	// before decoding it: a bad record. 0 means DefaultMaxImagePixels.
	MaxImagePixels int64
	// SkipBadRecords skips a bad record (ErrBadRecord: shard bytes failing their CRC-32C, an image
	// that does not decode or is above MaxImagePixels) instead of ending the iteration with its error.
	// In training (DropLast) its row takes the next good example of the epoch's order, with the row's
	// own augmentation draws, so batches stay full and a resumed run reads the same; in eval it is
	// left out of its batch (Size shrinks), so no image counts twice. Skips are counted
	// (Batch.Skipped, Loader.Skipped); more than maxBadInARow in a row still end the iteration.
	SkipBadRecords bool
	// Repeats > 1 is repeated augmentation (timm's RepeatAugSampler): the epoch visits the first N
	// entries of the shuffled order with each example repeated Repeats times in a row, dealt
	// round-robin over the replicas, so the copies of an image go to different replicas (or, with one
	// replica, to consecutive rows) and each gets its own augmentation; an epoch still has N rows.
	Repeats int
}

// Batch is one batch of decoded examples. Its slices always have BatchSize rows; only the first Size
// are real examples, the rest are zeros (images and labels) that the consumer masks out.
type Batch struct {
	Epoch, Step int
	Images      []float32 // BatchSize*Height*Width*Channels, NHWC; nil under LoaderOptions.Uint8
	// Pixels are the un-normalised uint8 pixels, same layout, under LoaderOptions.Uint8 (else nil).
	Pixels  []uint8
	Labels  []int32 // BatchSize
	Size    int     // number of real examples
	Indices []int   // source indices of the Size real examples
	// Targets are the soft targets (BatchSize×NumClasses) when the loader mixes (LoaderOptions.Mixup),
	// else nil; Labels still hold each row's own label.
	Targets []float32
	// Skipped are the errors of the bad records skipped in making this batch (each names its file and
	// record), in row order; empty unless LoaderOptions.SkipBadRecords.
	Skipped []error
	// rowSkips[row] are the bad records the row's worker skipped (SkipBadRecords): finish gathers them
	// into Skipped and, in eval, leaves those rows out.
	rowSkips [][]error
}

// maxBadInARow is how many bad records in a row SkipBadRecords skips for one training row before it
// stops the iteration: that many is no longer a damaged file here and there.
const maxBadInARow = 16

// Loader cuts a Source into batches in a seeded order that is a pure function of (Seed, epoch), so
// any (epoch, step) can be produced again, in any order, e.g. to resume a run. Random augmentation
// is drawn per example from (Seed, epoch, position in the epoch), so it is reproducible too.
type Loader struct {
	src     Source
	ds      *Dataset // set when the source is an in-memory Dataset
	opts    LoaderOptions
	steps   int
	h, w, c int        // shape of one output example
	table   []float32  // NormalizeTable: byte value v of channel ch -> table[v*c+ch]
	norm    normalizer // the same per channel, and its mean and std

	mu         sync.Mutex // guards the cached order of the last epoch asked for
	orderEpoch int
	order      []int

	skipped atomic.Int64 // bad records skipped so far (SkipBadRecords)

	spareMu sync.Mutex // guards spare
	spare   []*slot    // batch buffers of closed iterators, for the next Iterate (at most Prefetch)
}

// NewLoader checks opts against the in-memory ds and returns a Loader over it.
func NewLoader(ds *Dataset, opts LoaderOptions) (*Loader, error) {
	if ds == nil || ds.N <= 0 {
		return nil, fmt.Errorf("data: NewLoader: empty dataset")
	}
	l, err := NewSourceLoader(NewDatasetSource(ds), opts)
	if err != nil {
		return nil, err
	}
	l.ds = ds
	return l, nil
}

// Bounds of the loader's options, checked before anything is allocated (data.batch_size,
// data.prefetch and data.workers take them): an epoch's iterator allocates Prefetch whole batches
// up front (or takes those of a closed one, which the loader keeps) and starts Workers goroutines (prefetch=100000 allocated 100,000 batches).
const (
	MaxBatchSize = 1 << 16
	MaxPrefetch  = 16
	MaxWorkers   = 256
)

// NewSourceLoader checks opts against src and returns a Loader.
func NewSourceLoader(src Source, opts LoaderOptions) (*Loader, error) {
	if src == nil || src.Len() <= 0 {
		return nil, fmt.Errorf("data: NewLoader: empty source")
	}
	if opts.BatchSize < 1 || opts.BatchSize > MaxBatchSize {
		return nil, fmt.Errorf("data: NewLoader: batch size %d, want 1 to %d", opts.BatchSize, MaxBatchSize)
	}
	if opts.Prefetch < 0 || opts.Prefetch > MaxPrefetch || opts.Workers < 0 || opts.Workers > MaxWorkers {
		return nil, fmt.Errorf("data: NewLoader: prefetch %d, workers %d, want 0 to %d and 0 to %d", opts.Prefetch, opts.Workers, MaxPrefetch, MaxWorkers)
	}
	if opts.Prefetch == 0 {
		opts.Prefetch = 2
	}
	if opts.Workers == 0 {
		opts.Workers = runtime.NumCPU()
	}
	if opts.Replicas == 0 {
		opts.Replicas = 1
	}
	if opts.Replicas < 0 || opts.Replica < 0 || opts.Replica >= opts.Replicas {
		return nil, fmt.Errorf("data: NewLoader: replica %d of %d, want 0 <= replica < replicas", opts.Replica, opts.Replicas)
	}
	if opts.Repeats < 0 || opts.Repeats > 64 {
		return nil, fmt.Errorf("data: NewLoader: %d repeats, want 0 to 64 (0 or 1: none)", opts.Repeats)
	}
	l := &Loader{src: src, opts: opts, orderEpoch: -1}
	if t := opts.Transform; t != nil {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("data: NewLoader: %w", err)
		}
		l.h, l.w, l.c = t.Size, t.Size, t.channels()
	} else if fs, ok := src.(FixedShape); ok {
		l.h, l.w, l.c = fs.Shape()
	}
	if m := opts.Mixup; m != nil {
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("data: NewLoader: %w", err)
		}
		if src.NumClasses() > m.NumClasses {
			return nil, fmt.Errorf("data: NewLoader: mixup over %d classes, the source has %d", m.NumClasses, src.NumClasses())
		}
	}
	if opts.Uint8 {
		// Both work on normalised floats: erasing fills with noise (or zeros) in normalised space and
		// mixup blends two images, neither of which uint8 pixels can hold.
		if t := opts.Transform; t != nil && t.Train && t.Erasing.Prob > 0 {
			return nil, fmt.Errorf("data: NewLoader: uint8 batches cannot carry random erasing (probability %g), "+
				"which fills boxes in normalised space: normalise on the host", t.Erasing.Prob)
		}
		if opts.Mixup != nil {
			return nil, fmt.Errorf("data: NewLoader: uint8 batches cannot carry mixup/cutmix, which blend " +
				"normalised images: normalise on the host")
		}
	}
	if l.h < 1 || l.w < 1 || l.c < 1 {
		return nil, fmt.Errorf("data: NewLoader: the source's images have no fixed size: give a Transform")
	}
	n, global := src.Len(), opts.BatchSize*opts.Replicas
	l.steps = n / global
	if !opts.DropLast && n%global != 0 {
		l.steps++
	}
	if l.steps == 0 {
		return nil, fmt.Errorf("data: NewLoader: batch size %d x %d replicas with DropLast over %d examples of %s gives no batch",
			opts.BatchSize, opts.Replicas, n, src.Describe(0))
	}
	var err error
	if l.table, err = NormalizeTable(opts.Mean, opts.Std, l.c); err != nil {
		return nil, fmt.Errorf("data: NewLoader: %w", err)
	}
	l.norm = newNormalizer(opts.Mean, opts.Std, l.table, l.c)
	return l, nil
}

// NormalizeTable returns what the loader turns each byte into: entry v*channels+ch is
// (float32(v)/255 - mean[ch]) / std[ch], in float32, in that order. mean and std hold one value for
// every channel or one per channel; both empty means x/255. A consumer of uint8 batches that
// normalises with this table (a Gather in the step graph) gets the host's floats bit for bit, which
// recomputing the formula on a device need not give: a compiler may turn the division by a constant
// into a multiplication by its reciprocal.
func NormalizeTable(mean, std []float32, channels int) ([]float32, error) {
	if len(mean) == 0 && len(std) == 0 {
		mean, std = []float32{0}, []float32{1}
	}
	for _, v := range []struct {
		name string
		s    []float32
	}{{"Mean", mean}, {"Std", std}} {
		if len(v.s) != 1 && len(v.s) != channels {
			return nil, fmt.Errorf("%s has %d values, want 1 or %d (one per channel)", v.name, len(v.s), channels)
		}
	}
	lut := make([]float32, 256*channels)
	for ch := range channels {
		m, s := mean[min(ch, len(mean)-1)], std[min(ch, len(std)-1)]
		if !(s > 0) {
			return nil, fmt.Errorf("Std[%d] = %g, want > 0", ch, s)
		}
		for v := range 256 {
			lut[v*channels+ch] = (float32(v)/255 - m) / s
		}
	}
	return lut, nil
}

// Uint8 reports whether batches carry uint8 Pixels instead of normalised Images.
func (l *Loader) Uint8() bool { return l.opts.Uint8 }

// NormalizeTable returns the loader's normalisation table (see NormalizeTable); the caller must not
// modify it.
func (l *Loader) NormalizeTable() []float32 { return l.table }

// Dataset returns the loader's in-memory dataset, or nil when its source is another kind.
func (l *Loader) Dataset() *Dataset { return l.ds }

// Skipped is the number of bad records this loader has skipped so far (LoaderOptions.SkipBadRecords),
// over all its batches and iterators; a batch made twice counts twice.
func (l *Loader) Skipped() int64 { return l.skipped.Load() }

// Source returns the loader's source.
func (l *Loader) Source() Source { return l.src }

// Shape returns the (height, width, channels) of one example of a batch.
func (l *Loader) Shape() (height, width, channels int) { return l.h, l.w, l.c }

// ImageSize is the number of values (floats, or bytes under Uint8) of one example: height*width*channels.
func (l *Loader) ImageSize() int { return l.h * l.w * l.c }

// BatchSize returns the number of rows of every batch.
func (l *Loader) BatchSize() int { return l.opts.BatchSize }

// Workers is the number of goroutines an Iterator decodes with.
func (l *Loader) Workers() int { return l.opts.Workers }

// StepsPerEpoch returns the number of batches of one epoch: N/(BatchSize*Replicas), rounded up
// unless DropLast.
func (l *Loader) StepsPerEpoch() int { return l.steps }

// Order returns the order in which epoch visits the source: a permutation of [0, N) that depends only
// on (Seed, epoch) when Shuffle is set, and the identity otherwise. The caller must not modify it.
func (l *Loader) Order(epoch int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.order == nil || l.orderEpoch != epoch {
		l.order, l.orderEpoch = permutation(l.src.Len(), l.opts.Shuffle, l.opts.Seed, epoch), epoch
		if l.opts.Repeats > 1 {
			l.order = repeatedOrder(l.order, l.opts.Repeats, l.opts.BatchSize, l.opts.Replicas)
		}
	}
	return l.order
}

// repeatedOrder lays out repeated augmentation: g = each entry of perm k times in a row, cut to
// len(perm); position j of g goes to replica j mod R as that replica's row j div R, and replica r's
// rows fill its BatchSize block of each global batch (see span).
func repeatedOrder(perm []int, k, batch, replicas int) []int {
	n := len(perm)
	out := make([]int, n)
	filled := make([]bool, n)
	for j := range n {
		row, r := j/replicas, j%replicas
		if pos := (row/batch)*batch*replicas + r*batch + row%batch; pos < n {
			out[pos], filled[pos] = perm[j/k], true
		}
	}
	// Positions no replica row maps to (a ragged tail when n is not a multiple of batch·replicas)
	// keep the plain order's examples; training drops that tail anyway.
	for pos := range n {
		if !filled[pos] {
			out[pos] = perm[pos]
		}
	}
	return out
}

// span returns the position in the epoch's order of row 0 of step, and the number of real rows.
func (l *Loader) span(step int) (base, size int) {
	bs := l.opts.BatchSize
	// A replica's share of the last, partial eval batch can be empty: clamp so it slices nothing.
	base = min(step*bs*l.opts.Replicas+l.opts.Replica*bs, l.src.Len())
	return base, max(0, min(bs, l.src.Len()-base))
}

// Batch returns batch step of epoch, decoded into fresh slices on the calling goroutine. It panics
// if step is outside [0, StepsPerEpoch()).
func (l *Loader) Batch(epoch, step int) (Batch, error) {
	b := l.newBatch()
	l.setup(&b, epoch, step)
	err := l.fill(&b, l.Order(epoch), 0, b.Size, &augScratch{})
	if err == nil {
		l.finish(&b)
	}
	return b, err
}

// newBatch allocates the buffers of one batch.
func (l *Loader) newBatch() Batch {
	bs := l.opts.BatchSize
	b := Batch{Labels: make([]int32, bs), Indices: make([]int, 0, bs)}
	if l.opts.Uint8 {
		b.Pixels = make([]uint8, bs*l.ImageSize())
	} else {
		b.Images = make([]float32, bs*l.ImageSize())
	}
	if m := l.opts.Mixup; m != nil {
		b.Targets = make([]float32, bs*m.NumClasses)
	}
	if l.opts.SkipBadRecords {
		b.rowSkips = make([][]error, bs)
	}
	return b
}

// finish completes a batch once every row is decoded: it gathers the skipped records, moves eval's
// remaining rows up over the skipped ones, and mixes.
func (l *Loader) finish(b *Batch) {
	if l.opts.SkipBadRecords {
		size := l.ImageSize()
		kept := 0
		for row := range b.Size {
			skips := b.rowSkips[row]
			b.Skipped = append(b.Skipped, skips...)
			if len(skips) > 0 && !l.opts.DropLast {
				continue
			}
			if kept != row {
				if b.Pixels != nil {
					copy(b.Pixels[kept*size:(kept+1)*size], b.Pixels[row*size:])
				} else {
					copy(b.Images[kept*size:(kept+1)*size], b.Images[row*size:])
				}
				b.Labels[kept], b.Indices[kept] = b.Labels[row], b.Indices[row]
			}
			kept++
		}
		if kept < b.Size {
			if b.Pixels != nil {
				clear(b.Pixels[kept*size:])
			} else {
				clear(b.Images[kept*size:])
			}
			clear(b.Labels[kept:])
			b.Size, b.Indices = kept, b.Indices[:kept]
		}
	}
	l.mix(b)
}

// mix applies the batch-level mixup or cutmix to b's real rows, once all of them are decoded.
func (l *Loader) mix(b *Batch) {
	m := l.opts.Mixup
	if m == nil {
		return
	}
	clear(b.Targets)
	if b.Size == 0 {
		return
	}
	var rng rand.PCG
	mixRNG(&rng, l.opts.Seed, b.Epoch, b.Step, l.opts.Replica)
	m.Apply(m.Params(l.h, l.w, &rng), b.Images, b.Labels, b.Size, l.h, l.w, l.c, b.Targets)
}

// setup fills b's metadata for (epoch, step) and zeroes its padding rows.
func (l *Loader) setup(b *Batch, epoch, step int) {
	if step < 0 || step >= l.steps {
		panic(fmt.Sprintf("data: Loader.Batch: step %d out of range [0, %d)", step, l.steps))
	}
	base, size := l.span(step)
	order := l.Order(epoch)
	b.Epoch, b.Step, b.Size = epoch, step, size
	b.Indices = append(b.Indices[:0], order[base:base+size]...)
	b.Skipped = b.Skipped[:0]
	for row := range b.rowSkips {
		b.rowSkips[row] = b.rowSkips[row][:0]
	}
	if b.Pixels != nil {
		clear(b.Pixels[size*l.ImageSize():])
	} else {
		clear(b.Images[size*l.ImageSize():])
	}
	clear(b.Labels[size:])
}

// yieldEvery is how often a worker that decodes with libjpeg-turbo yields (Loader.fill): well inside
// sysmon's 10 ms slice, with room for an image that takes longer than most.
const yieldEvery = 4 * time.Millisecond

// fill decodes rows [lo, hi) of b, which setup prepared, skipping bad records under SkipBadRecords.
func (l *Loader) fill(b *Batch, order []int, lo, hi int, sc *augScratch) error {
	base, _ := l.span(b.Step)
	for row := lo; row < hi; row++ {
		pos := base + row
		label, err := l.decodeRow(b, row, sc, pos, order[pos])
		for try := 1; err != nil && l.opts.SkipBadRecords && errors.Is(err, ErrBadRecord); try++ {
			b.rowSkips[row] = append(b.rowSkips[row], err)
			l.skipped.Add(1)
			if !l.opts.DropLast {
				err = nil // eval: finish leaves the row out
				break
			}
			if try > maxBadInARow {
				return fmt.Errorf("%d bad records in a row, more than skipping is for (data.on_bad_record: skip); the last: %w", try, err)
			}
			// The next example of the epoch's order takes the row, with the row's own draws.
			idx := order[(pos+try)%len(order)]
			if label, err = l.decodeRow(b, row, sc, pos, idx); err == nil {
				b.Indices[row] = idx
			}
		}
		if err != nil {
			return err
		}
		b.Labels[row] = label
		if sc.yieldEach && sc.turbo != nil {
			// A worker that decodes with libjpeg-turbo spends most of its time in foreign calls, where
			// Go cannot preempt it: after 10 ms on one scheduling slice sysmon takes its P away
			// instead (and then polls every 20 µs for a millisecond or more). Yielding between images
			// (under 2 ms each) starts a new slice first; not after every image, as each yield wakes
			// a thread (a futex call each side) for the idle P that a spare P leaves.
			if now := time.Now(); now.Sub(sc.lastYield) >= yieldEvery {
				sc.lastYield = now
				runtime.Gosched()
			}
		}
	}
	return nil
}

// decodeRow decodes source example idx into row of b, drawing its augmentation as position pos.
func (l *Loader) decodeRow(b *Batch, row int, sc *augScratch, pos, idx int) (int32, error) {
	size := l.ImageSize()
	if b.Pixels != nil {
		return l.decodeTo(sc, b.Epoch, pos, idx, nil, b.Pixels[row*size:(row+1)*size])
	}
	return l.decode(sc, b.Epoch, pos, idx, b.Images[row*size:(row+1)*size])
}

// decode writes the normalised example at position pos (source index idx) of epoch into dst.
func (l *Loader) decode(sc *augScratch, epoch, pos, idx int, dst []float32) (int32, error) {
	return l.decodeTo(sc, epoch, pos, idx, dst, nil)
}

// decodeTo is decode, or with a nil dst writes the example's uint8 pixels into dst8 instead.
func (l *Loader) decodeTo(sc *augScratch, epoch, pos, idx int, dst []float32, dst8 []uint8) (int32, error) {
	ex, err := l.src.Example(idx, sc.read)
	if err != nil {
		return 0, err
	}
	var p pixels
	t := l.opts.Transform
	if dst == nil {
		// uint8 rows: a RandomResizedCrop's resampler writes straight into the batch.
		sc.rs.into = dst8
		defer func() { sc.rs.into = nil }()
	}
	if ex.Encoded != nil && t != nil {
		// Decoding and transforming together lets the JPEG decoder decode only a crop's box.
		sc.read = ex.Encoded
		exampleRNG(&sc.rng, l.opts.Seed, epoch, pos)
		if p, err = t.decodeApply(ex.Encoded, l.c, l.opts.MaxImagePixels, &sc.rng, sc); err != nil {
			return 0, fmt.Errorf("data: %s: %w", l.src.Describe(idx), err)
		}
	} else if ex.Encoded != nil {
		sc.read = ex.Encoded
		if p, err = decodePixels(ex.Encoded, l.c, sc.dec, l.opts.MaxImagePixels); err != nil {
			return 0, fmt.Errorf("data: %s: decoding: %w", l.src.Describe(idx), err)
		}
		sc.dec = p.pix
	} else {
		sc.read = ex.Pixels // only ever handed back to the same source
		p = pixels{w: ex.Width, h: ex.Height, c: ex.Channels, pix: ex.Pixels}
		if p.c != l.c && (p.c == 1 || p.c == 3) && (l.c == 1 || l.c == 3) {
			p = convertChannels(p, l.c, sc.dec)
			sc.dec = p.pix
		}
	}
	if t != nil && ex.Encoded == nil {
		exampleRNG(&sc.rng, l.opts.Seed, epoch, pos)
		if p, err = t.apply(p, &sc.rng, sc); err != nil {
			return 0, fmt.Errorf("data: %s: %w", l.src.Describe(idx), err)
		}
	} else if p.w != l.w || p.h != l.h {
		return 0, fmt.Errorf("data: %s: %dx%d image, the loader's size is %dx%d", l.src.Describe(idx), p.w, p.h, l.w, l.h)
	}
	if dst == nil {
		if len(p.pix) == 0 || len(dst8) == 0 || &p.pix[0] != &dst8[0] {
			copy(dst8, p.pix) // the source's or the scratch's bytes: not to be kept past this call
		}
		return ex.Label, nil
	}
	normalizeInto(dst, p.pix, l.norm)
	if t != nil && t.Train && t.Erasing.Prob > 0 {
		t.Erasing.apply(dst, l.h, l.w, l.c, &sc.rng)
	}
	return ex.Label, nil
}

// convertChannels turns grey into RGB (replicated) or RGB into grey (ITU-R 601 luma, as PIL).
func convertChannels(p pixels, c int, buf []uint8) pixels {
	out := pixels{w: p.w, h: p.h, c: c, pix: growBytes(buf, p.w*p.h*c)}
	for i := range p.w * p.h {
		if c == 3 {
			v := p.pix[i]
			out.pix[3*i], out.pix[3*i+1], out.pix[3*i+2] = v, v, v
		} else {
			r, g, b := uint32(p.pix[3*i]), uint32(p.pix[3*i+1]), uint32(p.pix[3*i+2])
			out.pix[i] = uint8((19595*r + 38470*g + 7471*b + 1<<15) >> 16)
		}
	}
	return out
}

// permutation returns the identity on [0, n), shuffled when shuffle is set by a Fisher–Yates shuffle
// driven by a PCG generator seeded from (seed, epoch). The shuffle and the bounded draws are written
// out here, not taken from math/rand, so the order cannot change with the Go version.
func permutation(n int, shuffle bool, seed uint64, epoch int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	if !shuffle {
		return p
	}
	s1 := splitmix64(seed)
	rng := rand.NewPCG(s1, splitmix64(s1^splitmix64(uint64(epoch)+0x632be59bd9b4e019)))
	for i := n - 1; i > 0; i-- {
		j := boundedUint64(rng, uint64(i)+1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// boundedUint64 returns a uniform value in [0, n), by Lemire's multiply-and-reject method.
func boundedUint64(rng *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(rng.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(rng.Uint64(), n)
		}
	}
	return hi
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Iterator yields the batches of one epoch in order. Workers decode the examples of up to Prefetch
// batches ahead of the consumer into Prefetch reused buffers. Close it when done, even after the last
// batch.
type Iterator struct {
	l     *Loader
	free  chan *slot // buffers the consumer has handed back
	ready chan *slot // batches in step order, possibly still being decoded
	tasks chan task
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	held  *slot // the batch the consumer holds
	err   error
	spare sync.Once // the buffers go back to the loader once
}

// slot is one reusable batch buffer and the state of its decoding.
type slot struct {
	b       Batch
	pending atomic.Int32 // row chunks still being decoded
	done    chan struct{}
	errMu   sync.Mutex
	err     error
}

// task is a chunk of rows of one batch.
type task struct {
	s      *slot
	order  []int
	lo, hi int
}

// Iterate returns an Iterator over batches startStep, startStep+1, ... StepsPerEpoch()-1 of epoch;
// each equals Batch(epoch, step). A startStep at or past the end gives an empty iterator.
func (l *Loader) Iterate(epoch, startStep int) *Iterator {
	if startStep < 0 {
		panic(fmt.Sprintf("data: Loader.Iterate: startStep %d < 0", startStep))
	}
	p, bs := l.opts.Prefetch, l.opts.BatchSize
	it := &Iterator{l: l, free: make(chan *slot, p), ready: make(chan *slot, p),
		tasks: make(chan task, p*l.opts.Workers), stop: make(chan struct{})}
	// The buffers of an earlier epoch's closed iterator when there are some: a new one costs its
	// first touch (a page fault every 4 KiB of a 38.5 MB float batch at 224²) and garbage.
	l.spareMu.Lock()
	reused := min(p, len(l.spare))
	for _, s := range l.spare[len(l.spare)-reused:] {
		it.free <- s
	}
	clear(l.spare[len(l.spare)-reused:])
	l.spare = l.spare[:len(l.spare)-reused]
	l.spareMu.Unlock()
	for range p - reused {
		it.free <- &slot{b: l.newBatch()}
	}
	// Chunks of a few rows: enough of them to balance the workers, few enough to keep overhead low.
	chunk := max(1, bs/(4*l.opts.Workers))
	it.wg.Add(1 + l.opts.Workers)
	go func() {
		defer it.wg.Done()
		defer close(it.tasks)
		defer close(it.ready)
		for step := startStep; step < l.steps; step++ {
			var s *slot
			select {
			case s = <-it.free:
			case <-it.stop:
				return
			}
			l.setup(&s.b, epoch, step)
			s.err, s.done = nil, make(chan struct{})
			order := l.Order(epoch)
			size := s.b.Size // finish may shrink it once the chunks below are decoded
			n := (size + chunk - 1) / chunk
			s.pending.Store(int32(n))
			if n == 0 {
				l.finish(&s.b)
				close(s.done)
			}
			select {
			case it.ready <- s:
			case <-it.stop:
				return
			}
			for lo := 0; lo < size; lo += chunk {
				select {
				case it.tasks <- task{s: s, order: order, lo: lo, hi: min(lo+chunk, size)}:
				case <-it.stop:
					return
				}
			}
		}
	}()
	for range l.opts.Workers {
		go func() {
			defer it.wg.Done()
			// Gosched wakes a thread for an idle P: where a P is spare (SpareProcForDecode) and the
			// workers take every core, that thread takes a core from a worker (2 workers on 2 loaded
			// cores: 1.3x the wall time yielding after each image, 1.4x every 4 ms), and yielding is left
			// to sysmon's preemption every 10 ms.
			spare := runtime.GOMAXPROCS(0) > l.opts.Workers
			sc := &augScratch{yieldEach: !spare || l.opts.Workers < runtime.NumCPU()}
			for t := range it.tasks {
				select {
				case <-it.stop: // drain without work
				default:
					if err := l.fill(&t.s.b, t.order, t.lo, t.hi, sc); err != nil {
						t.s.errMu.Lock()
						if t.s.err == nil {
							t.s.err = err
						}
						t.s.errMu.Unlock()
					}
				}
				if t.s.pending.Add(-1) == 0 {
					// The last chunk's worker finishes (and mixes) the whole batch: every other chunk is done.
					select {
					case <-it.stop:
					default:
						if t.s.err == nil {
							l.finish(&t.s.b)
						}
					}
					close(t.s.done)
				}
			}
		}()
	}
	return it
}

// Next returns the next batch, or false when the epoch is over, the iterator is closed or decoding
// failed (Err says why). The batch's slices are reused: they are valid until the next call of Next
// or Close.
func (it *Iterator) Next() (Batch, bool) {
	if it.held != nil {
		it.free <- it.held // never blocks: free has room for every slot
		it.held = nil
	}
	if it.err != nil {
		return Batch{}, false
	}
	select {
	case <-it.stop:
		return Batch{}, false
	default:
	}
	var s *slot
	var ok bool
	select {
	case <-it.stop:
		return Batch{}, false
	case s, ok = <-it.ready:
		if !ok {
			return Batch{}, false
		}
	}
	select {
	case <-it.stop:
		return Batch{}, false
	case <-s.done:
	}
	if s.err != nil {
		it.err = fmt.Errorf("epoch %d step %d: %w", s.b.Epoch, s.b.Step, s.err)
		return Batch{}, false
	}
	it.held = s
	return s.b, true
}

// Err returns the decoding error that ended the iteration, if any.
func (it *Iterator) Err() error { return it.err }

// Close stops the producer and the workers and waits for them to exit, then hands the batch buffers
// to the loader for its next Iterate (the last batch Next returned is then no longer valid). It is
// safe to call more than once.
func (it *Iterator) Close() {
	it.once.Do(func() { close(it.stop) })
	it.wg.Wait()
	it.spare.Do(it.giveBack)
}

// giveBack puts the iterator's slots, with the producer and workers gone, on its loader's spare list:
// the one the consumer held, those handed back, and those decoded or half-decoded but not taken (ready
// is closed when the producer exits). A slot the producer had taken when it stopped is dropped.
func (it *Iterator) giveBack() {
	var slots []*slot
	if it.held != nil {
		slots, it.held = append(slots, it.held), nil
	}
	for more := true; more; {
		select {
		case s := <-it.free:
			slots = append(slots, s)
		default:
			more = false
		}
	}
	for s := range it.ready {
		slots = append(slots, s)
	}
	l := it.l
	l.spareMu.Lock()
	l.spare = append(l.spare, slots[:min(len(slots), l.opts.Prefetch-len(l.spare))]...)
	l.spareMu.Unlock()
}
