//go:build (linux || darwin) && (amd64 || arm64) && !nolibturbojpeg

package data

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestJPEGSpliceMatchesFullDecode: a box decoded from the restart pieces that cover it has the bytes
// of the same box of the whole original decoded, at every DCT scale, in colour and grey, with the
// exact and the fast settings, and only the pieces are decoded.
func TestJPEGSpliceMatchesFullDecode(t *testing.T) {
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded: no region decoder")
	}
	d := newTurboDecoder()
	rng := rand.New(rand.NewPCG(9, 10))
	for name, b := range restartTestJPEGs(t) {
		if name == "prog420" {
			continue
		}
		for _, minMCUs := range []int{1, 2} {
			rb, ok, err := AddRestartMarkers(b, minMCUs)
			if !ok || err != nil {
				t.Fatalf("%s: %v %v", name, ok, err)
			}
			for _, flags := range []int{0, tjflagFastDCT | tjflagFastUpsample} {
				for _, c := range []int{3, 1} {
					for _, den := range []int{1, 2, 4, 8} {
						full, ok, err := d.decodeRegion(b, c, nil, 0, flags, func(w, h int) (int, int, int, int, int) { return 0, 0, w, h, den })
						if !ok || err != nil {
							t.Fatalf("%s 1/%d: ok %v, %v", name, den, ok, err)
						}
						before := d.splices
						for range 25 {
							x, y := rng.IntN(full.w), rng.IntN(full.h)
							w, h := 1+rng.IntN(full.w-x), 1+rng.IntN(full.h-y)
							if rng.IntN(3) == 0 {
								w, h = 1+rng.IntN(min(full.w-x, 40)), 1+rng.IntN(min(full.h-y, 40))
							}
							p, ok, err := d.decodeRegion(rb, c, nil, 0, flags, func(int, int) (int, int, int, int, int) { return x * den, y * den, w * den, h * den, den })
							if !ok || err != nil {
								t.Fatalf("%s 1/%d box %d,%d %dx%d: ok %v, %v", name, den, x, y, w, h, ok, err)
							}
							want := cropPixels(full, x, y, w, h, nil)
							if p.w != w || p.h != h || !bytes.Equal(p.pix, want.pix) {
								t.Fatalf("%s (pieces of %d MCUs), %d channels, 1/%d, flags %#x: box %dx%d at (%d, %d) differs from the whole decode's",
									name, minMCUs, c, den, flags, w, h, x, y)
							}
						}
						if den <= 2 && d.splices == before {
							t.Fatalf("%s 1/%d: no box was decoded from its pieces", name, den)
						}
					}
				}
			}
		}
	}
}

// TestJPEGSpliceDamaged: damaged pieces never panic, and a box whose pieces fail to decode is
// decoded as without markers, which reports the damage.
func TestJPEGSpliceDamaged(t *testing.T) {
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded")
	}
	rb, ok, err := AddRestartMarkers(readFixture(t, "rgb444"), 1)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	d := newTurboDecoder()
	box := func(w, h int) (int, int, int, int, int) { return w / 4, h / 4, w / 3, h / 3, 1 }
	if _, ok, err := d.decodeRegion(rb[:len(rb)/2], 3, nil, 0, 0, box); !ok || err == nil {
		t.Fatalf("truncated: ok %v, err %v: want libjpeg's error", ok, err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for range 300 {
		b := bytes.Clone(rb)
		for range 1 + rng.IntN(3) {
			b[rng.IntN(len(b))] = byte(rng.Uint32())
		}
		d.decodeRegion(b, 3, nil, 0, 0, box) // must not panic or crash
	}
	// The decoder is still good.
	full, _, _ := d.decodeRegion(rb, 3, nil, 0, 0, nil)
	p, ok, err := d.decodeRegion(rb, 3, nil, 0, 0, box)
	if !ok || err != nil || !bytes.Equal(p.pix, cropPixels(full, full.w/4, full.h/4, full.w/3, full.h/3, nil).pix) {
		t.Fatalf("after damaged JPEGs: ok %v, %v, or other bytes", ok, err)
	}
}
