package emit

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/trainer/trainer/backend/pjrtplugin"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/recipe"
)

func emitConfig(t *testing.T, net, optimizer string, batch, replicas int) config.Config {
	t.Helper()
	cfg := config.Defaults()
	cfg.Name, cfg.Backend, cfg.Replicas = "emit", "xla:cuda", replicas
	cfg.Net.Name = net
	cfg.Data.BatchSize = batch
	cfg.Optimizer.Name = optimizer
	if err := recipe.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// count returns how many times the pattern occurs in text.
func count(text, pattern string) int {
	return len(regexp.MustCompile(pattern).FindAllStringIndex(text, -1))
}

func TestEmit(t *testing.T) {
	if !pjrtplugin.EmitAvailable {
		t.Skip("built without cgo: no StableHLO emit")
	}
	cfg := emitConfig(t, "mnist_cnn", "sgd", 8, 1)
	text, err := TrainStep(cfg)
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

// The 2-replica AdamW step in bfloat16 in data_parallel.mode auto: the module is the global-batch
// program (images 8x28x28x1), with the batch axis sharded over a 2-device mesh and the variables
// replicated; XLA partitions it at compile time (so the collectives are not in this text).
func TestEmitReplicas(t *testing.T) {
	if !pjrtplugin.EmitAvailable {
		t.Skip("built without cgo: no StableHLO emit")
	}
	cfg := emitConfig(t, "mnist_cnn", "adamw", 8, 2)
	cfg.Net.Precision, cfg.DataParallel.Mode = "bfloat16", config.DataParallelAuto
	text, err := TrainStep(cfg)
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
	if !pjrtplugin.EmitAvailable {
		t.Skip("built without cgo: no StableHLO emit")
	}
	for _, name := range graphs.Names() {
		cfg := emitConfig(t, name, "sgd", 2, 1)
		cfg.Net.Precision, cfg.Net.Width = "bfloat16", 0.125
		text, err := TrainStep(cfg)
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

// trainer emit (for xla:cuda, where auto is on) writes the step with uint8 images that it gathers
// through the table first; with device_normalize false the step takes float32 images. Over 2
// replicas: the global batch sharded over the mesh (auto), or each device's shard of 4 (spmd).
func TestEmitTakesUint8(t *testing.T) {
	if !pjrtplugin.EmitAvailable {
		t.Skip("built without cgo: no StableHLO emit")
	}
	for _, mode := range config.DataParallelModes {
		gathers := map[config.Switch]int{}
		for _, dn := range []config.Switch{"auto", "false"} {
			cfg := emitConfig(t, "cifar_cnn", "sgd", 8, 2)
			cfg.Data.Source, cfg.Data.DeviceNormalize, cfg.DataParallel.Mode = "cifar10", dn, mode
			text, err := TrainStep(cfg)
			if err != nil {
				t.Fatal(err)
			}
			arg := map[config.Switch]string{"auto": "%arg0: tensor<8x32x32x3xui8>", "false": "%arg0: tensor<8x32x32x3xf32>"}[dn]
			arg += ` { sdy.sharding = #sdy.sharding<@mesh, [{"replica"}, {}, {}, {}]> }`
			if mode == config.DataParallelSPMD {
				arg = map[config.Switch]string{"auto": "%arg0: tensor<4x32x32x3xui8>,", "false": "%arg0: tensor<4x32x32x3xf32>,"}[dn]
			}
			if !strings.Contains(text, arg) {
				t.Errorf("%s, device_normalize %s: the step does not take %s", mode, dn, arg)
			}
			gathers[dn] = count(text, `"stablehlo.gather"`)
		}
		if gathers["auto"] != gathers["false"]+1 {
			t.Errorf("%s: %d gathers with uint8 input, %d without: want one more (the table lookup)", mode, gathers["auto"], gathers["false"])
		}
	}
}

// trainer emit --replicas R (data_parallel.mode spmd) writes one device's program, num_replicas R,
// with its collectives in the text: one stablehlo.all_reduce per gradient tensor (no buckets), one for
// the loss and one for the correct count, and for each BatchNorm under sync BN two in the forward pass
// (the batch sum and the sum of squared deviations) and two in the backward (their gradients, the
// cotangents all-reduced); without sync BN, two per BatchNorm averaging its running statistics. Every
// one sums over all replicas (replica_groups [[0 … R−1]]).
func TestEmitSPMDCollectives(t *testing.T) {
	if !pjrtplugin.EmitAvailable {
		t.Skip("built without cgo: no StableHLO emit")
	}
	for _, c := range []struct {
		net               string
		replicas          int
		syncBN            bool
		trainables, norms int
	}{
		{"mnist_cnn", 2, true, 8, 0},
		{"mnist_cnn", 8, true, 8, 0},
		{"cifar8_bn", 8, true, 8 + 2*8 + 2, 8},
		{"cifar8_bn", 2, false, 8 + 2*8 + 2, 8},
	} {
		cfg := emitConfig(t, c.net, "sgd", 8*c.replicas, c.replicas)
		cfg.Net.Width, cfg.DataParallel.SyncBN = 1.0/16, c.syncBN
		text, err := TrainStep(cfg)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%s over %d replicas (sync BN %v)", c.net, c.replicas, c.syncBN)
		perNorm := map[bool]int{true: 4, false: 2}[c.syncBN]
		want := c.trainables + 2 + perNorm*c.norms
		if n := count(text, `"stablehlo.all_reduce"`); n != want {
			t.Errorf("%s: %d all-reduces, want %d (%d gradients, loss, correct count, %d per BatchNorm × %d)",
				name, n, want, c.trainables, perNorm, c.norms)
		}
		groups := make([]string, c.replicas)
		for i := range groups {
			groups[i] = fmt.Sprint(i)
		}
		if n := count(text, regexp.QuoteMeta("replica_groups = dense<[["+strings.Join(groups, ", ")+"]]>")); n != want {
			t.Errorf("%s: %d all-reduces over every replica, want %d", name, n, want)
		}
		if !strings.Contains(text, fmt.Sprintf("stablehlo.num_replicas = %d", c.replicas)) || strings.Contains(text, "sdy.") {
			t.Errorf("%s: not an SPMD module over %d replicas", name, c.replicas)
		}
		if want := "%arg0: tensor<8x"; !strings.Contains(text, want) {
			t.Errorf("%s: the program does not take one replica's 8 images", name)
		}
	}
}
