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
		// Bounded before Iterate allocates Prefetch batches and starts Workers goroutines.
		{BatchSize: 2, Prefetch: MaxPrefetch + 1}, {BatchSize: 2, Workers: MaxWorkers + 1}, {BatchSize: MaxBatchSize + 1},
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

// TestIteratorReusesBuffers: a closed iterator's batch buffers serve the loader's next Iterate,
// and every batch still equals Batch: after an iterator closed mid-epoch, one closed before its
// first batch (slots still being decoded), and with two iterators open at once on one loader.
func TestIteratorReusesBuffers(t *testing.T) {
	l := mustLoader(t, synthDataset(103), LoaderOptions{BatchSize: 10, Shuffle: true, Seed: 5, Prefetch: 2, Workers: 2})
	seen := map[*float32]bool{}
	check := func(it *Iterator, epoch, batches int, record bool) (reused int) {
		t.Helper()
		for range batches {
			b, ok := it.Next()
			if !ok {
				t.Fatalf("epoch %d: iterator ended early", epoch)
			}
			if !batchesEqual(b, mustBatch(t, l, epoch, b.Step)) {
				t.Fatalf("epoch %d: iterator batch %d differs from Batch", epoch, b.Step)
			}
			if seen[&b.Images[0]] {
				reused++
			}
			if record {
				seen[&b.Images[0]] = true
			}
		}
		return reused
	}
	it := l.Iterate(0, 0)
	check(it, 0, 4, true)
	it.Close()
	it = l.Iterate(1, 0)
	if reused := check(it, 1, l.StepsPerEpoch(), false); reused == 0 {
		t.Error("no buffer of the closed iterator reused")
	}
	it.Close()
	l.Iterate(2, 0).Close() // before its first batch
	a, b := l.Iterate(3, 0), l.Iterate(4, 2)
	for range 4 {
		check(a, 3, 1, false)
		check(b, 4, 1, false)
	}
	a.Close()
	b.Close()
	if n := len(l.spare); n > 2 {
		t.Errorf("%d spare buffers kept, want at most Prefetch (2)", n)
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
		slices.Equal(a.Pixels, b.Pixels) && slices.Equal(a.Labels, b.Labels) && slices.Equal(a.Indices, b.Indices) && slices.Equal(a.Targets, b.Targets)
}

// NormalizeTable is the loader's float32 arithmetic, (v/255 - mean)/std in that order, per channel.
func TestNormalizeTable(t *testing.T) {
	mean, std := []float32{0.485, 0.456, 0.406}, []float32{0.229, 0.224, 0.225}
	table, err := NormalizeTable(mean, std, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != 768 {
		t.Fatalf("%d entries, want 768", len(table))
	}
	for v := range 256 {
		for ch := range 3 {
			x := float32(v) / 255
			x -= mean[ch]
			x /= std[ch]
			if got := table[v*3+ch]; math.Float32bits(got) != math.Float32bits(x) {
				t.Fatalf("table[%d*3+%d] = %g, want %g", v, ch, got, x)
			}
		}
	}
	// 255/255 is exactly 1, 0/255 exactly 0.
	if table[3*255] != (1-mean[0])/std[0] || table[0] != -mean[0]/std[0] {
		t.Errorf("ends %g, %g", table[0], table[3*255])
	}
	one, err := NormalizeTable(nil, nil, 1)
	if err != nil || one[255] != 1 || one[51] != 0.2 {
		t.Errorf("no mean/std: %v %v, want x/255", one[:4], err)
	}
	for _, bad := range []struct {
		mean, std []float32
		want      string
	}{
		{[]float32{0, 0}, []float32{1}, "Mean has 2 values, want 1 or 3 (one per channel)"},
		{[]float32{0}, []float32{1, 1, 0}, "Std[2] = 0, want > 0"},
	} {
		if _, err := NormalizeTable(bad.mean, bad.std, 3); err == nil || err.Error() != bad.want {
			t.Errorf("NormalizeTable(%v, %v): %v, want %q", bad.mean, bad.std, err, bad.want)
		}
	}
}

// Uint8 batches hold the very bytes the float batches are normalised from: looked up in the
// loader's table they give its Images bit for bit, for the in-memory source and for an augmented
// ImageFolder (crop, flip, RandAugment), through Batch and through the iterator's workers; padding
// rows are zero.
func TestLoaderUint8MatchesFloats(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"a", "b", "c"}, 5, 20, 16)
	folder, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := ParseRandAugment("rand-m9-mstd0.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		src  Source
		opts LoaderOptions
	}{
		{"dataset eval", NewDatasetSource(synthDataset(23)), LoaderOptions{BatchSize: 5, Mean: []float32{0.1, 0.2}, Std: []float32{0.3, 0.4}}},
		{"dataset train", NewDatasetSource(synthDataset(23)), LoaderOptions{BatchSize: 5, Shuffle: true, Seed: 3, DropLast: true}},
		{"imagefolder train", folder, LoaderOptions{BatchSize: 4, Shuffle: true, Seed: 11, DropLast: true,
			Mean: []float32{0.485, 0.456, 0.406}, Std: []float32{0.229, 0.224, 0.225},
			Transform: &Transform{Size: 8, Train: true, Scale: [2]float64{0.08, 1}, Ratio: torchRatio, HFlip: 0.5, RandAugment: &ra}}},
		{"imagefolder eval", folder, LoaderOptions{BatchSize: 4, Mean: []float32{0.5}, Std: []float32{0.25},
			Transform: &Transform{Size: 8, CropPct: 0.875}}},
	} {
		floats, err := NewSourceLoader(tc.src, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		opts := tc.opts
		opts.Uint8 = true
		bytesL, err := NewSourceLoader(tc.src, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !bytesL.Uint8() || floats.Uint8() || !slices.Equal(bytesL.NormalizeTable(), floats.NormalizeTable()) {
			t.Fatalf("%s: Uint8() %v/%v, tables equal %v", tc.name, bytesL.Uint8(), floats.Uint8(),
				slices.Equal(bytesL.NormalizeTable(), floats.NormalizeTable()))
		}
		_, _, c := bytesL.Shape()
		table := bytesL.NormalizeTable()
		for _, workers := range []int{1, 3} {
			opts.Workers, opts.Prefetch = workers, 2
			l, err := NewSourceLoader(tc.src, opts)
			if err != nil {
				t.Fatal(err)
			}
			it := l.Iterate(2, 0)
			steps := 0
			for b, ok := it.Next(); ok; b, ok = it.Next() {
				want := mustBatch(t, floats, 2, b.Step)
				if b.Images != nil || len(b.Pixels) != len(want.Images) {
					t.Fatalf("%s: Images %d floats, Pixels %d bytes, want none and %d", tc.name, len(b.Images), len(b.Pixels), len(want.Images))
				}
				if !batchesEqual(b, mustBatch(t, bytesL, 2, b.Step)) {
					t.Fatalf("%s workers %d: step %d differs from Batch", tc.name, workers, b.Step)
				}
				if b.Size != want.Size || !slices.Equal(b.Labels, want.Labels) || !slices.Equal(b.Indices, want.Indices) {
					t.Fatalf("%s: step %d rows differ", tc.name, b.Step)
				}
				for j, v := range b.Pixels {
					if j >= b.Size*l.ImageSize() {
						if v != 0 {
							t.Fatalf("%s: step %d padding byte %d = %d", tc.name, b.Step, j, v)
						}
						continue
					}
					if got := table[int(v)*c+j%c]; math.Float32bits(got) != math.Float32bits(want.Images[j]) {
						t.Fatalf("%s: step %d value %d: table[%d] = %g, the float loader %g", tc.name, b.Step, j, v, got, want.Images[j])
					}
				}
				steps++
			}
			it.Close()
			if it.Err() != nil || steps != l.StepsPerEpoch() {
				t.Fatalf("%s: %d steps of %d: %v", tc.name, steps, l.StepsPerEpoch(), it.Err())
			}
		}
	}
}

// Random erasing and mixup/cutmix work on normalised floats: uint8 batches refuse them, saying why.
func TestLoaderUint8Refusals(t *testing.T) {
	ds := synthDataset(20)
	erasing := &Transform{Size: 3, Train: true, Erasing: RandomErasing{Prob: 0.25, Mode: "pixel"}}
	for _, tc := range []struct {
		opts LoaderOptions
		want string
	}{
		{LoaderOptions{BatchSize: 4, Uint8: true, Transform: erasing}, "uint8 batches cannot carry random erasing (probability 0.25)"},
		{LoaderOptions{BatchSize: 4, Uint8: true, Mixup: &Mixup{MixupAlpha: 0.2, Prob: 1, NumClasses: 10}}, "uint8 batches cannot carry mixup/cutmix"},
	} {
		if _, err := NewLoader(ds, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewLoader(%+v): %v, want an error containing %q", tc.opts, err, tc.want)
		}
		tc.opts.Uint8 = false
		if _, err := NewLoader(ds, tc.opts); err != nil {
			t.Errorf("the same with float batches: %v", err)
		}
	}
	// Erasing is a training augmentation: an eval transform that carries it is not refused.
	if _, err := NewLoader(ds, LoaderOptions{BatchSize: 4, Uint8: true,
		Transform: &Transform{Size: 3, Erasing: RandomErasing{Prob: 0.25, Mode: "pixel"}}}); err != nil {
		t.Errorf("eval transform: %v", err)
	}
}
