// Package reftest holds the float64 reference definitions that the pure-Go backend's tests and its
// kernels' tests check results against: written as the definitions, with plain loops, not for speed.
// It imports nothing of the backend, so the kernels' own tests can use it.
package reftest

// ForEach calls fn with every multi-index of dims in row-major order (none when a dimension is 0).
func ForEach(dims []int, fn func(idx []int)) {
	for _, d := range dims {
		if d == 0 {
			return
		}
	}
	idx := make([]int, len(dims))
	for {
		fn(idx)
		a := len(dims) - 1
		for ; a >= 0; a-- {
			idx[a]++
			if idx[a] < dims[a] {
				break
			}
			idx[a] = 0
		}
		if a < 0 {
			return
		}
	}
}

// flat is the row-major offset of idx in dims.
func flat(dims, idx []int) int {
	f := 0
	for a := range dims {
		f = f*dims[a] + idx[a]
	}
	return f
}

// ConvAxes names the axes of a convolution's operands and output: the fields of GoMLX's
// backends.ConvolveAxesConfig and of kernels.ConvAxes, so either converts to it.
type ConvAxes struct {
	InputBatch, InputChannels int
	InputSpatial              []int

	KernelInputChannels, KernelOutputChannels int
	KernelSpatial                             []int

	OutputBatch, OutputChannels int
	OutputSpatial               []int
}

// Conv is a ConvGeneral call's parameters (nil meaning "not given").
type Conv struct {
	Axes                            ConvAxes
	Strides                         []int
	Paddings                        [][2]int
	InputDilations, KernelDilations []int
	Groups, BatchGroups             int
}

// Convolve is XLA's (and JAX's) convolution on float64, written as the definition: output channel o
// belongs to channel group o/(Cout/G) and to batch group j = o/(Cout/BG), which reads input batch
// j*(N/BG)+n; the input is dilated then padded (negative padding crops); the kernel is dilated. It
// returns the output's dims and values.
func Convolve(xDims []int, x []float64, kDims []int, k []float64, c Conv) ([]int, []float64) {
	a := c.Axes
	S := len(a.InputSpatial)
	get := func(s []int, i, def int) int {
		if len(s) == 0 {
			return def
		}
		return s[i]
	}
	G, BG := max(c.Groups, 1), max(c.BatchGroups, 1)
	N, Cout, Cg := xDims[a.InputBatch], kDims[a.KernelOutputChannels], kDims[a.KernelInputChannels]
	outDims := make([]int, S+2)
	outDims[a.OutputBatch], outDims[a.OutputChannels] = N/BG, Cout
	for i := range S {
		inDim := (xDims[a.InputSpatial[i]]-1)*get(c.InputDilations, i, 1) + 1
		var pad [2]int
		if c.Paddings != nil {
			pad = c.Paddings[i]
		}
		kDim := (kDims[a.KernelSpatial[i]]-1)*get(c.KernelDilations, i, 1) + 1
		outDims[a.OutputSpatial[i]] = (inDim+pad[0]+pad[1]-kDim)/get(c.Strides, i, 1) + 1
	}
	size := 1
	for _, d := range outDims {
		size *= d
	}
	out := make([]float64, size)
	kSpatial := make([]int, S)
	for i := range S {
		kSpatial[i] = kDims[a.KernelSpatial[i]]
	}
	xIdx, kIdx := make([]int, S+2), make([]int, S+2)
	ForEach(outDims, func(oIdx []int) {
		o := oIdx[a.OutputChannels]
		g, j := o/(Cout/G), o/(Cout/BG)
		xIdx[a.InputBatch] = j*(N/BG) + oIdx[a.OutputBatch]
		kIdx[a.KernelOutputChannels] = o
		sum := 0.0
		ForEach(kSpatial, func(kPos []int) {
			for i := range S {
				var lo int
				if c.Paddings != nil {
					lo = c.Paddings[i][0]
				}
				id := get(c.InputDilations, i, 1)
				pos := oIdx[a.OutputSpatial[i]]*get(c.Strides, i, 1) + kPos[i]*get(c.KernelDilations, i, 1) - lo
				if pos < 0 || pos%id != 0 || pos/id >= xDims[a.InputSpatial[i]] {
					return
				}
				xIdx[a.InputSpatial[i]] = pos / id
				kIdx[a.KernelSpatial[i]] = kPos[i]
			}
			for ci := range Cg {
				xIdx[a.InputChannels] = g*Cg + ci
				kIdx[a.KernelInputChannels] = ci
				sum += x[flat(xDims, xIdx)] * k[flat(kDims, kIdx)]
			}
		})
		out[flat(outDims, oIdx)] = sum
	})
	return outDims, out
}

// ChannelsLast is the NHWC / HWIO axes configuration for S spatial axes.
func ChannelsLast(S int) ConvAxes {
	sp := func(from int) []int {
		s := make([]int, S)
		for i := range s {
			s[i] = from + i
		}
		return s
	}
	return ConvAxes{
		InputBatch: 0, InputSpatial: sp(1), InputChannels: S + 1,
		KernelSpatial: sp(0), KernelInputChannels: S, KernelOutputChannels: S + 1,
		OutputBatch: 0, OutputSpatial: sp(1), OutputChannels: S + 1,
	}
}
