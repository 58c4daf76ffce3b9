package gobackend

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// A flattened input (two Reshapes) read by a forward product and a kernel-gradient-like product is viewed, not
// copied: the products give the values of the same executable run on a donated copy of the input
// (simplego's Reshape then takes the buffer over) on every run, and the caller's input buffer is never
// handed out by simplego's pools (another executable's outputs of the view's size, written between the
// runs, leave it as it was). A backend without the fast products marks no view, nor one running ops in
// parallel.
func TestReshapeViewOfInput(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(71))
	xShape, wShape := shapes.Make(dtypes.Float32, 8, 3, 2), shapes.Make(dtypes.Float32, 6, 5)
	type compiled struct {
		exec  backends.Executable
		views int
	}
	compile := func(b backends.Backend) compiled {
		builder := b.Builder(t.Name())
		x, err := builder.Parameter("x", xShape, nil)
		if err != nil {
			t.Fatal(err)
		}
		w, err := builder.Parameter("w", wShape, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Flattened in two steps, as a Dense's input and its product's normalised operand are.
		flat, err := builder.Reshape(x, 48)
		if err != nil {
			t.Fatal(err)
		}
		if flat, err = builder.Reshape(flat, 8, 6); err != nil {
			t.Fatal(err)
		}
		y, err := builder.DotGeneral(flat, []int{1}, nil, w, []int{0}, nil) // [8, 5]
		if err != nil {
			t.Fatal(err)
		}
		g, err := builder.DotGeneral(flat, []int{0}, nil, y, []int{0}, nil) // [6, 5]
		if err != nil {
			t.Fatal(err)
		}
		exec, err := builder.Compile([]backends.Op{y, g}, nil)
		if err != nil {
			t.Fatalf("%+v", err)
		}
		views := 0
		if gb, ok := builder.(*goBuilder); ok {
			for _, n := range builderNodesOf(gb.Builder.(*simplego.Builder)) {
				if isReshapeView(n) {
					views++
				}
			}
		}
		return compiled{exec, views}
	}
	parallel, err := newBackend("ops_parallel")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(parallel.Finalize)
	f, s, p := compile(fast), compile(slow), compile(parallel)
	if f.views != 2 || s.views != 0 || p.views != 0 {
		t.Fatalf("%d Reshapes marked views on the fast backend, %d on simplego's, %d under ops_parallel; want 2, 0 and 0",
			f.views, s.views, p.views)
	}
	// Another executable whose output has the view's size and dtype: it takes its buffer from the pool
	// the view would wrongly have joined, and writes over it.
	builder := fast.Builder(t.Name() + "/other")
	a, err := builder.Parameter("a", shapes.Make(dtypes.Float32, 8, 6), nil)
	if err != nil {
		t.Fatal(err)
	}
	twice, err := builder.Add(a, a)
	if err != nil {
		t.Fatal(err)
	}
	other, err := builder.Compile([]backends.Op{twice}, nil)
	if err != nil {
		t.Fatal(err)
	}
	values := func(b backends.Backend, buf backends.Buffer) []float32 {
		shape, err := b.BufferShape(buf)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float32, shape.Size())
		if err := b.BufferToFlatData(buf, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 2*rng.Float32() - 1
		}
		return v
	}
	xData, wData := random(xShape.Size()), random(wShape.Size())
	upload := func(b backends.Backend, data []float32, shape shapes.Shape) backends.Buffer {
		buf, err := b.BufferFromFlatData(0, slices.Clone(data), shape)
		if err != nil {
			t.Fatal(err)
		}
		return buf
	}
	fx, fw := upload(fast, xData, xShape), upload(fast, wData, wShape)
	for run := range 4 {
		got, err := f.exec.Execute([]backends.Buffer{fx, fw}, nil, 0)
		if err != nil {
			t.Fatalf("%+v", err)
		}
		want, err := f.exec.Execute([]backends.Buffer{upload(fast, xData, xShape), fw}, []bool{true, false}, 0)
		if err != nil {
			t.Fatalf("%+v", err)
		}
		for i := range want {
			if g, w := values(fast, got[i]), values(fast, want[i]); !slices.Equal(g, w) {
				t.Fatalf("run %d, output %d: %v, want %v", run, i, g, w)
			}
			if err := fast.BufferFinalize(got[i]); err != nil {
				t.Fatal(err)
			}
			if err := fast.BufferFinalize(want[i]); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			outs, err := other.Execute([]backends.Buffer{upload(fast, random(48), shapes.Make(dtypes.Float32, 8, 6))}, []bool{true}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := fast.BufferFinalize(outs[0]); err != nil {
				t.Fatal(err)
			}
		}
		if got := values(fast, fx); !slices.Equal(got, xData) {
			t.Fatalf("after run %d the input buffer holds %v, want %v", run, got, xData)
		}
	}
}
