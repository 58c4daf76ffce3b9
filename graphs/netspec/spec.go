package netspec

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/internal/echo"
)

// Bounds on what a spec may ask for, checked before anything is allocated.
const (
	// MaxLayers bounds the entries of a spec, nested bodies included.
	MaxLayers = 1024
	// MaxDepth bounds the nesting of residual bodies (the top level is depth 1).
	MaxDepth = 8
	// MaxDim bounds every width (filters, units, dim, channels, classes).
	MaxDim = 1 << 16
	// MaxKernel bounds kernel and patch sizes, strides and pool windows.
	MaxKernel = 256
	// MaxImageSize bounds the input resolution (net.image_size's bound).
	MaxImageSize = 4096
	// MaxParameters bounds the net's trainable parameters.
	MaxParameters = 1 << 31
	// MaxActivation bounds the elements of one example's activation after any layer.
	MaxActivation = 1 << 31
)

// Error is one problem of a spec: where it was read from, the layer (its index path: "3", or "3.1"
// for the second entry of layer 3's body), the field and what was expected.
type Error struct {
	Source string // the spec file, "net.spec", or empty where the caller names the key
	Path   string // layer index path; empty for a problem of the whole list
	Kind   string // the layer's kind, when known
	Field  string // the argument, when the problem is one argument's
	Msg    string
}

func (e *Error) Error() string {
	var parts []string
	if e.Source != "" {
		parts = append(parts, e.Source)
	}
	if e.Path != "" {
		layer := "layer " + e.Path
		if e.Kind != "" {
			layer += " (" + e.Kind + ")"
		}
		parts = append(parts, layer)
	}
	if e.Field != "" {
		parts = append(parts, e.Field)
	}
	return strings.Join(append(parts, e.Msg), ": ")
}

// fieldError is a problem of one argument: the field and the message; Load adds the rest.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// ArgError is what a kind's Infer returns for a problem of one argument; Load adds the source, the
// layer and its kind.
func ArgError(field, format string, args ...any) error {
	return &fieldError{field, fmt.Sprintf(format, args...)}
}

// Sizes are the run's choices a spec's shapes depend on: 0 keeps the spec's input entry's.
type Sizes struct {
	ImageSize, NumClasses int
}

// Layer is one parsed entry, with its inferred shapes and cost for the sizes the spec was loaded at.
type Layer struct {
	Path  string
	Kind  *Kind
	Scope string // the variables' scope below the net's, e.g. "conv3" or "residual4/conv0"
	// Args are the validated arguments, defaults filled in: int, float64, bool, string or []*Layer.
	Args map[string]any
	// In and Out are one example's shapes (no batch axis): [H, W, C] images, [T, D] tokens, [F] vectors.
	In, Out []int
	// Params counts the trainable parameters and MACs the forward multiply-accumulates of one example,
	// the nested layers' included (as graphs.Stats counts them).
	Params, MACs int64
	Depth        int
}

// Int, Float, Bool, Str and Body read validated arguments.
func (l *Layer) Int(name string) int       { return l.Args[name].(int) }
func (l *Layer) Float(name string) float64 { return l.Args[name].(float64) }
func (l *Layer) Bool(name string) bool     { return l.Args[name].(bool) }
func (l *Layer) Str(name string) string    { return l.Args[name].(string) }
func (l *Layer) Body(name string) []*Layer { return l.Args[name].([]*Layer) }

// Net is a loaded spec.
type Net struct {
	Source string
	// Input is the input entry's (height, width, channels) and Classes its default class count.
	Input   [3]int
	Classes int
	// Layers are the top-level entries, the input first.
	Layers []*Layer
	// FixedInputSize is set when a layer sizes weights from the resolution (flatten, patch_embed).
	FixedInputSize bool
	norms          map[string]bool
	loadedClasses  int
}

