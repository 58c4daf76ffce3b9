package data

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestFastDecodeCost states what Transform.FastDecode costs in pixels on ImageNet-like JPEGs (about
// 400×350, 4:2:0): the same crops and flips as the exact path (the random sequence is unchanged),
// their RandomResizedCrop(224) outputs a little apart.
func TestFastDecodeCost(t *testing.T) {
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded: FastDecode has no effect with image/jpeg")
	}
	paths := benchJPEGs(t, t.TempDir(), 6)
	exact := Transform{Size: 224, Train: true, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5}
	fast := exact
	fast.FastDecode = true
	var se, sf augScratch
	sum, n, worst, maxDiff := 0.0, 0, 0.0, 0
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for k := range 4 {
			re, rf := rand.NewPCG(uint64(i), uint64(k)), rand.NewPCG(uint64(i), uint64(k))
			a, err := exact.decodeApply(b, 3, 0, re, &se)
			if err != nil {
				t.Fatal(err)
			}
			f, err := fast.decodeApply(b, 3, 0, rf, &sf)
			if err != nil {
				t.Fatal(err)
			}
			if re.Uint64() != rf.Uint64() {
				t.Fatalf("%s: fast decode drew a different number of values", p)
			}
			m, mean := pixelDiff(t, a, f)
			sum, n, worst, maxDiff = sum+mean, n+1, max(worst, mean), max(maxDiff, m)
		}
	}
	t.Logf("fast decode vs exact, %d crops at 224: mean abs difference %.3f levels (worst crop %.3f), max %d", n, sum/float64(n), worst, maxDiff)
	if sum == 0 || worst > 3 {
		t.Errorf("fast decode: mean difference %.3f, worst crop %.3f: want some, each <= 3 levels", sum/float64(n), worst)
	}
}

// TestShardWorkerAllocs: a loader worker reading JPEG shards (what training runs read) allocates
// nothing per image once its buffers have grown: record read and CRC, libjpeg-turbo decode,
// RandomResizedCrop, flip and normalisation all reuse the worker's scratch.
func TestShardWorkerAllocs(t *testing.T) {
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded: image/jpeg allocates its planes per image")
	}
	dir := t.TempDir()
	w, err := CreateShard(filepath.Join(dir, "t-00000-of-00001.shard"), ShardEncoded, []string{"a", "b"}, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range jpegFixtures {
		if err := w.Add(int32(i%2), readFixture(t, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(0, 1); err != nil {
		t.Fatal(err)
	}
	src, err := OpenShards(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	l, err := NewSourceLoader(src, LoaderOptions{BatchSize: 1, Mean: []float32{0.5, 0.5, 0.5}, Std: []float32{0.2, 0.2, 0.2},
		Transform: &Transform{Size: 64, Train: true, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 64*64*3)
	sc := &augScratch{}
	pos := 0
	next := func() {
		if _, err := l.decode(sc, 0, pos, pos%src.Len(), dst); err != nil {
			t.Fatal(err)
		}
		pos++
	}
	for range 40 { // grow the buffers to the largest record and box
		next()
	}
	if a := testing.AllocsPerRun(40, next); a > 0.1 {
		t.Errorf("%v allocations per image, want 0", a)
	}
}
