package netspec

import (
	"fmt"
	"slices"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// ArgType is what an argument's value must be.
type ArgType int

const (
	TypeInt    ArgType = iota // an integer in [Min, Max]
	TypeUnits                 // an integer in [Min, Max], or the word `classes` (the net's class count)
	TypeFloat                 // a number in [Min, Max] ([Min, Max) when Open)
	TypeBool                  // true or false
	TypeChoice                // one of Choices
	TypeLayers                // a nested list of layers
)

// Classes is the value a TypeUnits argument holds for the word `classes`.
const Classes = -1

// Arg is one argument of a layer kind: its schema and its documentation.
type Arg struct {
	Name     string
	Type     ArgType
	Required bool
	Default  any
	Min, Max float64
	Open     bool
	Choices  []string
	Doc      string
	// DefaultDoc, when set, is what the docs say of the default instead of its value.
	DefaultDoc string
}

// expect says what a value must be, for an error.
func (a Arg) expect() string {
	switch a.Type {
	case TypeInt:
		return fmt.Sprintf("an integer in [%g, %g]", a.Min, a.Max)
	case TypeUnits:
		return fmt.Sprintf("an integer in [%g, %g] or `classes`", a.Min, a.Max)
	case TypeFloat:
		if a.Open {
			return fmt.Sprintf("a number in [%g, %g)", a.Min, a.Max)
		}
		return fmt.Sprintf("a number in [%g, %g]", a.Min, a.Max)
	case TypeBool:
		return "true or false"
	case TypeChoice:
		return "one of: " + strings.Join(a.Choices, ", ")
	case TypeLayers:
		return "a non-empty list of layers"
	}
	return "?"
}

// Describe renders the argument for the docs: name, type, default.
func (a Arg) Describe() string {
	s := "`" + a.Name + "`"
	var notes []string
	switch {
	case a.Required:
		notes = append(notes, "required")
	case a.DefaultDoc != "":
		notes = append(notes, "default: "+a.DefaultDoc)
	default:
		notes = append(notes, fmt.Sprintf("default `%v`", a.Default))
	}
	if a.Type == TypeChoice {
		notes = append(notes, strings.Join(a.Choices, " \\| "))
	}
	return s + " (" + strings.Join(notes, "; ") + "): " + a.Doc
}

// Kind is one entry of the layer vocabulary: its arguments, how it maps an input shape to an output
// shape (checking it, counting parameters and MACs into the layer), and how it builds.
type Kind struct {
	Name, Doc string
	Args      []Arg
	// Infer checks l at input shape in and returns the output shape; it sets l.Params and l.MACs (as
	// graphs.Stats counts them). A problem of one argument is an ArgError.
	Infer func(p *Checker, l *Layer, in []int) ([]int, error)
	// Build adds the layer to the graph; ctx is already in the layer's scope.
	Build func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node
	// Norms are the sub-scopes holding normalisation parameters ("" is the layer's own scope), which
	// weight decay skips.
	Norms []string
}

func (k *Kind) argList() string {
	names := []string{"name"}
	for _, a := range k.Args {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// kinds holds the layer kinds by their folded names (foldName).
var kinds = map[string]*Kind{}

// foldName is the spelling-free form of a kind's or an argument's name: lower case without
// underscores, so the book's signatures (`denseBlock: {growthRate: 32}`), snake case
// (`dense_block: {growth_rate: 32}`) and the registered spelling all name the same thing.
func foldName(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "_", ""))
}

// Register adds a layer kind; a duplicate (also one that differs only in case or underscores, or an
// argument so spelled twice) is a programming error.
func Register(k Kind) {
	key := foldName(k.Name)
	if _, dup := kinds[key]; dup {
		panic("netspec: layer kind " + k.Name + " registered twice")
	}
	seen := map[string]bool{"name": true}
	for _, a := range k.Args {
		if seen[foldName(a.Name)] {
			panic("netspec: layer kind " + k.Name + " has argument " + a.Name + " twice (or as name)")
		}
		seen[foldName(a.Name)] = true
	}
	kinds[key] = &k
}

// KindNames lists the layer kinds as registered, sorted.
func KindNames() []string {
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	return names
}

// Lookup returns a layer kind by name, in any of the spellings foldName equates.
func Lookup(name string) (*Kind, bool) {
	k, ok := kinds[foldName(name)]
	return k, ok
}

// Shape helpers for the kinds' checks (exported for kinds registered by other packages).

// NeedImage refuses an input that is not an image [height, width, channels].
func NeedImage(in []int) error {
	if len(in) != 3 {
		return fmt.Errorf("expected an image input [height, width, channels], got %s", shapeString(in))
	}
	return nil
}

// NeedTokens refuses an input that is not tokens [tokens, dim].
func NeedTokens(in []int) error {
	if len(in) != 2 {
		return fmt.Errorf("expected tokens [tokens, dim] (after patch_embed), got %s", shapeString(in))
	}
	return nil
}

// window returns the output size of a k-wide window at stride s over n cells padded by lo+hi, or an
// error naming field when the window does not fit.
func window(field string, n, k, s, lo, hi int, what string) (int, error) {
	if n+lo+hi < k {
		return 0, ArgError(field, "%d is larger than the %d-cell input%s (%s); expected at most %d", k, n, padNote(lo, hi), what, n+lo+hi)
	}
	return (n+lo+hi-k)/s + 1, nil
}

func padNote(lo, hi int) string {
	if lo+hi == 0 {
		return ""
	}
	return fmt.Sprintf(" padded by %d+%d", lo, hi)
}

// Product multiplies v as int64: a parameter or MAC count.
func Product(v ...int) int64 {
	n := int64(1)
	for _, x := range v {
		n *= int64(x)
	}
	return n
}

// Argument templates shared by several kinds.

// WidthArg is a required width (channels, units) in [1, MaxDim].
func WidthArg(name, doc string) Arg {
	return Arg{Name: name, Type: TypeInt, Required: true, Min: 1, Max: MaxDim, Doc: doc}
}

// KernelArg is a kernel size in [1, MaxKernel], required or defaulting to def.
func KernelArg(name string, required bool, def int, doc string) Arg {
	return Arg{Name: name, Type: TypeInt, Required: required, Default: def, Min: 1, Max: MaxKernel, Doc: doc}
}

func epsArg(def float64) Arg {
	return Arg{Name: "eps", Type: TypeFloat, Default: def, Min: 0, Max: 1, Open: true, Doc: "added to the variance inside the root"}
}

// activationDocs are the argument-free element-wise kinds.
var activationDocs = map[string]string{
	"relu": "max(x, 0)", "relu6": "min(max(x, 0), 6)", "silu": "x·sigmoid(x) (swish)", "sigmoid": "1/(1+e^−x)",
	"tanh": "tanh(x)",
}

func init() {
	Register(Kind{
		Name: "input", Doc: "the first entry, and only there: one example's image shape and the default class count (net.image_size and net.num_classes override them)",
		Args: []Arg{
			{Name: "size", Type: TypeInt, Required: true, Min: 1, Max: MaxImageSize, Doc: "height and width"},
			WidthArg("channels", "image channels (1 for MNIST, 3 for RGB)"),
			WidthArg("classes", "default number of classes (the logits' size)"),
		},
		Infer: func(_ *Checker, _ *Layer, in []int) ([]int, error) { return in, nil },
		Build: func(_ *Builder, _ *context.Context, _ *Layer, x *Node) *Node { return x },
	})
	for name, doc := range activationDocs {
		Register(Kind{Name: name, Doc: doc + ", element-wise (graphs' " + name + ")",
			Infer: func(_ *Checker, _ *Layer, in []int) ([]int, error) { return in, nil },
			Build: func(_ *Builder, _ *context.Context, _ *Layer, x *Node) *Node { return activation(name, x) },
		})
	}
	Register(Kind{Name: "gelu", Doc: "x·Φ(x), element-wise",
		Args:  []Arg{{Name: "form", Type: TypeChoice, Default: "erf", Choices: []string{"erf", "tanh"}, Doc: "exact (erf) or tanh-approximated"}},
		Infer: func(_ *Checker, _ *Layer, in []int) ([]int, error) { return in, nil },
		Build: func(_ *Builder, _ *context.Context, l *Layer, x *Node) *Node { return gelu(x, l.Str("form")) },
	})
	registerConvKinds()
	registerDenseKinds()
	registerBlockKinds()
}

// activation applies a named element-wise activation.
func activation(name string, x *Node) *Node {
	switch name {
	case "relu":
		return graphs.ReLU(x)
	case "relu6":
		return graphs.ReLU6(x)
	case "silu":
		return graphs.Swish(x)
	case "sigmoid":
		return Logistic(x)
	case "tanh":
		return Tanh(x)
	}
	panic("netspec: unknown activation " + name)
}

// Bound checks a derived width (e.g. filters·expand) against MaxDim.
func Bound(field string, v int) error {
	if v > MaxDim || v < 1 {
		return ArgError(field, "gives a width of %d, expected one in [1, %d]", v, MaxDim)
	}
	return nil
}

// KindTable renders the vocabulary as the Markdown table docs/nets.md shows (a test keeps them equal).
func KindTable() string { return KindTableOf(KindNames()) }

// KindTableOf renders the named kinds, in the order given, as KindTable does (docs/bestiary.md shows
// the bestiary's).
func KindTableOf(names []string) string {
	var b strings.Builder
	b.WriteString("| layer | what it is | arguments |\n|---|---|---|\n")
	for _, name := range names {
		k, _ := Lookup(name)
		args := make([]string, len(k.Args))
		for i, a := range k.Args {
			args[i] = a.Describe()
		}
		text := strings.Join(args, "; ")
		if text == "" {
			text = "–"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, k.Doc, text)
	}
	return b.String()
}