// Load parses and checks the list of layers read from source (a spec file, or "FILE: net.spec"), and
// infers every shape at sizes. The error, if any, is one *Error.
func Load(source string, list []any, sizes Sizes) (*Net, error) {
	p := &Checker{source: source, sizes: sizes, norms: map[string]bool{}}
	return p.load(list)
}

// Checker infers a spec's shapes as it parses it; kinds' Infer functions get it to check nested
// bodies (Body), resolve `classes` (Units) and mark a net that takes one input size (FixInputSize).
type Checker struct {
	source  string
	sizes   Sizes
	count   int
	classes int
	fixed   bool
	params  int64
	norms   map[string]bool
}

// NormScopes marks sub-scopes of l (variable in number, so not the kind's Norms) as holding
// normalisation parameters, which weight decay skips.
func (p *Checker) NormScopes(l *Layer, subs ...string) {
	for _, s := range subs {
		p.norms[l.Scope+"/"+s] = true
	}
}

func (p *Checker) fail(path, kind string, err error) error {
	e := &Error{Source: p.source, Path: path, Kind: kind, Msg: err.Error()}
	if fe, ok := err.(*fieldError); ok {
		e.Field, e.Msg = fe.field, fe.msg
	}
	return e
}

func (p *Checker) load(list []any) (*Net, error) {
	if len(list) == 0 {
		return nil, &Error{Source: p.source, Msg: "no layers: expected a list whose first entry is `input: {size, channels, classes}`"}
	}
	first, err := p.entry(list[0], "0", "", 1)
	if err != nil {
		return nil, err
	}
	if first.Kind.Name != "input" {
		return nil, p.fail("0", first.Kind.Name, fmt.Errorf("expected the first entry to be `input: {size, channels, classes}`, got %s", first.Kind.Name))
	}
	net := &Net{Source: p.source, Layers: []*Layer{first}, norms: p.norms}
	net.Input = [3]int{first.Int("size"), first.Int("size"), first.Int("channels")}
	net.Classes = first.Int("classes")
	p.classes = net.Classes
	if p.sizes.NumClasses > 0 {
		p.classes = p.sizes.NumClasses
	}
	size := net.Input[0]
	if p.sizes.ImageSize > 0 {
		size = p.sizes.ImageSize
	}
	shape := []int{size, size, net.Input[2]}
	first.In, first.Out = shape, shape
	rest, out, err := p.sequence(list[1:], shape, "", "", 1, 1)
	if err != nil {
		return nil, err
	}
	net.Layers = append(net.Layers, rest...)
	if len(out) != 1 || out[0] != p.classes {
		last := net.Layers[len(net.Layers)-1]
		return nil, p.fail(last.Path, last.Kind.Name, fmt.Errorf("the net ends with shape %s, expected the logits [%d] (classes): "+
			"end with `dense: {units: classes}`", shapeString(out), p.classes))
	}
	net.FixedInputSize = p.fixed
	net.loadedClasses = p.classes
	return net, nil
}

// sequence parses entries (a body or the top level after the input) from the input shape in, numbering
// them from offset under the path prefix and the scope prefix.
func (p *Checker) sequence(list []any, in []int, path, scope string, offset, depth int) ([]*Layer, []int, error) {
	var layers []*Layer
	names := map[string]string{} // scope -> the path of the layer that has it
	for i, raw := range list {
		idx := strconv.Itoa(i + offset)
		lp := idx
		if path != "" {
			lp = path + "." + idx
		}
		l, err := p.entry(raw, lp, scope, depth)
		if err != nil {
			return nil, nil, err
		}
		if l.Kind.Name == "input" {
			return nil, nil, p.fail(lp, "input", fmt.Errorf("the input entry may only be the first of the spec"))
		}
		if prev, dup := names[l.Scope]; dup {
			// Two layers in one scope would share (or clash over) their variables.
			return nil, nil, p.fail(lp, l.Kind.Name, ArgError("name", "%s is layer %s's name too; expected names unique within a list", l.Scope, prev))
		}
		names[l.Scope] = lp
		l.In = in
		out, err := l.Kind.Infer(p, l, in)
		if e, nested := err.(*Error); nested {
			return nil, nil, e // a nested layer's own error, already located
		} else if err != nil {
			return nil, nil, p.fail(lp, l.Kind.Name, err)
		}
		if n := Elements(out); n > MaxActivation {
			return nil, nil, p.fail(lp, l.Kind.Name, fmt.Errorf("the output %s has %d elements per example, expected at most %d", shapeString(out), n, int64(MaxActivation)))
		}
		p.params += l.paramsOwn()
		if p.params > MaxParameters {
			return nil, nil, p.fail(lp, l.Kind.Name, fmt.Errorf("the net reaches %d parameters here, expected at most %d", p.params, int64(MaxParameters)))
		}
		l.Out = out
		layers = append(layers, l)
		in = out
	}
	return layers, in, nil
}

