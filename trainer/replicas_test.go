package trainer

import (
	"slices"
	"testing"

	"github.com/trainer/trainer/data"
)

// The replica loaders' shards, concatenated in device order, are exactly the global batch the
// single-device loader yields at batch R·n: the partitioned step sees the same examples, each once
// per epoch (eval included, whose last batch is padded and masked).
func TestReplicaLoadersSplitTheGlobalBatch(t *testing.T) {
	// 45 = 3 global batches of 12 + 9: the last eval batch gives replica 2 one real row. (With 37, the
	// last batch has one row and data.Loader.setup panics for replicas 1 and 2: see the issue note.)
	const n, replicas, perReplica = 45, 3, 4
	ds := &data.Dataset{N: n, Height: 2, Width: 2, Channels: 1, Images: make([]uint8, n*4), Labels: make([]int32, n)}
	for i := range n {
		ds.Labels[i] = int32(i % 10)
		ds.Images[i*4] = uint8(i)
	}
	for _, train := range []bool{true, false} {
		global, err := data.NewLoader(ds, data.LoaderOptions{BatchSize: replicas * perReplica, Shuffle: train, DropLast: train, Seed: 7, Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		shards := make([]*data.Loader, replicas)
		for r := range replicas {
			shards[r], err = data.NewLoader(ds, data.LoaderOptions{BatchSize: perReplica, Shuffle: train, DropLast: train, Seed: 7, Workers: 1,
				Replica: r, Replicas: replicas})
			if err != nil {
				t.Fatal(err)
			}
			if shards[r].StepsPerEpoch() != global.StepsPerEpoch() {
				t.Fatalf("train=%v: replica %d has %d steps, the global loader %d", train, r, shards[r].StepsPerEpoch(), global.StepsPerEpoch())
			}
		}
		seen := map[int]int{}
		for step := range global.StepsPerEpoch() {
			g, err := global.Batch(1, step)
			if err != nil {
				t.Fatal(err)
			}
			var joined []int
			size := 0
			for r := range replicas {
				b, err := shards[r].Batch(1, step)
				if err != nil {
					t.Fatal(err)
				}
				joined = append(joined, b.Indices...)
				size += b.Size
				for i := range b.Size {
					if b.Images[i*4] != g.Images[(r*perReplica+i)*4] {
						t.Fatalf("train=%v step %d replica %d row %d: pixel %v, global row %v", train, step, r, i, b.Images[i*4], g.Images[(r*perReplica+i)*4])
					}
				}
			}
			if !slices.Equal(joined, g.Indices) || size != g.Size {
				t.Fatalf("train=%v step %d: shards %v (size %d), global %v (size %d)", train, step, joined, size, g.Indices, g.Size)
			}
			for _, i := range joined {
				seen[i]++
			}
		}
		want := n
		if train {
			want = n / (replicas * perReplica) * replicas * perReplica // DropLast
		}
		if len(seen) != want {
			t.Errorf("train=%v: %d distinct examples in an epoch, want %d", train, len(seen), want)
		}
		for i, c := range seen {
			if c != 1 {
				t.Errorf("train=%v: example %d seen %d times", train, i, c)
			}
		}
	}
}
