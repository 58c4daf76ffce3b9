package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ParallelChunks runs every chunk exactly once and returns only after all have run: from one caller and
// from several at once, with chunks that call ParallelChunks themselves, at several GOMAXPROCS.
func TestParallelChunksRunsEveryChunkOnce(t *testing.T) {
	check := func(t *testing.T, chunks, workers int, nested bool) {
		bounds := SplitRange(chunks*3, chunks, 1)
		counts := make([]atomic.Int32, chunks*3)
		ParallelChunks(bounds, workers, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				counts[i].Add(1)
			}
			if nested {
				inner := make([]atomic.Int32, 40)
				ParallelChunks(SplitRange(40, 8, 1), workers, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						inner[i].Add(1)
					}
				})
				for i := range inner {
					if n := inner[i].Load(); n != 1 {
						t.Errorf("nested: index %d ran %d times", i, n)
					}
				}
			}
		})
		for i := range counts {
			if n := counts[i].Load(); n != 1 {
				t.Fatalf("%d chunks on %d workers (nested %v): index %d ran %d times", chunks, workers, nested, i, n)
			}
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{2, 4, 1} {
		runtime.GOMAXPROCS(procs)
		for _, chunks := range []int{1, 2, 3, 8, 64} {
			for _, workers := range []int{1, 2, 4, 9} {
				check(t, chunks, workers, false)
				check(t, chunks, workers, true)
			}
		}
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 200 {
					check(t, 16, procs, false)
				}
			}()
		}
		wg.Wait()
	}
}

// A chunk that blocks until another chunk of the same call has run finishes: the chunks are shared with
// another goroutine, and the caller waits for the one still inside fn.
func TestParallelChunksSharesChunks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for range 20 {
		other := make(chan struct{})
		var ran atomic.Int32
		ParallelChunks([]int{0, 1, 2}, 2, func(lo, _ int) {
			ran.Add(1)
			if lo == 0 {
				select {
				case <-other:
				case <-time.After(10 * time.Second):
					t.Error("chunk 1 never ran beside chunk 0")
				}
				return
			}
			close(other)
		})
		if n := ran.Load(); n != 2 {
			t.Fatalf("%d chunks ran, want 2", n)
		}
	}
}