// paramsOwn is the layer's parameters outside its nested bodies (which sequence counted already).
func (l *Layer) paramsOwn() int64 {
	own := l.Params
	for _, a := range l.Kind.Args {
		if a.Type == TypeLayers {
			for _, sub := range l.Body(a.Name) {
				own -= sub.Params
			}
		}
	}
	return own
}

var scopeName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// entry parses one list entry: `kind` alone, or `kind: {args}`.
func (p *Checker) entry(raw any, path, scope string, depth int) (*Layer, error) {
	p.count++
	if p.count > MaxLayers {
		return nil, p.fail(path, "", fmt.Errorf("more than %d layers (nested ones included), the most a spec may have", MaxLayers))
	}
	var kindName string
	args := map[string]any{}
	switch v := raw.(type) {
	case string:
		kindName = v
	case map[string]any:
		if len(v) == 0 {
			return nil, p.fail(path, "", fmt.Errorf("an empty entry (`- relu:` is a key without a value); expected `- relu` or `- conv: {filters: 32, kernel: 3}`"))
		}
		if len(v) != 1 {
			return nil, p.fail(path, "", fmt.Errorf("expected one layer kind as the key, e.g. `- relu` or `- conv: {filters: 32, kernel: 3}`, got %d keys (%s)",
				len(v), strings.Join(slices.Sorted(maps.Keys(v)), ", ")))
		}
		for k, a := range v {
			kindName = k
			switch a := a.(type) {
			case map[string]any:
				args = a
			case nil:
			default:
				return nil, p.fail(path, k, fmt.Errorf("expected a mapping of arguments, got %T %s", a, echo.Value(a)))
			}
		}
	default:
		return nil, p.fail(path, "", fmt.Errorf("expected a layer (`- relu` or `- conv: {filters: 32, kernel: 3}`), got %T %s", raw, echo.Value(raw)))
	}
	kind, ok := Lookup(kindName)
	if !ok {
		return nil, p.fail(path, "", fmt.Errorf("unknown layer kind %s; expected one of: %s", echo.Quote(kindName), strings.Join(KindNames(), ", ")))
	}
	l := &Layer{Path: path, Kind: kind, Args: map[string]any{}, Depth: depth}
	leaf := path[strings.LastIndexByte(path, '.')+1:]
	name := kind.Name + leaf
	if n, ok := args["name"]; ok {
		s, isString := n.(string)
		if !isString || !scopeName.MatchString(s) {
			return nil, p.fail(path, kind.Name, ArgError("name", "got %s, expected a name of letters, digits and _ (at most 64, not starting with a digit)", echo.Value(n)))
		}
		name = s
	}
	l.Scope = name
	if scope != "" {
		l.Scope = scope + "/" + name
	}
	// Arguments in any spelling foldName equates take the registered one (args is the caller's map).
	given := map[string]string{}
	spelled := make(map[string]any, len(args))
	for _, k := range slices.Sorted(maps.Keys(args)) {
		canonical := k
		if i := slices.IndexFunc(kind.Args, func(a Arg) bool { return foldName(a.Name) == foldName(k) }); i >= 0 {
			canonical = kind.Args[i].Name
		} else if k != "name" {
			return nil, p.fail(path, kind.Name, ArgError(k, "unknown argument; %s takes: %s", kind.Name, kind.argList()))
		}
		if first, twice := given[canonical]; twice {
			return nil, p.fail(path, kind.Name, ArgError(k, "given twice (also as %s)", first))
		}
		given[canonical] = k
		spelled[canonical] = args[k]
	}
	args = spelled
	for _, a := range kind.Args {
		v, err := p.arg(a, args, l)
		if err != nil {
			return nil, p.fail(path, kind.Name, err)
		}
		l.Args[a.Name] = v
	}
	for _, sub := range kind.Norms {
		if sub == "" {
			p.norms[l.Scope] = true
		} else {
			p.norms[l.Scope+"/"+sub] = true
		}
	}
	return l, nil
}

