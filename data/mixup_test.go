package data

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The draws are pinned: they are part of what makes a resumed run mix the same way.
func TestMixupParamsGolden(t *testing.T) {
	rng := rand.NewPCG(3, 4)
	m := Mixup{MixupAlpha: 0.8, CutmixAlpha: 1, Prob: 0.9, SwitchProb: 0.5, NumClasses: 5}
	var got []MixParams
	for range 6 {
		got = append(got, m.Params(16, 12, rng))
	}
	want := []MixParams{
		{Lambda: 0.7751597613902698},
		{Lambda: 0.6978059330275689},
		{Lambda: 1 - 49.0/192, CutMix: true, Y0: 0, Y1: 7, X0: 0, X1: 7},
		{Lambda: 1 - 64.0/192, CutMix: true, Y0: 8, Y1: 16, X0: 0, X1: 8},
		{Lambda: 0.5762518614899816},
		{Lambda: 1 - 70.0/192, CutMix: true, Y0: 0, Y1: 10, X0: 0, X1: 7},
	}
	for i := range want {
		if got[i].CutMix != want[i].CutMix || math.Abs(got[i].Lambda-want[i].Lambda) > 1e-15 ||
			[4]int{got[i].Y0, got[i].Y1, got[i].X0, got[i].X1} != [4]int{want[i].Y0, want[i].Y1, want[i].X0, want[i].X1} {
			t.Errorf("draw %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// λ follows Beta(α, α) (mean 1/2, variance 1/(4(2α+1))), tiny α included; the mix probability and
// the switch probability hold; cutmix's λ is 1 − (clipped box area)/(image area).
func TestMixupParamsDistribution(t *testing.T) {
	const n = 40000
	for _, alpha := range []float64{0.1, 0.8, 1, 2} {
		rng := rand.NewPCG(uint64(alpha*100), 9)
		m := Mixup{MixupAlpha: alpha, Prob: 1, NumClasses: 2}
		var sum, sq float64
		for range n {
			l := m.Params(8, 8, rng).Lambda
			if !(l >= 0 && l <= 1) {
				t.Fatalf("α %g: λ %v", alpha, l)
			}
			sum += l
			sq += l * l
		}
		mean := sum / n
		variance := sq/n - mean*mean
		wantVar := 1 / (4 * (2*alpha + 1))
		// Standard errors at n = 40000: mean < 0.0025, variance < 0.001.
		if math.Abs(mean-0.5) > 0.01 || math.Abs(variance-wantVar) > 0.004 {
			t.Errorf("α %g: mean %.4f variance %.4f, want 0.5 and %.4f", alpha, mean, variance, wantVar)
		}
	}
	rng := rand.NewPCG(1, 1)
	m := Mixup{MixupAlpha: 0.8, CutmixAlpha: 1, Prob: 0.6, SwitchProb: 0.3, NumClasses: 2}
	var mixed, cut int
	for range n {
		p := m.Params(20, 15, rng)
		if p.Lambda != 1 || p.CutMix {
			mixed++
		}
		if p.CutMix {
			cut++
			if p.Y0 < 0 || p.Y1 > 20 || p.X0 < 0 || p.X1 > 15 || p.Y0 > p.Y1 || p.X0 > p.X1 {
				t.Fatalf("box %+v outside 20x15", p)
			}
			if area := float64((p.Y1 - p.Y0) * (p.X1 - p.X0)); p.Lambda != 1-area/300 {
				t.Fatalf("cutmix λ %v for a box of area %g", p.Lambda, area)
			}
		}
	}
	if f := float64(mixed) / n; math.Abs(f-0.6) > 0.015 {
		t.Errorf("mixed fraction %.3f, want 0.6", f)
	}
	if f := float64(cut) / float64(mixed); math.Abs(f-0.3) > 0.02 {
		t.Errorf("cutmix fraction of mixed batches %.3f, want 0.3", f)
	}
}

// refMix is timm's batch mix written plainly: a flipped copy of the batch, then blend or paste.
func refMix(p MixParams, x []float32, labels []int32, n, h, w, c, classes int, eps float64) ([]float32, []float64) {
	size := h * w * c
	flipped := make([]float32, 0, len(x))
	for i := n - 1; i >= 0; i-- {
		flipped = append(flipped, x[i*size:(i+1)*size]...)
	}
	out := slices.Clone(x[:n*size])
	for i := range n {
		for y := range h {
			for xx := range w {
				for ch := range c {
					e := i*size + (y*w+xx)*c + ch
					switch {
					case !p.CutMix:
						out[e] = x[e]*float32(p.Lambda) + flipped[e]*float32(1-p.Lambda)
					case y >= p.Y0 && y < p.Y1 && xx >= p.X0 && xx < p.X1:
						out[e] = flipped[e]
					}
				}
			}
		}
	}
	targets := make([]float64, n*classes)
	off, on := eps/float64(classes), 1-eps+eps/float64(classes)
	for i := range n {
		for k := range classes {
			y1, y2 := off, off
			if int(labels[i]) == k {
				y1 = on
			}
			if int(labels[n-1-i]) == k {
				y2 = on
			}
			targets[i*classes+k] = y1*p.Lambda + y2*(1-p.Lambda)
		}
	}
	return out, targets
}

func TestMixupApplyMatchesTheFlippedBatch(t *testing.T) {
	const h, w, c, classes = 4, 5, 3, 4
	for _, n := range []int{4, 5} { // even, and odd (the middle row is its own partner)
		for _, p := range []MixParams{{Lambda: 0.3}, {Lambda: 1 - 6.0/20, CutMix: true, Y0: 1, Y1: 3, X0: 2, X1: 5}, {Lambda: 1}} {
			rng := rand.New(rand.NewPCG(uint64(n), 2))
			x := make([]float32, n*h*w*c)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			labels := []int32{0, 3, 1, 3, 2}[:n]
			m := Mixup{MixupAlpha: 1, Prob: 1, LabelSmoothing: 0.1, NumClasses: classes}
			wantX, wantT := refMix(p, x, labels, n, h, w, c, classes, 0.1)
			targets := make([]float32, n*classes)
			m.Apply(p, x, labels, n, h, w, c, targets)
			if !slices.Equal(x, wantX) {
				t.Errorf("n %d %+v: mixed images differ from the flipped-batch reference", n, p)
			}
			for i, v := range targets {
				if math.Abs(float64(v)-wantT[i]) > 1e-7 {
					t.Fatalf("n %d %+v: target %d = %v, want %v", n, p, i, v, wantT[i])
				}
			}
			for i := range n {
				var sum float64
				for _, v := range targets[i*classes : (i+1)*classes] {
					sum += float64(v)
				}
				if math.Abs(sum-1) > 1e-6 {
					t.Errorf("n %d: row %d of the targets sums to %v", n, i, sum)
				}
			}
		}
	}
}

// A mixing loader gives the same batches through Batch and Iterate, whatever the workers; the images
// are the unmixed loader's batch mixed by that (seed, epoch, step)'s draw, and the targets match.
func TestLoaderMixesBatches(t *testing.T) {
	ds := &Dataset{Name: "t", Split: "train", N: 24, Height: 3, Width: 4, Channels: 1, NumClasses: 3,
		Images: make([]uint8, 24*12), Labels: make([]int32, 24)}
	for i := range ds.Images {
		ds.Images[i] = uint8(i * 7)
	}
	for i := range ds.Labels {
		ds.Labels[i] = int32(i % 3)
	}
	mix := &Mixup{MixupAlpha: 0.8, CutmixAlpha: 1, Prob: 1, SwitchProb: 0.5, LabelSmoothing: 0.1, NumClasses: 4}
	opts := LoaderOptions{BatchSize: 6, Shuffle: true, Seed: 5, DropLast: true, Mean: []float32{0.5}, Std: []float32{0.25}}
	plain, err := NewLoader(ds, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Mixup = mix
	mixing, err := NewLoader(ds, opts)
	if err != nil {
		t.Fatal(err)
	}
	var cutmixes, mixups int
	for epoch := range 3 {
		for step := range mixing.StepsPerEpoch() {
			got := mustBatch(t, mixing, epoch, step)
			ref := mustBatch(t, plain, epoch, step)
			var rng rand.PCG
			mixRNG(&rng, 5, epoch, step, 0)
			p := mix.Params(3, 4, &rng)
			if p.CutMix {
				cutmixes++
			} else {
				mixups++
			}
			wantX, wantT := refMix(p, ref.Images, ref.Labels, 6, 3, 4, 1, 4, 0.1)
			if !slices.Equal(got.Images, wantX) || !slices.Equal(got.Labels, ref.Labels) {
				t.Fatalf("epoch %d step %d: images or labels differ from the reference mix", epoch, step)
			}
			for i, v := range got.Targets {
				if math.Abs(float64(v)-wantT[i]) > 1e-7 {
					t.Fatalf("epoch %d step %d: target %d = %v, want %v", epoch, step, i, v, wantT[i])
				}
			}
		}
	}
	if cutmixes == 0 || mixups == 0 {
		t.Errorf("%d cutmix and %d mixup batches over 12: the switch never flipped", cutmixes, mixups)
	}
	for _, workers := range []int{1, 3} {
		o := opts
		o.Workers, o.Prefetch = workers, 2
		l, _ := NewLoader(ds, o)
		it := l.Iterate(2, 1)
		step := 1
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			want := mustBatch(t, mixing, 2, step)
			if !batchesEqual(b, want) {
				t.Fatalf("workers %d: step %d differs from Batch", workers, step)
			}
			step++
		}
		it.Close()
		if it.Err() != nil || step != 4 {
			t.Errorf("workers %d: stopped at step %d: %v", workers, step, it.Err())
		}
	}
	bad := opts
	bad.Mixup = &Mixup{MixupAlpha: 1, Prob: 1, NumClasses: 2}
	if _, err := NewLoader(ds, bad); err == nil {
		t.Error("mixup over 2 classes of a 3-class source accepted")
	}
}
