package gobackend

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
)

// Convolutions over maps smaller than their padded kernel meet padding only at some kernel positions or
// some output positions: a 3×3 kernel with padding 1 over a 1×1 map (a ResNet's last stage at 32 px)
// reads real input at its centre only, and that convolution's kernel gradient has real values at the
// centre only. trimmedConv computes such a convolution on the kernel positions and the output positions
// that meet real input, and pads the result back with zeros, instead of multiplying zeros: ResNet-34's
// last-stage convolutions at 32 px do a ninth of the work. The sum of each output keeps its real terms
// in their order; the zero terms dropped change nothing but, at most, the sign of a zero (and a
// product of an infinite weight by padding, NaN before).

// convAxisTrim is one spatial axis's part of a trimmed convolution: the kernel positions [kLo, kHi]
// and output positions [oLo, oHi] that meet real input, and the paddings of the smaller convolution.
type convAxisTrim struct {
	kLo, kHi, oLo, oHi int
	padLow, padHigh    int
}

// trimAxis finds the kernel and output positions of spatial axis i that meet real input (an input
// position, not padding nor an input-dilation hole); ok is false if none does or the smaller
// convolution's paddings would be negative.
func (p *convParams) trimAxis(i int) (t convAxisTrim, ok bool) {
	in, k, o := p.inputSpatial[i], p.kernelSpatial[i], p.outSpatial[i]
	s, kd, d, lo := p.strides[i], p.kernelDilations[i], p.inputDilations[i], p.paddings[i][0]
	t = convAxisTrim{kLo: k, kHi: -1, oLo: o, oHi: -1}
	last := (in - 1) * d // The last input position in the dilated input.
	for out := range o {
		for pos := range k {
			q := out*s + pos*kd - lo
			if q < 0 || q > last || q%d != 0 {
				continue
			}
			t.kLo, t.kHi = min(t.kLo, pos), max(t.kHi, pos)
			t.oLo, t.oHi = min(t.oLo, out), max(t.oHi, out)
		}
	}
	if t.kHi < 0 {
		return t, false
	}
	t.padLow = lo - t.oLo*s - t.kLo*kd
	t.padHigh = (t.oHi-t.oLo)*s + (t.kHi-t.kLo)*kd + 1 - (last + 1) - t.padLow
	return t, t.padLow >= 0 && t.padHigh >= 0
}

// trimmedConv builds the convolution on the positions that meet real input when some don't (ok false
// otherwise: the caller builds it whole).
func (b *goBuilder) trimmedConv(input, kernel backends.Op, p *convParams) (out backends.Op, ok bool, err error) {
	S := p.spatialRank
	trims := make([]convAxisTrim, S)
	trimmed := false
	for i := range S {
		t, fine := p.trimAxis(i)
		if !fine {
			return nil, false, nil
		}
		trims[i] = t
		trimmed = trimmed || t.kLo > 0 || t.kHi < p.kernelSpatial[i]-1 || t.oLo > 0 || t.oHi < p.outSpatial[i]-1
	}
	if !trimmed {
		return nil, false, nil
	}
	c := b.composer()
	k := b.trimKernel(c, kernel, p, trims)
	paddings := make([][2]int, S)
	for i, t := range trims {
		paddings[i] = [2]int{t.padLow, t.padHigh}
	}
	if c.err != nil {
		return nil, false, c.err
	}
	out, err = b.ConvGeneral(input, k, p.axes, p.strides, paddings, p.inputDilations, p.kernelDilations,
		p.channelGroupCount, p.batchGroupCount)
	if err != nil {
		return nil, false, err
	}
	padCfg := make([]backends.PadAxis, p.output.Rank())
	for i, t := range trims {
		padCfg[p.axes.OutputSpatial[i]] = backends.PadAxis{Start: t.oLo, End: p.outSpatial[i] - 1 - t.oHi}
	}
	out = c.padAll(out, c.zero(p.output.DType), padCfg)
	if c.err != nil {
		return nil, false, c.err
	}
	if got := c.shape(out); !got.Equal(p.output) {
		return nil, false, nil
	}
	return out, true, nil
}

// trimKernel slices the kernel to the positions [kLo, kHi] of each spatial axis. A kernel that is a
// spatial flip in the form foldKernelFlips folds into the fused convolution (Concatenate of unit
// Slices) is sliced under the flip, and the flip of the slice built in that same form, so the fold
// still applies and the full flipped kernel is never written out.
func (b *goBuilder) trimKernel(c *composer, kernel backends.Op, p *convParams, trims []convAxisTrim) backends.Op {
	rank := p.kernel.Rank()
	flipped := make([]bool, rank)
	base := kernel
	if n, isNode := kernel.(*simplego.Node); isNode && fuseFieldsOK {
		for {
			src, axis, isFlip := flipOf(n)
			if !isFlip || !slices.Contains(p.axes.KernelSpatial, axis) || flipped[axis] {
				break
			}
			flipped[axis] = true
			n, base = src, src
		}
	}
	starts, limits := make([]int, rank), slices.Clone(p.kernel.Dimensions)
	for i, t := range trims {
		a := p.axes.KernelSpatial[i]
		starts[a], limits[a] = t.kLo, t.kHi+1
		if flipped[a] { // Position j of the flip is position K-1-j of base.
			starts[a], limits[a] = p.kernelSpatial[i]-1-t.kHi, p.kernelSpatial[i]-t.kLo
		}
	}
	if base == kernel && slices.Equal(limits, p.kernel.Dimensions) && !slices.ContainsFunc(starts, func(s int) bool { return s != 0 }) {
		return kernel // Only outputs are trimmed: the kernel is used whole.
	}
	k := c.slice(base, starts, limits, nil)
	for a := range rank {
		if !flipped[a] || limits[a]-starts[a] == 1 {
			continue
		}
		n := limits[a] - starts[a]
		if c.err != nil {
			return nil
		}
		parts := make([]backends.Op, n)
		for j := range parts {
			s, l := make([]int, rank), slices.Clone(c.shape(k).Dimensions)
			s[a], l[a] = n-1-j, n-j
			parts[j] = c.slice(k, s, l, nil)
		}
		k = c.concat(a, parts...)
	}
	return k
}
