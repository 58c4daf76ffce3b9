package trainer

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/pjrt"
)

// A backend with fewer devices than replicas is refused before anything is built.
func TestReplicasRefusedOnOneDevice(t *testing.T) {
	b, err := pjrt.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	cfg := config.Defaults()
	cfg.Replicas = 2
	_, err = sessionOn(cfg, b)
	if err == nil || !strings.Contains(err.Error(), "replicas 2: backend go has 1 device(s)") {
		t.Fatalf("sessionOn with 2 replicas on the go backend: %v", err)
	}
	cfg.Replicas = 1
	if _, err := sessionOn(cfg, b); err != nil {
		t.Errorf("one replica: %v", err)
	}
}

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

func emitConfig(t *testing.T, net, optimizer string, batch, replicas int) config.Config {
	t.Helper()
	cfg := config.Defaults()
	cfg.Name, cfg.Backend, cfg.Replicas = "emit", "xla:cuda", replicas
	cfg.Net.Name = net
	cfg.Data.BatchSize = batch
	cfg.Optimizer.Name = optimizer
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// count returns how many times the pattern occurs in text.
func count(text, pattern string) int {
	return len(regexp.MustCompile(pattern).FindAllStringIndex(text, -1))
}

func TestEmitTrainStep(t *testing.T) {
	if !pjrt.EmitAvailable {
		t.Skip("built without cgo: no StableHLO emit")
	}
	cfg := emitConfig(t, "mnist_cnn", "sgd", 8, 1)
	text, err := EmitTrainStep(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"func.func @main", "stablehlo.convolution", "stablehlo.reduce", "stablehlo.dot_general",
		"stablehlo.select_and_scatter", // max-pool gradient
		"tensor<8x28x28x1xf32>", "tensor<8xi32>",
		// momentum SGD: the velocity slots are inputs and outputs, and v' = 0.9 v + g is in the program
		"%var__optimizer_model_fc1_weight_velocity: tensor<9216x128xf32>", "dense<0.8999999761581421>",
		"dense<0.125>", // the batch mean of the loss, 1/8
	} {
		if !strings.Contains(text, want) {
			t.Errorf("train step lacks %q", want)
		}
	}
	if strings.Contains(text, "num_partitions") || strings.Contains(text, "sdy.") {
		t.Errorf("one replica, but the module is partitioned")
	}
}

// The 2-replica AdamW step in bfloat16: the module is the global-batch program (images 8x28x28x1),
// with the batch axis sharded over a 2-device mesh and the variables replicated; XLA partitions it at
// compile time (so the collectives are not in this text).
func TestEmitTrainStepReplicas(t *testing.T) {
	if !pjrt.EmitAvailable {
		t.Skip("built without cgo: no StableHLO emit")
	}
	cfg := emitConfig(t, "mnist_cnn", "adamw", 8, 2)
	cfg.Net.Precision = "bfloat16"
	text, err := EmitTrainStep(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`sdy.mesh @mesh = <["replica"=2]>`, "stablehlo.num_partitions = 2", "stablehlo.num_replicas = 1",
		`%arg0: tensor<8x28x28x1xui8> { sdy.sharding = #sdy.sharding<@mesh, [{"replica"}, {}, {}, {}]> }`,
		`%arg1: tensor<8xi32> { sdy.sharding = #sdy.sharding<@mesh, [{"replica"}]> }`,
		`%var__model_fc1_weight: tensor<9216x128xf32> { sdy.sharding = #sdy.sharding<@mesh, [{}, {}]> }`,
		`%arg2: tensor<f32> { sdy.sharding = #sdy.sharding<@mesh, []> }`, // the learning rate
		"xbf16>", "stablehlo.sqrt", "stablehlo.divide", // AdamW: m/(sqrt(v)+eps) in the program
		"%var__optimizer_model_fc1_weight_exp_avg:", "%var__optimizer_model_fc1_weight_exp_avg_sq:",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("2-replica step lacks %q", want)
		}
	}
	if n := count(text, `sdy.sharding<@mesh, \[\{"replica"\}`); n != 2 {
		t.Errorf("%d inputs sharded over the replicas, want 2 (images and labels)", n)
	}
}

// TestEmitBF16ConstantsWellFormed emits every registered net's bfloat16 train step and checks that each
// constant is one StableHLO can parse. GoMLX v0.26's xla builder writes the zero of select_and_scatter
// (max-pool's gradient) in bfloat16 as a ui16 constant with Go's "don't know how to present" text in it,
// which the CUDA plugin refused for ResNet-50 on the H200 (docs/benchmarks.md); graphs.MaxPool2D pools
// half-precision inputs in float32 to avoid it.
func TestEmitBF16ConstantsWellFormed(t *testing.T) {
	if !pjrt.EmitAvailable {
		t.Skip("built without cgo: no StableHLO emit")
	}
	for _, name := range graphs.Names() {
		cfg := emitConfig(t, name, "sgd", 2, 1)
		cfg.Net.Precision, cfg.Net.Width = "bfloat16", 0.125
		text, err := EmitTrainStep(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !strings.Contains(text, "bf16>") {
			t.Errorf("%s: no bfloat16 tensor in the bfloat16 step", name)
		}
		for _, bad := range []string{"don't know how", "%!", ": tensor<ui16> }"} {
			if i := strings.Index(text, bad); i >= 0 {
				line := text[strings.LastIndex(text[:i], "\n")+1:]
				line, _, _ = strings.Cut(line, "\n")
				t.Errorf("%s: malformed constant: %s", name, line)
			}
		}
	}
}
