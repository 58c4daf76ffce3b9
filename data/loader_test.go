package data

import (
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// synthDataset has n images of 2x3 pixels and 2 channels; pixel j of image i is byte(i + 40*j) and
// the label of image i is i%10, so a batch row tells which example it holds.
func synthDataset(n int) *Dataset {
	const h, w, c = 2, 3, 2
	ds := &Dataset{Name: "synth", Split: "train", N: n, Height: h, Width: w, Channels: c, NumClasses: 10,
		Images: make([]uint8, n*h*w*c), Labels: make([]int32, n)}
	for i := range n {
		for j := range h * w * c {
			ds.Images[i*h*w*c+j] = byte(i + 40*j)
		}
		ds.Labels[i] = int32(i % 10)
	}
	return ds
}

// mustBatch is l.Batch that fails the test on an error.
func mustBatch(t *testing.T, l *Loader, epoch, step int) Batch {
	t.Helper()
	b, err := l.Batch(epoch, step)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustLoader(t *testing.T, ds *Dataset, opts LoaderOptions) *Loader {
	t.Helper()
	l, err := NewLoader(ds, opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func isPermutation(p []int, n int) bool {
	if len(p) != n {
		return false
	}
	s := slices.Clone(p)
	slices.Sort(s)
	for i, v := range s {
		if v != i {
			return false
		}
	}
	return true
}

func TestOrderIsPureFunctionOfSeedAndEpoch(t *testing.T) {
	ds := synthDataset(1000)
	opts := LoaderOptions{BatchSize: 32, Shuffle: true, Seed: 42}
	a, b := mustLoader(t, ds, opts), mustLoader(t, ds, opts)
	b.Order(9) // b's cache now holds another epoch: the history of calls must not matter
	for epoch := range 5 {
		p := slices.Clone(a.Order(epoch))
		if !isPermutation(p, ds.N) {
			t.Fatalf("epoch %d: order is not a permutation of [0, %d)", epoch, ds.N)
		}
		if !slices.Equal(p, b.Order(epoch)) || !slices.Equal(p, a.Order(epoch)) {
			t.Errorf("epoch %d: order differs between calls or loaders", epoch)
		}
		if slices.Equal(p, permutation(ds.N, false, 0, 0)) {
			t.Errorf("epoch %d: shuffled order is the identity", epoch)
		}
		for e2 := range epoch {
			if slices.Equal(p, a.Order(e2)) {
				t.Errorf("epochs %d and %d have the same order", e2, epoch)
			}
		}
	}
	other := mustLoader(t, ds, LoaderOptions{BatchSize: 32, Shuffle: true, Seed: 43})
	if slices.Equal(other.Order(0), a.Order(0)) {
		t.Errorf("seeds 42 and 43 give the same order")
	}
	plain := mustLoader(t, ds, LoaderOptions{BatchSize: 32})
	if !slices.Equal(plain.Order(3), permutation(ds.N, false, 0, 0)) || plain.Order(3)[999] != 999 {
		t.Errorf("Shuffle false: order is not the identity")
	}
}

// The order is pinned: a checkpoint taken with one build must resume on the same batches with a
// later one, whatever the Go version. Changing these numbers breaks resuming old runs.
func TestOrderGolden(t *testing.T) {
	got := permutation(20, true, 42, 3)
	want := []int{2, 15, 9, 8, 4, 12, 3, 6, 10, 18, 7, 17, 19, 11, 5, 13, 16, 0, 14, 1}
	if !slices.Equal(got, want) {
		t.Errorf("permutation(20, seed 42, epoch 3) = %#v, want %#v", got, want)
	}
}

func TestStepsAndLastBatch(t *testing.T) {
	ds := synthDataset(103)
	for _, tc := range []struct {
		dropLast bool
		steps    int
		lastSize int
		covered  int
	}{
		{true, 10, 10, 100},
		{false, 11, 3, 103},
	} {
		l := mustLoader(t, ds, LoaderOptions{BatchSize: 10, Shuffle: true, Seed: 7, DropLast: tc.dropLast})
		if l.StepsPerEpoch() != tc.steps {
			t.Fatalf("DropLast %v: %d steps, want %d", tc.dropLast, l.StepsPerEpoch(), tc.steps)
		}
		var all []int
		for step := range l.StepsPerEpoch() {
			b := mustBatch(t, l, 2, step)
			wantSize := 10
			if step == tc.steps-1 {
				wantSize = tc.lastSize
			}
			if b.Size != wantSize || len(b.Indices) != wantSize || len(b.Labels) != 10 || len(b.Images) != 10*ds.ImageSize() ||
				b.Epoch != 2 || b.Step != step {
				t.Fatalf("DropLast %v step %d: Size %d, %d indices, %d labels, %d floats, epoch %d step %d", tc.dropLast, step,
					b.Size, len(b.Indices), len(b.Labels), len(b.Images), b.Epoch, b.Step)
			}
			for row := b.Size; row < 10; row++ {
				if b.Labels[row] != 0 || slices.ContainsFunc(b.Images[row*ds.ImageSize():(row+1)*ds.ImageSize()], func(v float32) bool { return v != 0 }) {
					t.Errorf("DropLast %v step %d: padding row %d is not zero", tc.dropLast, step, row)
				}
			}
			all = append(all, b.Indices...)
		}
		if !slices.Equal(all, l.Order(2)[:tc.covered]) {
			t.Errorf("DropLast %v: batches do not follow Order(2)", tc.dropLast)
		}
		if !isPermutation(all, ds.N) && tc.covered == ds.N {
			t.Errorf("DropLast %v: batches do not cover every example once", tc.dropLast)
		}
		slices.Sort(all)
		if len(slices.Compact(all)) != tc.covered {
			t.Errorf("DropLast %v: an example appears twice in one epoch", tc.dropLast)
		}
	}
	if _, err := NewLoader(synthDataset(5), LoaderOptions{BatchSize: 8, DropLast: true}); err == nil || !strings.Contains(err.Error(), "gives no batch") {
		t.Errorf("batch 8 over 5 examples with DropLast: %v", err)
	}
	l := mustLoader(t, synthDataset(5), LoaderOptions{BatchSize: 8})
	if l.StepsPerEpoch() != 1 || mustBatch(t, l, 0, 0).Size != 5 {
		t.Errorf("batch 8 over 5 examples for eval: %d steps", l.StepsPerEpoch())
	}
}

func TestBatchContentAndNormalisation(t *testing.T) {
	ds := synthDataset(50)
	near := func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-6 }
	for _, tc := range []struct {
		name      string
		mean, std []float32
		f         func(v uint8, ch int) float32
	}{
		{"raw", nil, nil, func(v uint8, _ int) float32 { return float32(v) / 255 }},
		{"scalar", []float32{0.5}, []float32{0.25}, func(v uint8, _ int) float32 { return (float32(v)/255 - 0.5) / 0.25 }},
		{"per channel", []float32{0.1, 0.2}, []float32{0.3, 0.4}, func(v uint8, ch int) float32 {
			return (float32(v)/255 - []float32{0.1, 0.2}[ch]) / []float32{0.3, 0.4}[ch]
		}},
	} {
		l := mustLoader(t, ds, LoaderOptions{BatchSize: 8, Shuffle: true, Seed: 1, Mean: tc.mean, Std: tc.std})
		b := mustBatch(t, l, 4, 3)
		for row, i := range b.Indices {
			if b.Labels[row] != ds.Labels[i] {
				t.Errorf("%s: row %d label %d, want %d", tc.name, row, b.Labels[row], ds.Labels[i])
			}
			for j, v := range ds.Image(i) {
				if got, want := b.Images[row*ds.ImageSize()+j], tc.f(v, j%ds.Channels); !near(got, want) {
					t.Fatalf("%s: row %d pixel %d = %g, want %g", tc.name, row, j, got, want)
				}
			}
		}
	}
	// Fixed points: 0 and 255 under mean 0.5, std 0.25 are -2 and 2.
	one := &Dataset{Name: "x", N: 2, Height: 1, Width: 1, Channels: 1, NumClasses: 10, Images: []uint8{0, 255}, Labels: []int32{0, 1}}
	b := mustBatch(t, mustLoader(t, one, LoaderOptions{BatchSize: 2, Mean: []float32{0.5}, Std: []float32{0.25}}), 0, 0)
	if !slices.Equal(b.Images, []float32{-2, 2}) {
		t.Errorf("normalised 0 and 255: %v, want [-2 2]", b.Images)
	}
	for _, bad := range []LoaderOptions{
		{BatchSize: 0},
		{BatchSize: 2, Std: []float32{0}, Mean: []float32{0}},
		{BatchSize: 2, Mean: []float32{0, 0, 0}, Std: []float32{1}},
		{BatchSize: 2, Mean: []float32{0}},
		{BatchSize: 2, Prefetch: -1},
	} {
		if _, err := NewLoader(ds, bad); err == nil {
			t.Errorf("NewLoader(%+v): no error", bad)
		}
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Errorf("Batch(0, StepsPerEpoch()) did not panic")
			}
		}()
		l := mustLoader(t, ds, LoaderOptions{BatchSize: 8})
		_, _ = l.Batch(0, l.StepsPerEpoch())
	}()
}

func TestIteratorMatchesBatch(t *testing.T) {
	ds := synthDataset(103)
	for _, prefetch := range []int{0, 1, 3} {
		l := mustLoader(t, ds, LoaderOptions{BatchSize: 10, Shuffle: true, Seed: 5, Prefetch: prefetch})
		for _, start := range []int{0, 7, 11, 20} {
			it := l.Iterate(3, start)
			step := start
			for b, ok := it.Next(); ok; b, ok = it.Next() {
				if !batchesEqual(b, mustBatch(t, l, 3, step)) {
					t.Fatalf("prefetch %d start %d: iterator batch %d differs from Batch(3, %d)", prefetch, start, b.Step, step)
				}
				step++
			}
			it.Close()
			if want := max(start, l.StepsPerEpoch()); step != want {
				t.Errorf("prefetch %d start %d: iterator stopped at step %d, want %d", prefetch, start, step, want)
			}
		}
	}
}

func TestIteratorCloseLeaksNothing(t *testing.T) {
	l := mustLoader(t, synthDataset(200), LoaderOptions{BatchSize: 4, Shuffle: true, Prefetch: 2})
	before := runtime.NumGoroutine()
	var its []*Iterator
	for i := range 20 {
		it := l.Iterate(i, 0)
		for range i % 4 { // some read nothing: their goroutine is blocked on a full channel
			if _, ok := it.Next(); !ok {
				t.Fatal("iterator ended early")
			}
		}
		its = append(its, it)
	}
	if n := runtime.NumGoroutine(); n < before+20 {
		t.Errorf("%d goroutines with 20 open iterators, want at least %d: do they run?", n, before+20)
	}
	for _, it := range its {
		it.Close()
		it.Close() // twice is fine
		if _, ok := it.Next(); ok {
			t.Errorf("Next after Close returned a batch")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// batchesEqual compares batches by content (an iterator's batch has reused slices of spare capacity).
func batchesEqual(a, b Batch) bool {
	return a.Epoch == b.Epoch && a.Step == b.Step && a.Size == b.Size && slices.Equal(a.Images, b.Images) &&
		slices.Equal(a.Labels, b.Labels) && slices.Equal(a.Indices, b.Indices) && slices.Equal(a.Targets, b.Targets)
}
