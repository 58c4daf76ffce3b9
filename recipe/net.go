package recipe

import (
	"fmt"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/netspec"
)

// Net returns the net the config trains: the registered net.name, or the spec loaded at the
// config's image size and class count.
func Net(n config.NetConfig) (graphs.Spec, error) {
	if !n.HasSpec() {
		return graphs.Get(n.Name)
	}
	if n.SpecFile != "" {
		return graphs.Spec{}, fmt.Errorf("net.spec_file %s was not read: load the recipe with recipe.Load", n.SpecFile)
	}
	net, err := netspec.Load("net.spec", n.Spec, netspec.Sizes{ImageSize: n.ImageSize, NumClasses: n.NumClasses})
	if err != nil {
		return graphs.Spec{}, err
	}
	return net.Spec(config.SpecNetLabel), nil
}

// NetOptions resolves the net section's options for graphs; seed seeds the initial weights.
func NetOptions(n config.NetConfig, seed int) (graphs.Options, error) {
	padding, err := graphs.ParsePadding(n.Padding)
	if err != nil {
		return graphs.Options{}, fmt.Errorf("net.padding: %w", err)
	}
	gelu, err := graphs.ParseGELU(n.GELU)
	if err != nil {
		return graphs.Options{}, fmt.Errorf("net.gelu: %w", err)
	}
	opts := graphs.Options{
		NumClasses: n.NumClasses, Width: n.Width, ImageSize: n.ImageSize, Precision: n.Precision,
		Padding: padding, GELU: gelu, BNEpsilon: n.BNEpsilon, BNDecay: n.BNDecay, Seed: uint64(seed),
		ZeroInitLast: n.ZeroInitLast, FP32Head: n.FP32Head,
	}
	if n.Dropout >= 0 {
		rate := n.Dropout
		opts.DropoutRate = &rate
	}
	if n.DropPath >= 0 {
		rate := n.DropPath
		opts.DropPathRate = &rate
	}
	return opts, nil
}
