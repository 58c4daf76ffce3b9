package weights

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// Variable is one variable a net declares.
type Variable struct {
	Scope, Name string
	Shape       shapes.Shape
	Trainable   bool
}

// Path is the variable's "scope/name", the key checkpoints use.
func (v Variable) Path() string { return context.JoinScope(v.Scope, v.Name) }

// BatchTrackedKey is the BatchNorm counter PyTorch keeps next to running_mean; it does not affect
// eval, so export writes 0 and import ignores it.
const BatchTrackedKey = "num_batches_tracked"

// InputShape is the [1, h, w, c] input of one example under opts (ImageSize overrides h and w).
func InputShape(spec graphs.Spec, opts graphs.Options) []int {
	h, w, c := spec.InputShape[0], spec.InputShape[1], spec.InputShape[2]
	if opts.ImageSize > 0 {
		h, w = opts.ImageSize, opts.ImageSize
	}
	return []int{1, h, w, c}
}

// Template builds spec's eval graph once (nothing runs) in a throwaway context and lists the variables
// it declares under /model, sorted by path: what a weights file must provide.
func Template(backend backends.Backend, spec graphs.Spec, opts graphs.Options) (vars []Variable, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("building net %q: %v", spec.Name, r)
		}
	}()
	ctx := context.New()
	g := NewGraph(backend, "template_"+spec.Name)
	defer g.Finalize()
	images := Parameter(g, "images", shapes.Make(dtypes.Float32, InputShape(spec, opts)...))
	spec.Build(ctx.In(graphs.ModelScope), images, false, opts)
	prefix := "/" + graphs.ModelScope
	ctx.EnumerateVariables(func(v *context.Variable) {
		if v.Scope() == prefix || strings.HasPrefix(v.Scope(), prefix+"/") {
			vars = append(vars, Variable{Scope: v.Scope(), Name: v.Name(), Shape: v.Shape(), Trainable: v.Trainable})
		}
	})
	sort.Slice(vars, func(i, j int) bool { return vars[i].Path() < vars[j].Path() })
	return vars, nil
}

// torchLayout returns how a variable's data is laid out in the reference: the permutation of our axes
// (nil: none) and the reference's dimensions.
//   - rank-4 "weight" is a conv kernel: HWIO [kh, kw, in/g, out] -> OIHW [out, in/g, kh, kw] (a depthwise
//     [k, k, 1, C] becomes [C, 1, k, k]);
//   - rank-2 "weight" is a Linear: [in, out] -> [out, in];
//   - anything else keeps its data order, in the shape the spec's TorchShape gives (ConvNeXt's
//     layer_scale [C] is [C, 1, 1]) or its own.
func torchLayout(spec graphs.Spec, scope, name string, dims []int) (perm, torchDims []int) {
	switch {
	case name == "weight" && len(dims) == 4:
		perm = []int{3, 2, 0, 1}
	case name == "weight" && len(dims) == 2:
		perm = []int{1, 0}
	default:
		if spec.TorchShape != nil {
			if shape := spec.TorchShape(scope, name, dims); shape != nil {
				return nil, shape
			}
		}
		return nil, slices.Clone(dims)
	}
	torchDims = make([]int, len(dims))
	for i, p := range perm {
		torchDims[i] = dims[p]
	}
	return perm, torchDims
}

// transpose permutes the axes of a row-major array: out axis i is in axis perm[i].
func transpose[T any](data []T, dims, perm []int) []T {
	if perm == nil {
		return data
	}
	rank := len(dims)
	outDims := make([]int, rank)
	for i, p := range perm {
		outDims[i] = dims[p]
	}
	inStrides := make([]int, rank)
	stride := 1
	for i := rank - 1; i >= 0; i-- {
		inStrides[i] = stride
		stride *= dims[i]
	}
	// Walking the output in order, the input offset advances by the stride of the permuted axis.
	step := make([]int, rank)
	for i, p := range perm {
		step[i] = inStrides[p]
	}
	out := make([]T, len(data))
	idx := make([]int, rank)
	off := 0
	for o := range out {
		out[o] = data[off]
		for a := rank - 1; a >= 0; a-- {
			idx[a]++
			off += step[a]
			if idx[a] < outDims[a] {
				break
			}
			off -= step[a] * idx[a]
			idx[a] = 0
		}
	}
	return out
}

// inversePerm returns q with q[perm[i]] = i.
func inversePerm(perm []int) []int {
	if perm == nil {
		return nil
	}
	q := make([]int, len(perm))
	for i, p := range perm {
		q[p] = i
	}
	return q
}

// splitPath splits "scope/name" at the last separator.
func splitPath(path string) (scope, name string) {
	i := strings.LastIndex(path, context.ScopeSeparator)
	if i <= 0 {
		return context.RootScope, path[i+1:]
	}
	return path[:i], path[i+1:]
}