// arg validates one argument (or fills its default).
func (p *Checker) arg(a Arg, args map[string]any, l *Layer) (any, error) {
	v, ok := args[a.Name]
	if !ok {
		if a.Required {
			return nil, ArgError(a.Name, "missing; expected %s", a.expect())
		}
		return a.Default, nil
	}
	bad := func() error { return ArgError(a.Name, "got %s, expected %s", echo.Value(v), a.expect()) }
	switch a.Type {
	case TypeInt, TypeUnits:
		if s, isString := v.(string); isString && a.Type == TypeUnits && s == "classes" {
			return Classes, nil
		}
		n, ok := v.(int)
		if !ok || float64(n) < a.Min || float64(n) > a.Max {
			return nil, bad()
		}
		return n, nil
	case TypeFloat:
		var f float64
		switch n := v.(type) {
		case int:
			f = float64(n)
		case float64:
			f = n
		default:
			return nil, bad()
		}
		// Written so that NaN (every comparison false) and the infinities fail it too.
		if !(f >= a.Min && f <= a.Max) || math.IsInf(f, 0) || (a.Open && f == a.Max) {
			return nil, bad()
		}
		return f, nil
	case TypeBool:
		b, ok := v.(bool)
		if !ok {
			return nil, bad()
		}
		return b, nil
	case TypeChoice:
		s, ok := v.(string)
		if !ok || !slices.Contains(a.Choices, s) {
			return nil, bad()
		}
		return s, nil
	case TypeLayers:
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return nil, bad()
		}
		if l.Depth >= MaxDepth {
			return nil, ArgError(a.Name, "nested %d deep, expected at most %d levels of nesting", l.Depth+1, MaxDepth)
		}
		// Parsed here, inferred by the kind's Infer (which knows the body's input shape).
		return list, nil
	}
	return nil, bad()
}

// Body infers a nested list argument of l from the input shape in, replacing the raw list by its
// layers, and returns its output shape.
func (p *Checker) Body(l *Layer, name string, in []int) ([]int, error) {
	raw := l.Args[name].([]any)
	layers, out, err := p.sequence(raw, in, l.Path, l.Scope, 0, l.Depth+1)
	if err != nil {
		return nil, err
	}
	l.Args[name] = layers
	for _, sub := range layers {
		l.Params += sub.Params
		l.MACs += sub.MACs
	}
	return out, nil
}

// FixInputSize records that a layer sizes weights from the resolution (flatten, patch_embed).
func (p *Checker) FixInputSize() { p.fixed = true }

// Units resolves a TypeUnits value: Classes stands for the net's class count.
func (p *Checker) Units(v int) int {
	if v == Classes {
		return p.classes
	}
	return v
}

