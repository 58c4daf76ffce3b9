//go:build (linux || darwin) && (amd64 || arm64) && !nolibturbojpeg

package data

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/ebitengine/purego"
)

// TestJPEGTurboJPEG3Crop: TurboJPEG 3's cropped decoding gives a box the bytes it has in the whole
// image decoded at its scale, with the exact and the fast (data.fast_decode) settings, on the
// fixtures and on photograph-sized 4:2:0 JPEGs (several iMCU rows and columns on each side of the
// box), boxes on and off iMCU boundaries, and one decompressor reused throughout.
func TestJPEGTurboJPEG3Crop(t *testing.T) {
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded")
	}
	d := newTurboDecoder()
	if d.lib.v3 == nil {
		if h, err := purego.Dlopen(d.lib.name, purego.RTLD_NOW|purego.RTLD_LOCAL); err == nil {
			if _, err := purego.Dlsym(h, "tj3Init"); err == nil {
				t.Fatalf("%s has tj3Init, yet its TurboJPEG 3 API was not taken", d.lib.name)
			}
		}
		t.Skipf("%s has no TurboJPEG 3 API (tj3Init): build libjpeg-turbo 3 with scripts/build-turbojpeg3.sh and run with %s=$(scripts/build-turbojpeg3.sh)", d.lib.name, TurboJPEGEnv)
	}
	if !strings.Contains(JPEGDecoderNote(), "TurboJPEG 3 API, cropped decoding") {
		t.Errorf("the start line %q does not say the TurboJPEG 3 API is used", JPEGDecoderNote())
	}
	var files [][]byte
	for _, name := range jpegFixtures {
		files = append(files, readFixture(t, name))
	}
	for _, p := range benchJPEGs(t, t.TempDir(), 2) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var buf, fullBuf []uint8
	for i, b := range files {
		for _, flags := range []int{0, fastDecodeFlags} {
			for _, c := range []int{3, 1} {
				for _, den := range []int{1, 2, 4, 8} {
					full, ok, err := d.decodeRegion(b, c, fullBuf, 0, flags, func(w, h int) (int, int, int, int, int) { return 0, 0, w, h, den })
					if !ok || err != nil {
						t.Fatalf("file %d 1/%d: ok %v, %v", i, den, ok, err)
					}
					fullBuf = full.pix
					full.pix = bytes.Clone(full.pix)
					for k := range 30 {
						x, y := rng.IntN(full.w), rng.IntN(full.h)
						if k%3 == 0 { // on an iMCU boundary of the scaled image
							x -= x % max(16/den, 1)
						}
						w, h := 1+rng.IntN(full.w-x), 1+rng.IntN(full.h-y)
						p, ok, err := d.decodeRegion(b, c, buf, 0, flags, func(int, int) (int, int, int, int, int) { return x * den, y * den, w * den, h * den, den })
						if !ok || err != nil {
							t.Fatalf("file %d 1/%d box %d,%d %dx%d: ok %v, %v", i, den, x, y, w, h, ok, err)
						}
						buf = p.pix
						want := cropPixels(full, x, y, w, h, nil)
						if p.w != w || p.h != h || !bytes.Equal(p.pix, want.pix) {
							t.Fatalf("file %d, flags %#x, %d channels, 1/%d: box %dx%d at (%d, %d) differs from the full decode's", i, flags, c, den, w, h, x, y)
						}
					}
				}
			}
		}
	}
}

// turboHasV3 reports whether the loaded TurboJPEG library has the TurboJPEG 3 API.
func turboHasV3() bool { return loadTurbo().v3 != nil }
