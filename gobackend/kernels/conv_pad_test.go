package kernels

import (
	"math"
	"slices"
	"testing"
)

// TestPadInputOverwritesStaleBuffer: padInput writes every value of its pooled buffer, zeros in the
// padding and the input inside, whichever axes are padded (here NCHW, so the last axis is a padded
// spatial one) and whatever a previous use left in the buffer (NaNs here).
func TestPadInputOverwritesStaleBuffer(t *testing.T) {
	if defaultKernelOf[float32]().direct == nil {
		t.Skip("no direct kernel on this architecture: padInput pads nothing")
	}
	inDims := []int{2, 3, 4, 5} // N, C, H, W
	input := make([]float32, Prod(inDims))
	for i := range input {
		input[i] = float32(i + 1)
	}
	spec := ConvGemmSpec{
		Axes: ConvAxes{InputBatch: 0, InputChannels: 1, InputSpatial: []int{2, 3},
			KernelInputChannels: 1, KernelOutputChannels: 0, KernelSpatial: []int{2, 3},
			OutputBatch: 0, OutputChannels: 1, OutputSpatial: []int{2, 3}},
		Strides: []int{1, 1}, KernelDilations: []int{1, 1}, InputDilations: []int{1, 1},
		Paddings: [][2]int{{1, 2}, {2, 1}},
	}
	wantDims := []int{2, 3, 4 + 3, 5 + 3}
	stale := make([]float32, 1<<paddedClass(Prod(wantDims))) // What the pool hands out for this size.
	for i := range stale {
		stale[i] = float32(math.NaN())
	}
	putPadded(stale)
	out, dims, padded, ok := padInput(input, inDims, nil, nil, spec)
	if !ok {
		t.Fatal("padInput padded nothing")
	}
	defer putPadded(out)
	if !slices.Equal(dims, wantDims) {
		t.Fatalf("dims %v, want %v", dims, wantDims)
	}
	for _, p := range padded.Paddings {
		if p != [2]int{} {
			t.Errorf("the spec after padding keeps paddings %v", padded.Paddings)
		}
	}
	for n := range wantDims[0] {
		for c := range wantDims[1] {
			for h := range wantDims[2] {
				for w := range wantDims[3] {
					got := out[((n*wantDims[1]+c)*wantDims[2]+h)*wantDims[3]+w]
					var want float32
					if ih, iw := h-1, w-2; ih >= 0 && ih < inDims[2] && iw >= 0 && iw < inDims[3] {
						want = input[((n*inDims[1]+c)*inDims[2]+ih)*inDims[3]+iw]
					}
					if got != want {
						t.Fatalf("padded[%d,%d,%d,%d] = %v, want %v", n, c, h, w, got, want)
					}
				}
			}
		}
	}
}

// TestPadInputChannelsLast: with the channels last (NHWC, not padded), padInput copies whole W·C blocks;
// every value lands where the padding puts it and the padding is zero.
func TestPadInputChannelsLast(t *testing.T) {
	if defaultKernelOf[float32]().direct == nil {
		t.Skip("no direct kernel on this architecture: padInput pads nothing")
	}
	inDims := []int{2, 4, 5, 3} // N, H, W, C
	input := make([]float32, Prod(inDims))
	for i := range input {
		input[i] = float32(i + 1)
	}
	spec := ConvGemmSpec{Axes: channelsLast(2), Strides: []int{1, 1}, KernelDilations: []int{1, 1},
		InputDilations: []int{1, 1}, Paddings: [][2]int{{2, 1}, {1, 2}}}
	stale := make([]float32, 1<<paddedClass(2*7*8*3))
	for i := range stale {
		stale[i] = float32(math.NaN())
	}
	putPadded(stale)
	out, dims, _, ok := padInput(input, inDims, nil, nil, spec)
	if !ok {
		t.Fatal("padInput padded nothing")
	}
	defer putPadded(out)
	if want := []int{2, 7, 8, 3}; !slices.Equal(dims, want) {
		t.Fatalf("dims %v, want %v", dims, want)
	}
	for n := range dims[0] {
		for h := range dims[1] {
			for w := range dims[2] {
				for c := range dims[3] {
					got := out[((n*dims[1]+h)*dims[2]+w)*dims[3]+c]
					var want float32
					if ih, iw := h-2, w-1; ih >= 0 && ih < inDims[1] && iw >= 0 && iw < inDims[2] {
						want = input[((n*inDims[1]+ih)*inDims[2]+iw)*inDims[3]+c]
					}
					if got != want {
						t.Fatalf("padded[%d,%d,%d,%d] = %v, want %v", n, h, w, c, got, want)
					}
				}
			}
		}
	}
}

// getPadded returns n values from a buffer of its size class (the next power of two), and a buffer put
// back serves every request of its class: the sizes padInput asks for in turn don't drop each other's.
func TestPaddedPoolClasses(t *testing.T) {
	if b := getPadded(0); len(b) != 0 { // A convolution over an empty batch or no channels.
		t.Fatalf("getPadded(0): len %d", len(b))
	}
	for _, n := range []int{1, 2, 3, 255, 256, 257, 100352, 524288} {
		c := paddedClass(n)
		if 1<<c < n || (c > 0 && 1<<(c-1) >= n) {
			t.Fatalf("paddedClass(%d) = %d: 2^%d is not the next power of two", n, c, c)
		}
		b := getPadded(n)
		if len(b) != n || cap(b) < n {
			t.Fatalf("getPadded(%d): len %d cap %d", n, len(b), cap(b))
		}
		putPadded(b)
	}
	// A buffer of any capacity goes to the class it can serve in full.
	odd := make([]float32, 300)
	putPadded(odd)
	for range 3 {
		if b := getPadded(200); cap(b) < 200 {
			t.Fatalf("getPadded(200) returned a buffer of capacity %d", cap(b))
		}
		if b := getPadded(256); cap(b) < 256 {
			t.Fatalf("getPadded(256) returned a buffer of capacity %d", cap(b))
		}
	}
}