// tensorFloat64s copies a float GoMLX tensor's values.
func tensorFloat64s(t *tensors.Tensor) ([]float64, error) {
	switch t.DType() {
	case dtypes.Float64:
		return tensors.CopyFlatData[float64](t)
	case dtypes.Float32:
		v, err := tensors.CopyFlatData[float32](t)
		if err != nil {
			return nil, err
		}
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out, nil
	}
	return nil, fmt.Errorf("dtype %s is not exported (float32 and float64 only)", t.DType())
}

// ContextVariables returns the values of ctx's variables under /model, keyed by path.
func ContextVariables(ctx *context.Context) (map[string]*tensors.Tensor, error) {
	out := map[string]*tensors.Tensor{}
	prefix := "/" + graphs.ModelScope
	var errs []string
	ctx.EnumerateVariables(func(v *context.Variable) {
		if v.Scope() != prefix && !strings.HasPrefix(v.Scope(), prefix+"/") {
			return
		}
		value, err := v.Value()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", v.ScopeAndName(), err))
			return
		}
		out[v.ScopeAndName()] = value
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("reading variables: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// ToStateDict converts a net's variables (keyed "/model/.../name"; others are skipped, as are those
// the spec maps to no key) into the reference's state_dict: float32 tensors in PyTorch layout, plus a
// num_batches_tracked (int64 0) next to every running_mean and the spec's TorchBuffers so that
// load_state_dict(strict=True) accepts the result.
func ToStateDict(spec graphs.Spec, vars map[string]*tensors.Tensor) (map[string]*Tensor, error) {
	sd := map[string]*Tensor{}
	from := map[string]string{}
	prefix := "/" + graphs.ModelScope + "/"
	var errs []string
	for _, path := range sortedKeys(vars) {
		if !strings.HasPrefix(path, prefix) {
			continue
		}
		scope, name := splitPath(path)
		key, ok := spec.StateDictKey(scope, name)
		if !ok {
			continue
		}
		if other, dup := from[key]; dup {
			errs = append(errs, fmt.Sprintf("%s and %s both map to %q", other, path, key))
			continue
		}
		from[key] = path
		t := vars[path]
		values, err := tensorFloat64s(t)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		dims := t.Shape().Dimensions
		perm, torchDims := torchLayout(spec, scope, name, dims)
		st, err := FromFloat64s(F32, torchDims, transpose(values, dims, perm))
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", path, err))
			continue
		}
		sd[key] = st
		if name == "running_mean" && strings.HasSuffix(key, "running_mean") {
			counter := strings.TrimSuffix(key, "running_mean") + BatchTrackedKey
			sd[counter], _ = FromInt64s(nil, []int64{0})
		}
	}
	if spec.TorchBuffers != nil {
		for key, b := range spec.TorchBuffers(sortedKeys(from)) {
			st, err := FromInt64s(b.Shape, b.Values)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", key, err))
				continue
			}
			sd[key] = st
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("net %q: %s", spec.Name, strings.Join(errs, "; "))
	}
	if len(sd) == 0 {
		return nil, fmt.Errorf("net %q: no variables under /%s to export", spec.Name, graphs.ModelScope)
	}
	return sd, nil
}

// FitError lists every way a state_dict fails to fit a net.
type FitError struct {
	Path, Net  string
	Missing    []string // keys the net needs and the file lacks
	Unexpected []string // keys of the file the net has no variable for
	Mismatched []string // "key: file ..., net expects ..." lines
}

func (e *FitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "weights %s do not fit net %q:", e.Path, e.Net)
	section := func(title string, items []string) {
		if len(items) > 0 {
			fmt.Fprintf(&b, "\n  %s (%d):\n    %s", title, len(items), strings.Join(items, "\n    "))
		}
	}
	section("missing keys", e.Missing)
	section("unexpected keys", e.Unexpected)
	section("shape mismatches", e.Mismatched)
	return b.String()
}

// squeezed drops unit dimensions: [C, 1, 1] and [C] fit each other.
func squeezed(dims []int) []int {
	var out []int
	for _, d := range dims {
		if d != 1 {
			out = append(out, d)
		}
	}
	return out
}

// FromStateDict converts a state_dict into values for the template's variables, keyed by path and in
// each variable's dtype. It refuses with a *FitError listing all missing keys, unexpected keys and
// shape mismatches at once; num_batches_tracked entries are ignored. Variables the spec maps to no
// key are left out of the result (they keep their initialiser).
func FromStateDict(spec graphs.Spec, template []Variable, f *File) (map[string]*tensors.Tensor, error) {
	values, _, err := FromStateDictReinit(spec, template, f, nil)
	return values, err
}

// FromStateDictReinit is FromStateDict for fine-tuning: a variable of reinit (by path) whose shape
// in the file differs from the net's is skipped, not refused, and keeps its initialiser. skipped
// lists those keys with both shapes.
func FromStateDictReinit(spec graphs.Spec, template []Variable, f *File, reinit map[string]bool) (
	values map[string]*tensors.Tensor, skipped []string, err error) {
	fit := &FitError{Path: f.Path, Net: spec.Name}
	if spec.TorchLegacyKey != nil {
		f = withCurrentKeys(f, spec.TorchLegacyKey, fit)
	}
	byKey := map[string]Variable{}
	for _, v := range template {
		if key, ok := spec.StateDictKey(v.Scope, v.Name); ok {
			byKey[key] = v
		}
	}
	buffers := map[string]graphs.TorchBuffer{}
	if spec.TorchBuffers != nil {
		buffers = spec.TorchBuffers(sortedKeys(byKey))
	}
	for _, key := range f.Names() {
		if _, ok := byKey[key]; !ok && !strings.HasSuffix(key, "."+BatchTrackedKey) && key != BatchTrackedKey {
			if spec.TorchIgnoredKey != nil && spec.TorchIgnoredKey(key) {
				continue
			}
			if b, isBuffer := buffers[key]; isBuffer {
				// A constant of the architecture: it must be the one the net computes.
				if msg := bufferMismatch(f.Tensors[key], b); msg != "" {
					fit.Mismatched = append(fit.Mismatched, key+": "+msg)
				}
				continue
			}
			fit.Unexpected = append(fit.Unexpected, key)
		}
	}
	out := map[string]*tensors.Tensor{}
	for _, key := range sortedKeys(byKey) {
		v := byKey[key]
		st, ok := f.Tensors[key]
		if !ok {
			fit.Missing = append(fit.Missing, key)
			continue
		}
		dims := v.Shape.Dimensions
		perm, torchDims := torchLayout(spec, v.Scope, v.Name, dims)
		exact := slices.Equal(st.Shape, torchDims)
		if !exact && (perm != nil || !slices.Equal(squeezed(st.Shape), squeezed(torchDims))) {
			if reinit[v.Path()] {
				skipped = append(skipped, fmt.Sprintf("%s %v (the net's is %v)", key, st.Shape, torchDims))
				continue
			}
			fit.Mismatched = append(fit.Mismatched, fmt.Sprintf("%s: file %v, net expects %v (%s is %v here)",
				key, st.Shape, torchDims, v.Path(), dims))
			continue
		}
		if !st.DType.IsFloat() {
			fit.Mismatched = append(fit.Mismatched, fmt.Sprintf("%s: file dtype %s, net expects a float", key, st.DType))
			continue
		}
		values, err := st.Float64s()
		if err != nil {
			fit.Mismatched = append(fit.Mismatched, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		if exact {
			values = transpose(values, torchDims, inversePerm(perm))
		}
		t, err := newTensor(v.Shape, values)
		if err != nil {
			fit.Mismatched = append(fit.Mismatched, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		out[v.Path()] = t
	}
	if len(fit.Missing)+len(fit.Unexpected)+len(fit.Mismatched) > 0 {
		return nil, nil, fit
	}
	return out, skipped, nil
}

// HeadVariables returns the paths of the variables whose shape depends on the number of classes (the
// classifier), found by listing spec's variables at opts.NumClasses and at one class more.
func HeadVariables(backend backends.Backend, spec graphs.Spec, opts graphs.Options) (map[string]bool, error) {
	classes := opts.NumClasses
	if classes == 0 {
		classes = spec.NumClasses
	}
	a, err := Template(backend, spec, opts)
	if err != nil {
		return nil, err
	}
	opts.NumClasses = classes + 1
	b, err := Template(backend, spec, opts)
	if err != nil {
		return nil, err
	}
	other := map[string]shapes.Shape{}
	for _, v := range b {
		other[v.Path()] = v.Shape
	}
	head := map[string]bool{}
	for _, v := range a {
		if s, ok := other[v.Path()]; !ok || !s.Equal(v.Shape) {
			head[v.Path()] = true
		}
	}
	return head, nil
}

// newTensor builds a GoMLX tensor of the given shape (float32 or float64) from values.
func newTensor(shape shapes.Shape, values []float64) (*tensors.Tensor, error) {
	switch shape.DType {
	case dtypes.Float64:
		return tensors.FromFlatDataAndDimensions(slices.Clone(values), shape.Dimensions...), nil
	case dtypes.Float32:
		v := make([]float32, len(values))
		for i, x := range values {
			v[i] = float32(x)
		}
		return tensors.FromFlatDataAndDimensions(v, shape.Dimensions...), nil
	}
	return nil, fmt.Errorf("variables of dtype %s are not imported (float32 and float64 only)", shape.DType)
}

// Load reads a state_dict (safetensors or PyTorch's .pth, ReadStateDict) and creates spec's variables
// from it in ctx, which must not hold them yet: build the net afterwards with
// ctx.In(graphs.ModelScope).Reuse(). It returns the number of variables loaded.
func Load(ctx *context.Context, backend backends.Backend, spec graphs.Spec, opts graphs.Options, path string) (int, error) {
	f, err := ReadStateDict(path)
	if err != nil {
		return 0, err
	}
	template, err := Template(backend, spec, opts)
	if err != nil {
		return 0, err
	}
	values, err := FromStateDict(spec, template, f)
	if err != nil {
		return 0, err
	}
	return len(values), SetVariables(ctx, template, values)
}

// SetVariables creates the template's variables in ctx with the given values (a variable without a
// value is left to be initialised when the graph is built).
func SetVariables(ctx *context.Context, template []Variable, values map[string]*tensors.Tensor) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("creating variables: %v", r)
		}
	}()
	for _, v := range template {
		t, ok := values[v.Path()]
		if !ok {
			continue
		}
		ctx.InAbsPath(v.Scope).Checked(false).VariableWithValue(v.Name, t).SetTrainable(v.Trainable)
	}
	return nil
}

// Save writes ctx's /model variables as a state_dict of spec's reference (see ToStateDict).
func Save(path string, spec graphs.Spec, ctx *context.Context, metadata map[string]string) error {
	vars, err := ContextVariables(ctx)
	if err != nil {
		return err
	}
	return SaveVariables(path, spec, vars, metadata)
}

// SaveVariables writes variables keyed by path as a state_dict of spec's reference, with metadata
// naming the net (format "pt", as PyTorch-oriented readers expect).
func SaveVariables(path string, spec graphs.Spec, vars map[string]*tensors.Tensor, metadata map[string]string) error {
	sd, err := ToStateDict(spec, vars)
	if err != nil {
		return err
	}
	meta := map[string]string{"format": "pt", "net": spec.Name}
	if spec.Reference != "" {
		meta["reference"] = spec.Reference
	}
	for k, v := range metadata {
		meta[k] = v
	}
	return Write(path, sd, meta)
}

// CheckVariables checks that vars (keyed by path, e.g. a checkpoint's tensors read from path) holds
// every template variable with its shape, listing all problems in a *FitError; variables outside the
// template (optimizer slots, RNG state) are ignored.
func CheckVariables(spec graphs.Spec, template []Variable, vars map[string]*tensors.Tensor, path string) error {
	fit := &FitError{Path: path, Net: spec.Name}
	for _, v := range template {
		t, ok := vars[v.Path()]
		switch {
		case !ok:
			fit.Missing = append(fit.Missing, v.Path())
		case !slices.Equal(t.Shape().Dimensions, v.Shape.Dimensions):
			fit.Mismatched = append(fit.Mismatched, fmt.Sprintf("%s: file %v, net expects %v", v.Path(), t.Shape().Dimensions, v.Shape.Dimensions))
		}
	}
	if len(fit.Missing)+len(fit.Mismatched) > 0 {
		return fit
	}
	return nil
}

// bufferMismatch says how a file's constant buffer differs from the one the net computes, or "".
func bufferMismatch(st *Tensor, want graphs.TorchBuffer) string {
	if !slices.Equal(st.Shape, want.Shape) {
		return fmt.Sprintf("file %v, net expects %v", st.Shape, want.Shape)
	}
	got, err := st.Float64s()
	if err != nil {
		return err.Error()
	}
	for i, v := range want.Values {
		if got[i] != float64(v) {
			return fmt.Sprintf("element %d is %v, the net's constant is %d", i, got[i], v)
		}
	}
	return ""
}

// withCurrentKeys is f with every key renamed by legacy; two keys that rename to the same one are both
// dropped and reported as mismatched.
func withCurrentKeys(f *File, legacy func(string) string, fit *FitError) *File {
	renamed := &File{Path: f.Path, Metadata: f.Metadata, Tensors: map[string]*Tensor{}}
	from := map[string]string{}
	for _, key := range f.Names() {
		current := legacy(key)
		if other, dup := from[current]; dup {
			fit.Mismatched = append(fit.Mismatched, fmt.Sprintf("%s and %s both name %s", other, key, current))
			delete(renamed.Tensors, current)
			continue
		}
		from[current] = key
		renamed.Tensors[current] = f.Tensors[key]
	}
	return renamed
}
