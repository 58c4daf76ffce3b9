package data

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"sync"
)

// LoaderOptions configures a Loader.
type LoaderOptions struct {
	BatchSize int  // examples per batch, >= 1
	Shuffle   bool // permute the examples each epoch; false keeps the dataset order
	Seed      uint64
	// DropLast drops the last partial batch (training). Without it (eval) the last batch has
	// Size < BatchSize and is padded with zeros, so shapes stay static.
	DropLast bool
	// Mean and Std normalise pixels after scaling them to [0,1]: (x/255 - Mean[c]) / Std[c]. Each holds
	// one value for all channels or one per channel; both empty means x/255.
	Mean, Std []float32
	// Prefetch is how many decoded batches an Iterator keeps ready ahead of the consumer; 0 means 2.
	Prefetch int
}

// Batch is one batch of decoded examples. Its slices always have BatchSize rows; only the first Size
// are real examples, the rest are zeros (images and labels) that the consumer masks out.
type Batch struct {
	Epoch, Step int
	Images      []float32 // BatchSize*Height*Width*Channels, NHWC
	Labels      []int32   // BatchSize
	Size        int       // number of real examples
	Indices     []int     // dataset indices of the Size real examples
}

// Loader cuts a Dataset into batches in a seeded order that is a pure function of (Seed, epoch), so
// any (epoch, step) can be produced again, in any order, e.g. to resume a run.
type Loader struct {
	ds    *Dataset
	opts  LoaderOptions
	steps int
	lut   [][256]float32 // per channel: byte value -> normalised float

	mu         sync.Mutex // guards the cached order of the last epoch asked for
	orderEpoch int
	order      []int
}

// NewLoader checks opts against ds and returns a Loader.
func NewLoader(ds *Dataset, opts LoaderOptions) (*Loader, error) {
	if ds == nil || ds.N <= 0 {
		return nil, fmt.Errorf("data: NewLoader: empty dataset")
	}
	if opts.BatchSize < 1 {
		return nil, fmt.Errorf("data: NewLoader: batch size %d, want >= 1", opts.BatchSize)
	}
	if opts.Prefetch < 0 {
		return nil, fmt.Errorf("data: NewLoader: prefetch %d, want >= 0", opts.Prefetch)
	}
	if opts.Prefetch == 0 {
		opts.Prefetch = 2
	}
	l := &Loader{ds: ds, opts: opts, orderEpoch: -1}
	l.steps = ds.N / opts.BatchSize
	if !opts.DropLast && ds.N%opts.BatchSize != 0 {
		l.steps++
	}
	if l.steps == 0 {
		return nil, fmt.Errorf("data: NewLoader: batch size %d with DropLast over %d examples of %s gives no batch",
			opts.BatchSize, ds.N, ds.Name)
	}
	c := ds.Channels
	mean, std := opts.Mean, opts.Std
	if len(mean) == 0 && len(std) == 0 {
		mean, std = []float32{0}, []float32{1}
	}
	for _, v := range []struct {
		name string
		s    []float32
	}{{"Mean", mean}, {"Std", std}} {
		if len(v.s) != 1 && len(v.s) != c {
			return nil, fmt.Errorf("data: NewLoader: %s has %d values, want 1 or %d (one per channel)", v.name, len(v.s), c)
		}
	}
	l.lut = make([][256]float32, c)
	for ch := range c {
		m, s := mean[min(ch, len(mean)-1)], std[min(ch, len(std)-1)]
		if !(s > 0) {
			return nil, fmt.Errorf("data: NewLoader: Std[%d] = %g, want > 0", ch, s)
		}
		for v := range 256 {
			l.lut[ch][v] = (float32(v)/255 - m) / s
		}
	}
	return l, nil
}

// Dataset returns the loader's dataset.
func (l *Loader) Dataset() *Dataset { return l.ds }

// BatchSize returns the number of rows of every batch.
func (l *Loader) BatchSize() int { return l.opts.BatchSize }

// StepsPerEpoch returns the number of batches of one epoch: N/BatchSize, rounded up unless DropLast.
func (l *Loader) StepsPerEpoch() int { return l.steps }

// Order returns the order in which epoch visits the dataset: a permutation of [0, N) that depends only
// on (Seed, epoch) when Shuffle is set, and the identity otherwise. The caller must not modify it.
func (l *Loader) Order(epoch int) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.order == nil || l.orderEpoch != epoch {
		l.order, l.orderEpoch = permutation(l.ds.N, l.opts.Shuffle, l.opts.Seed, epoch), epoch
	}
	return l.order
}

// Batch returns batch step of epoch, decoded into fresh slices. It panics if step is outside
// [0, StepsPerEpoch()).
func (l *Loader) Batch(epoch, step int) Batch {
	if step < 0 || step >= l.steps {
		panic(fmt.Sprintf("data: Loader.Batch: step %d out of range [0, %d)", step, l.steps))
	}
	bs := l.opts.BatchSize
	order := l.Order(epoch)
	idx := order[step*bs : min((step+1)*bs, len(order))]
	imgSize := l.ds.ImageSize()
	b := Batch{
		Epoch: epoch, Step: step,
		Images:  make([]float32, bs*imgSize),
		Labels:  make([]int32, bs),
		Size:    len(idx),
		Indices: append([]int(nil), idx...),
	}
	c := l.ds.Channels
	for row, i := range idx {
		src := l.ds.Image(i)
		dst := b.Images[row*imgSize : (row+1)*imgSize]
		if c == 1 {
			lut := &l.lut[0]
			for j, v := range src {
				dst[j] = lut[v]
			}
		} else {
			for j, v := range src {
				dst[j] = l.lut[j%c][v]
			}
		}
		b.Labels[row] = l.ds.Labels[i]
	}
	return b
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

// Iterator yields the batches of one epoch in order, decoded by a background goroutine that stays at
// most Prefetch batches ahead of the consumer. Close it when done, even after the last batch.
type Iterator struct {
	c    chan Batch
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Iterate returns an Iterator over batches startStep, startStep+1, ... StepsPerEpoch()-1 of epoch;
// each equals Batch(epoch, step). A startStep at or past the end gives an empty iterator.
func (l *Loader) Iterate(epoch, startStep int) *Iterator {
	if startStep < 0 {
		panic(fmt.Sprintf("data: Loader.Iterate: startStep %d < 0", startStep))
	}
	// The goroutine holds one decoded batch while it waits to send, so Prefetch-1 more fit in the channel.
	it := &Iterator{c: make(chan Batch, l.opts.Prefetch-1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(it.done)
		defer close(it.c)
		for step := startStep; step < l.steps; step++ {
			select {
			case <-it.stop:
				return
			default:
			}
			b := l.Batch(epoch, step)
			select {
			case it.c <- b:
			case <-it.stop:
				return
			}
		}
	}()
	return it
}

// Next returns the next batch, or false when the epoch is over or the iterator is closed.
func (it *Iterator) Next() (Batch, bool) {
	select {
	case <-it.stop:
		return Batch{}, false
	default:
	}
	b, ok := <-it.c
	return b, ok
}

// Close stops the background goroutine and waits for it to exit. It is safe to call more than once.
func (it *Iterator) Close() {
	it.once.Do(func() { close(it.stop) })
	<-it.done
}
