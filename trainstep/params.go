package trainstep

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs"
)

// Parameter groups for fine-tuning: optimizer.freeze takes variables out of training altogether (no
// gradient, no update, no weight decay, no optimizer slot, no part in the clipping norm: PyTorch's
// requires_grad=False), and optimizer.lr_mult scales the learning rate of others (PyTorch's
// per-group lr). Both name variables by their state_dict keys, which users of torchvision and timm
// know ("layer4.2.conv3.weight"), with glob patterns (MatchKey).

// StateDictNamer is a Model that names its variables by a reference's state_dict keys (Net does);
// for any other model the keys are graphs.DefaultTorchName's.
type StateDictNamer interface {
	StateDictKey(scope, name string) (string, bool)
}

// MatchKey reports whether a freeze or lr_mult pattern matches a state_dict key: the glob (path.Match:
// *, ?, [...]; keys hold no '/', so * crosses dots) matches the key or one of its module prefixes,
// so "layer1" matches "layer1.0.conv1.weight" and "layer1.*" does too, but neither "layer10.weight".
func MatchKey(pattern, key string) bool {
	if ok, _ := path.Match(pattern, key); ok {
		return true
	}
	for i := range len(key) {
		if key[i] == '.' {
			if ok, _ := path.Match(pattern, key[:i]); ok {
				return true
			}
		}
	}
	return false
}

// paramGroups is the optimizer config's freeze list and lr factors.
type paramGroups struct {
	freeze []string
	// lrMult's patterns, longest first (the longest matching pattern gives a key its factor).
	patterns []string
	factors  map[string]float64
}

func newParamGroups(o config.OptimizerConfig) paramGroups {
	p := paramGroups{freeze: o.Freeze, factors: o.LRMult}
	p.patterns = slices.SortedFunc(maps.Keys(o.LRMult), func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b))
	})
	return p
}

// split drops the frozen variables from the trained ones (vars, with their weight-decay flags) and
// returns the learning-rate factor of each that remains. It panics, as graph building does, when a
// pattern matches no trained variable (a typo would otherwise silently train everything) or when
// nothing is left to train.
func (p paramGroups) split(model Model, vars []*context.Variable, decay []bool) ([]*context.Variable, []bool, []float64) {
	if len(p.freeze) == 0 && len(p.patterns) == 0 {
		return vars, decay, nil
	}
	keyOf := graphs.DefaultTorchName
	if namer, ok := model.(StateDictNamer); ok {
		keyOf = namer.StateDictKey
	}
	used := map[string]bool{}
	var keptVars []*context.Variable
	var keptDecay []bool
	var factors []float64
	var example string
	for i, v := range vars {
		key, ok := keyOf(v.Scope(), v.Name())
		if !ok {
			key = v.ScopeAndName() // no state_dict counterpart: matched by its checkpoint name
		}
		example = key
		frozen := false
		for _, pat := range p.freeze {
			if MatchKey(pat, key) {
				used["freeze "+pat] = true
				frozen = true
			}
		}
		factor := 1.0
		for _, pat := range p.patterns {
			if MatchKey(pat, key) {
				used["lr_mult "+pat] = true
				factor = p.factors[pat]
				break
			}
		}
		if frozen {
			continue
		}
		keptVars, keptDecay, factors = append(keptVars, v), append(keptDecay, decay[i]), append(factors, factor)
	}
	var unused []string
	for _, pat := range p.freeze {
		if !used["freeze "+pat] {
			unused = append(unused, fmt.Sprintf("optimizer.freeze %q", pat))
		}
	}
	for _, pat := range slices.Sorted(maps.Keys(p.factors)) {
		if !used["lr_mult "+pat] {
			unused = append(unused, fmt.Sprintf("optimizer.lr_mult %q", pat))
		}
	}
	if len(unused) > 0 {
		panic(fmt.Errorf("%s: matches no trained variable (patterns match state_dict keys such as %q)",
			strings.Join(unused, ", "), example))
	}
	if len(keptVars) == 0 {
		panic(fmt.Errorf("optimizer.freeze %q freezes every trained variable: nothing is left to train", p.freeze))
	}
	return keptVars, keptDecay, factors
}

// updateInGroups runs the optimizer over the variables, those sharing an lr factor together at
// lr·factor (factors nil: all at lr). Each variable's update depends only on its own gradient and
// slots, so the groups are independent.
func updateInGroups(opt Optimizer, ctx *context.Context, vars []*context.Variable, grads []*Node, decay []bool,
	factors []float64, lr *Node, host ...*Node) {
	if factors == nil {
		opt.Update(ctx, vars, grads, decay, lr, host...)
		return
	}
	var order []float64
	for _, f := range factors {
		if !slices.Contains(order, f) {
			order = append(order, f)
		}
	}
	for _, f := range order {
		var gv []*context.Variable
		var gg []*Node
		var gd []bool
		for i, vf := range factors {
			if vf == f {
				gv, gg, gd = append(gv, vars[i]), append(gg, grads[i]), append(gd, decay[i])
			}
		}
		rate := lr
		if f != 1 {
			rate = MulScalar(lr, f)
		}
		opt.Update(ctx, gv, gg, gd, rate, host...)
	}
}
