package data

import (
	"runtime"
	"slices"
	"testing"
)

// Replicas split each global batch without overlap; for eval the union over replicas is every
// example exactly once, the tail masked.
func TestReplicaSharding(t *testing.T) {
	// 13 examples leave the third replica's share of the last eval batch empty.
	for _, n := range []int{23, 13} {
		testReplicaSharding(t, n)
	}
}

func testReplicaSharding(t *testing.T, n int) {
	ds := synthDataset(n)
	for _, dropLast := range []bool{true, false} {
		const replicas, bs = 3, 4
		var loaders []*Loader
		for r := range replicas {
			loaders = append(loaders, mustLoader(t, ds, LoaderOptions{BatchSize: bs, Shuffle: true, Seed: 3, DropLast: dropLast,
				Replica: r, Replicas: replicas}))
		}
		wantSteps := n / (replicas * bs)
		if !dropLast {
			wantSteps = (n + replicas*bs - 1) / (replicas * bs)
		}
		var seen []int
		for step := range loaders[0].StepsPerEpoch() {
			for r, l := range loaders {
				if l.StepsPerEpoch() != wantSteps {
					t.Fatalf("DropLast %v: %d steps, want %d", dropLast, l.StepsPerEpoch(), wantSteps)
				}
				b := mustBatch(t, l, 1, step)
				base := step*bs*replicas + r*bs
				if want := l.Order(1)[min(base, n):min(base+bs, n)]; !slices.Equal(b.Indices, want) {
					t.Errorf("DropLast %v step %d replica %d: indices %v, want %v", dropLast, step, r, b.Indices, want)
				}
				seen = append(seen, b.Indices...)
			}
		}
		slices.Sort(seen)
		if d := len(slices.Compact(seen)); d != len(seen) || (dropLast && d != wantSteps*replicas*bs) || (!dropLast && d != n) {
			t.Errorf("%d examples, DropLast %v: %d seen, %d distinct", n, dropLast, len(seen), d)
		}
	}
	if _, err := NewLoader(ds, LoaderOptions{BatchSize: 2, Replica: 2, Replicas: 2}); err == nil {
		t.Error("replica 2 of 2 accepted")
	}
}

// Augmented batches from an ImageFolder are the same whatever the number of workers, the prefetch
// depth and the starting step: they are a pure function of (seed, epoch, step).
func TestAugmentedLoaderIsDeterministic(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"a", "b", "c"}, 5, 20, 16)
	src, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	tf := &Transform{Size: 8, Train: true, Scale: [2]float64{0.08, 1}, Ratio: torchRatio, HFlip: 0.5,
		Erasing: RandomErasing{Prob: 0.5}}
	opts := LoaderOptions{BatchSize: 4, Shuffle: true, Seed: 11, DropLast: true, Transform: tf,
		Mean: []float32{0.5, 0.4, 0.3}, Std: []float32{0.2, 0.2, 0.2}}
	ref, err := NewSourceLoader(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	if ref.StepsPerEpoch() != 3 {
		t.Fatalf("%d steps, want 15/4 = 3", ref.StepsPerEpoch())
	}
	for _, workers := range []int{1, 3} {
		opts.Workers, opts.Prefetch = workers, workers
		l, _ := NewSourceLoader(src, opts)
		for _, start := range []int{0, 2} {
			it := l.Iterate(4, start)
			step := start
			for b, ok := it.Next(); ok; b, ok = it.Next() {
				want := mustBatch(t, ref, 4, step)
				if !batchesEqual(b, want) {
					t.Fatalf("workers %d start %d: step %d differs from Batch", workers, start, step)
				}
				for row, i := range b.Indices {
					if b.Labels[row] != src.Label(i) {
						t.Errorf("row %d label %d, want %d", row, b.Labels[row], src.Label(i))
					}
				}
				step++
			}
			if it.Err() != nil || step != 3 {
				t.Errorf("workers %d: stopped at step %d: %v", workers, step, it.Err())
			}
			it.Close()
		}
	}
	a, b := mustBatch(t, ref, 0, 0), mustBatch(t, ref, 1, 0)
	if slices.Equal(a.Images, b.Images) {
		t.Error("epochs 0 and 1 gave the same first batch")
	}
}

// Heap use stays flat over many epochs of decoding and augmenting: buffers are reused, nothing
// accumulates.
func TestLoaderMemoryFlat(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"a", "b"}, 4, 24, 20)
	src, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewSourceLoader(src, LoaderOptions{BatchSize: 4, Shuffle: true, DropLast: true, Workers: 2,
		Transform: &Transform{Size: 16, Train: true, Scale: [2]float64{0.08, 1}, Ratio: torchRatio, HFlip: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	epochs := func(from, to int) {
		for e := from; e < to; e++ {
			it := l.Iterate(e, 0)
			for _, ok := it.Next(); ok; _, ok = it.Next() {
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
			it.Close()
		}
	}
	epochs(0, 20)
	before := heap()
	epochs(20, 220)
	after := heap()
	t.Logf("heap after 20 epochs %d KiB, after 220 %d KiB", before>>10, after>>10)
	if after > before+256<<10 {
		t.Errorf("heap grew from %d to %d bytes over 200 epochs", before, after)
	}
}

// Repeated augmentation: an epoch keeps N rows, made of N/k examples each k times; copies are dealt
// round-robin over the replicas, and with one replica they sit in consecutive rows.
func TestRepeatedAugmentationOrder(t *testing.T) {
	ds := synthDataset(24)
	const k, bs, replicas = 3, 2, 2
	var loaders []*Loader
	for r := range replicas {
		loaders = append(loaders, mustLoader(t, ds, LoaderOptions{BatchSize: bs, Shuffle: true, Seed: 5, DropLast: true,
			Replica: r, Replicas: replicas, Repeats: k}))
	}
	perm := permutation(24, true, 5, 1)
	count := map[int]int{}
	// Replica r's stream, row by row, must be g[r], g[r+R], g[r+2R], ... with g = perm repeated k times.
	for r, l := range loaders {
		row := 0
		for step := range l.StepsPerEpoch() {
			b := mustBatch(t, l, 1, step)
			for _, idx := range b.Indices {
				if want := perm[(row*replicas+r)/k]; idx != want {
					t.Fatalf("replica %d row %d: example %d, want %d", r, row, idx, want)
				}
				count[idx]++
				row++
			}
		}
	}
	if len(count) != 24/k {
		t.Errorf("%d distinct examples in the epoch, want %d", len(count), 24/k)
	}
	for idx, c := range count {
		if c != k {
			t.Errorf("example %d seen %d times, want %d", idx, c, k)
		}
	}
	one := mustLoader(t, ds, LoaderOptions{BatchSize: 4, Shuffle: true, Seed: 5, DropLast: true, Repeats: k})
	if got := one.Order(1)[:6]; !slices.Equal(got, []int{perm[0], perm[0], perm[0], perm[1], perm[1], perm[1]}) {
		t.Errorf("one replica: order starts %v, want each example %d times in a row", got, k)
	}
	if _, err := NewLoader(ds, LoaderOptions{BatchSize: 2, Repeats: -1}); err == nil {
		t.Error("negative repeats accepted")
	}
}