func shapeString(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Elements is the number of elements of shape s.
func Elements(s []int) int64 {
	n := int64(1)
	for _, d := range s {
		n *= int64(d)
	}
	return n
}

// Spec is the net as a registered graphs.Spec (not registered: configs and the CLI hold it), named
// label.
func (n *Net) Spec(label string) graphs.Spec {
	return graphs.Spec{
		Name:        label,
		Description: fmt.Sprintf("a NetSpec of %d layers (%s)", len(n.Layers)-1, n.Source),
		InputShape:  n.Input, NumClasses: n.Classes,
		Build:          n.Build,
		NoWeightDecay:  n.NoWeightDecay,
		FixedInputSize: n.FixedInputSize,
		Reference:      "a NetSpec; state_dict keys are the layers' scopes joined with dots (conv1.weight)",
		Eval:           graphs.DefaultEval(n.Input[2]),
	}
}

// NoWeightDecay puts biases and every norm's parameters (and class tokens, position embeddings) in
// the no-decay group.
func (n *Net) NoWeightDecay(scope, name string) bool {
	switch name {
	case "bias", "cls_token", "pos_embed":
		return true
	}
	rel := strings.TrimPrefix(strings.Trim(scope, "/"), graphs.ModelScope+"/")
	return n.norms[rel]
}

// Build is the net's graphs.BuildFn.
func (n *Net) Build(ctx *context.Context, images *Node, train bool, opts graphs.Options) *Node {
	b := &Builder{Train: train, Opts: opts, classes: n.Classes}
	if opts.NumClasses > 0 {
		b.classes = opts.NumClasses
	}
	in := images.Shape().Dimensions[1:]
	b.checkShapes = slices.Equal(in, n.Layers[0].Out) && b.classes == n.loadedClasses
	x := graphs.ToCompute(images, opts)
	x = b.Sequence(ctx, x, n.Layers[1:])
	return graphs.FromCompute(x, opts)
}

// Builder carries what every layer's Build needs.
type Builder struct {
	// Train and Opts are the build's (graphs.BuildFn's) arguments.
	Train bool
	Opts  graphs.Options
	// checkShapes is set when the build is at the sizes the spec was loaded (and inferred) at.
	checkShapes bool
	classes     int
}

// Units resolves a TypeUnits value at the build's class count.
func (b *Builder) Units(v int) int {
	if v == Classes {
		return b.classes
	}
	return v
}

// Sequence builds layers in order; each layer's variables live in ctx.In(its own scope name).
func (b *Builder) Sequence(ctx *context.Context, x *Node, layers []*Layer) *Node {
	for _, l := range layers {
		name := l.Scope[strings.LastIndexByte(l.Scope, '/')+1:]
		x = l.Kind.Build(b, ctx.In(name), l, x)
		// The inferred shapes are what the table shows and the checks rely on; a layer that builds
		// another shape is a bug of its kind (sizes other than the loaded one differ legitimately).
		if got := x.Shape().Dimensions[1:]; b.checkShapes && !slices.Equal(got, l.Out) {
			panic(fmt.Sprintf("netspec: layer %s (%s) built the shape %s, but its check inferred %s", l.Path, l.Kind.Name, shapeString(got), shapeString(l.Out)))
		}
	}
	return x
}

// Row is one line of a spec's table: a layer (nested ones below their parent, Depth deeper).
type Row struct {
	Path, Kind, Scope string
	Out               []int
	Params, MACs      int64
	Depth             int
}

// Rows lists the layers in order, each nested body after its layer.
func (n *Net) Rows() []Row {
	var rows []Row
	var walk func(layers []*Layer)
	walk = func(layers []*Layer) {
		for _, l := range layers {
			rows = append(rows, Row{Path: l.Path, Kind: l.Kind.Name, Scope: l.Scope, Out: l.Out, Params: l.Params, MACs: l.MACs, Depth: l.Depth})
			for _, a := range l.Kind.Args {
				if a.Type == TypeLayers {
					walk(l.Body(a.Name))
				}
			}
		}
	}
	walk(n.Layers)
	return rows
}

// Totals are the net's trainable parameters and forward MACs per example.
func (n *Net) Totals() (params, macs int64) {
	for _, l := range n.Layers {
		params += l.Params
		macs += l.MACs
	}
	return params, macs
}

// ShapeString renders a shape as [a, b, c].
func ShapeString(s []int) string { return shapeString(s) }
