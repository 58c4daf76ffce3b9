package data

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// The JPEGs in testdata/jpeg are 203×151 (partial MCUs on both axes), made by Pillow 9.4 from one
// image (smooth waves, noise, two saturated rectangles whose edges stress chroma upsampling):
// quality 90 at 4:2:0, 4:2:2 and 4:4:4, progressive 4:2:0 at quality 85, grey, and CMYK.
// pil_decode.json holds the SHA-256 of Pillow's Image.open(f).convert("RGB").tobytes() (and of
// convert("L") for grey.jpg), i.e. of libjpeg-turbo's decode with Pillow's settings (ISLOW IDCT,
// fancy upsampling).
var jpegFixtures = []string{"rgb420", "rgb422", "rgb444", "prog420", "grey"}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/jpeg/" + name + ".jpg")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pixelDiff(t *testing.T, a, b pixels) (maxDiff int, mean float64) {
	t.Helper()
	if a.w != b.w || a.h != b.h || a.c != b.c || len(a.pix) != len(b.pix) {
		t.Fatalf("%dx%dx%d vs %dx%dx%d", a.w, a.h, a.c, b.w, b.h, b.c)
	}
	sum := 0
	for i := range a.pix {
		d := int(a.pix[i]) - int(b.pix[i])
		d = max(d, -d)
		maxDiff = max(maxDiff, d)
		sum += d
	}
	return maxDiff, float64(sum) / float64(len(a.pix))
}

// TestJPEGDecodeMatchesPillow: with libjpeg-turbo the decode is Pillow's, byte for byte. Without it,
// decodePixels is image/jpeg's decode and decodeJPEGRegion declines every JPEG.
func TestJPEGDecodeMatchesPillow(t *testing.T) {
	raw, err := os.ReadFile("testdata/jpeg/pil_decode.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Width, Height int
		RGB           map[string]string `json:"rgb_sha256"`
		Grey          map[string]string `json:"grey_sha256"`
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	for _, name := range jpegFixtures {
		b := readFixture(t, name)
		for c, want := range map[int]string{3: golden.RGB[name+".jpg"], 1: golden.Grey[name+".jpg"]} {
			p, err := decodePixels(b, c, nil, 0)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if p.w != golden.Width || p.h != golden.Height || p.c != c {
				t.Fatalf("%s: %dx%dx%d, want %dx%dx%d", name, p.w, p.h, p.c, golden.Width, golden.Height, c)
			}
			std, err := decodeStd(b, c, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !turboLoaded() {
				if !bytes.Equal(p.pix, std.pix) {
					t.Errorf("%s, %d channels: decodePixels is not image/jpeg's decode", name, c)
				}
				called := false
				if _, ok, _ := decodeJPEGRegion(b, c, nil, 0, func(w, h int) (int, int, int, int, int) { called = true; return 0, 0, w, h, 1 }); ok || called {
					t.Errorf("%s: without libjpeg-turbo decodeJPEGRegion took the image (ok %v, region called %v)", name, ok, called)
				}
				continue
			}
			if want == "" {
				continue
			}
			if sum := sha256.Sum256(p.pix); hex.EncodeToString(sum[:]) != want {
				t.Errorf("%s, %d channels: decode differs from Pillow's", name, c)
			}
		}
	}
}

// TestJPEGTurboVersusGoDecoder states how far libjpeg-turbo's decode (Pillow's) is from
// image/jpeg's. Without chroma subsampling only IDCT and colour-conversion rounding differ: at
// most 3 levels. With 4:2:0 / 4:2:2 chroma, libjpeg interpolates the chroma ("fancy" upsampling,
// as Pillow) where image/jpeg repeats it, which moves pixels at sharp colour edges by up to ~80
// levels (80 on rgb420, 8 on the benchmark's smooth photographs-like JPEGs); the mean stays below 2.
func TestJPEGTurboVersusGoDecoder(t *testing.T) {
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded: decodePixels is image/jpeg (TestJPEGDecodeMatchesPillow checks it)")
	}
	for _, name := range jpegFixtures {
		b := readFixture(t, name)
		for _, c := range []int{3, 1} {
			p, err := decodePixels(b, c, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			std, err := decodeStd(b, c, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			maxDiff, mean := pixelDiff(t, p, std)
			t.Logf("%s, %d channels: max %d, mean %.3f", name, c, maxDiff, mean)
			subsampled := c == 3 && name != "rgb444" && name != "grey"
			if mean > 2 || (!subsampled && maxDiff > 4) || maxDiff > 100 {
				t.Errorf("%s, %d channels: libjpeg vs image/jpeg differ by max %d, mean %.3f", name, c, maxDiff, mean)
			}
		}
	}
}

// TestJPEGRegionMatchesFullDecode: a box decoded alone (with TurboJPEG 3, a cropping region) has
// the bytes of the same box cut from the whole image decoded at the same DCT scale, at every scale,
// for every chroma layout, progressive included.
func TestJPEGRegionMatchesFullDecode(t *testing.T) {
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded: no region decoder")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var buf []uint8
	for _, name := range jpegFixtures {
		b := readFixture(t, name)
		for _, c := range []int{3, 1} {
			for _, d := range []int{1, 2, 4, 8} {
				full, ok, err := decodeJPEGRegion(b, c, nil, 0, func(w, h int) (int, int, int, int, int) { return 0, 0, w, h, d })
				if !ok || err != nil {
					t.Fatalf("%s 1/%d: ok %v, %v", name, d, ok, err)
				}
				if sw, sh := (203+d-1)/d, (151+d-1)/d; full.w != sw || full.h != sh {
					t.Fatalf("%s 1/%d: %dx%d, want %dx%d", name, d, full.w, full.h, sw, sh)
				}
				for range 40 {
					x, y := rng.IntN(full.w), rng.IntN(full.h)
					w, h := 1+rng.IntN(full.w-x), 1+rng.IntN(full.h-y)
					// Full-size coordinates that round back to (x, y, w, h) at this scale.
					p, ok, err := decodeJPEGRegion(b, c, buf, 0, func(int, int) (int, int, int, int, int) { return x * d, y * d, w * d, h * d, d })
					if !ok || err != nil {
						t.Fatalf("%s 1/%d box %d,%d %dx%d: ok %v, %v", name, d, x, y, w, h, ok, err)
					}
					buf = p.pix
					want := cropPixels(full, x, y, w, h, nil)
					if p.w != w || p.h != h || !bytes.Equal(p.pix, want.pix) {
						t.Fatalf("%s, %d channels, 1/%d: box %dx%d at (%d, %d) differs from the full decode's", name, c, d, w, h, x, y)
					}
				}
			}
		}
	}
}

// TestJPEGErrors: damaged JPEGs are errors naming the problem, in both builds, and a decoder that
// failed decodes the next image correctly.
func TestJPEGErrors(t *testing.T) {
	b := readFixture(t, "rgb420")
	good, err := decodePixels(b, 3, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbled := bytes.Clone(b)
	for i := len(b) / 2; i < len(b)/2+200; i++ {
		garbled[i] = byte(i * 37)
	}
	zeroWidth := bytes.Clone(b)
	sof := bytes.Index(zeroWidth, []byte{0xff, 0xc0})
	zeroWidth[sof+7], zeroWidth[sof+8] = 0, 0
	cases := []struct {
		name  string
		b     []byte
		turbo string // libjpeg's message
	}{
		{"truncated in the scan", b[:len(b)*6/10], "Premature end of JPEG file"},
		{"truncated in the header", b[:300], "Premature end of JPEG file"},
		{"garbled scan", garbled, "Corrupt JPEG data"},
		{"zero width", zeroWidth, "Empty JPEG image"},
		{"no markers", append([]byte{0xff, 0xd8}, "not a JPEG after all"...), "Premature end of JPEG file"},
	}
	tr := Transform{Size: 64, Train: true, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{3.0 / 4, 4.0 / 3}}
	for _, tc := range cases {
		for _, c := range []int{3, 1} {
			_, err := decodePixels(tc.b, c, nil, 0)
			if err == nil {
				t.Fatalf("%s: decoded", tc.name)
			}
			if turboLoaded() && !strings.Contains(err.Error(), "libjpeg: "+tc.turbo) {
				t.Errorf("%s: %q, want libjpeg's %q", tc.name, err, tc.turbo)
			}
			var sc augScratch
			if _, err := tr.decodeApply(tc.b, c, 0, rand.NewPCG(1, 2), &sc); err == nil || !strings.HasPrefix(err.Error(), "decoding: ") {
				t.Errorf("%s: decodeApply: %v, want a decoding error", tc.name, err)
			}
			p, err := decodePixels(b, 3, nil, 0)
			if err != nil || !bytes.Equal(p.pix, good.pix) {
				t.Fatalf("after %s: the next decode gives %v, or different pixels", tc.name, err)
			}
		}
	}
}

// TestJPEGOthersFallBack: CMYK JPEGs (libjpeg-turbo cannot make RGB of them) and PNGs decode with
// Go's decoders in both builds.
func TestJPEGOthersFallBack(t *testing.T) {
	b := readFixture(t, "cmyk")
	called := false
	if _, ok, err := decodeJPEGRegion(b, 3, nil, 0, func(w, h int) (int, int, int, int, int) { called = true; return 0, 0, w, h, 1 }); ok || called || err != nil {
		t.Fatalf("CMYK: ok %v, region called %v, %v; want declined", ok, called, err)
	}
	p, err := decodePixels(b, 3, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	std, err := decodeStd(b, 3, nil, 0)
	if err != nil || !bytes.Equal(p.pix, std.pix) || p.w != 203 || p.h != 151 {
		t.Fatalf("CMYK: %v, %dx%d, or not image/jpeg's pixels", err, p.w, p.h)
	}
	img := image.NewNRGBA(image.Rect(0, 0, 5, 4))
	for i := range img.Pix {
		img.Pix[i] = uint8(i*29 + 7)
	}
	var enc bytes.Buffer
	if err := png.Encode(&enc, img); err != nil {
		t.Fatal(err)
	}
	q, err := decodePixels(enc.Bytes(), 3, nil, 0)
	if err != nil || q.w != 5 || q.h != 4 || q.pix[3] != img.Pix[4] || q.pix[5] != img.Pix[6] {
		t.Fatalf("PNG: %v, %dx%d %v", err, q.w, q.h, q.pix[:6])
	}
}

// TestResamplerMatchesResize: the RandomResizedCrop's resampler gives resize's bytes (then HFlip's
// when flipping), for both filters, up and down, 1, 3 and 4 channels, and reuses its buffers.
func TestResamplerMatchesResize(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var r resampler
	sizes := []int{1, 2, 3, 7, 64, 150, 223, 224, 225, 300}
	for it := range 240 {
		c := []int{3, 1, 4}[it%3]
		sw, sh := sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))]
		w, h := sizes[rng.IntN(len(sizes))], sizes[rng.IntN(len(sizes))]
		if it%5 == 0 {
			w = sw // vertical pass only
		}
		src := pixels{w: sw, h: sh, c: c, pix: make([]uint8, sw*sh*c)}
		for i := range src.pix {
			src.pix[i] = uint8(rng.IntN(256))
		}
		for _, f := range []Interp{Bilinear, Bicubic} {
			for _, flip := range []bool{false, true} {
				var tmp, dst []uint8
				want := resize(src, w, h, f, &tmp, &dst)
				if flip {
					HFlip(want)
				}
				got := r.resize(src, w, h, f, flip)
				if got.w != w || got.h != h || got.c != c || !bytes.Equal(got.pix, want.pix) {
					t.Fatalf("%dx%dx%d -> %dx%d, %v, flip %v: differs from resize", sw, sh, c, w, h, f, flip)
				}
			}
		}
	}
	src := pixels{w: 300, h: 280, c: 3, pix: make([]uint8, 300*280*3)}
	r.resize(src, 224, 224, Bicubic, true)
	if a := testing.AllocsPerRun(10, func() { r.resize(src, 224, 224, Bicubic, true) }); a != 0 {
		t.Errorf("%v allocations per resize, want 0", a)
	}
}

// TestDecodeApplyMatchesApply: decodeApply draws what decodePixels + apply draw and, where the DCT
// scale is 1 (boxes under twice the output size), gives their bytes, RandAugment and AutoAugment
// included (decodeApply repeats apply's steps after the crop: this keeps the two in step); with
// the box decoded at 1/2 or 1/4 the pixels stay close and the random sequence is unchanged.
func TestDecodeApplyMatchesApply(t *testing.T) {
	base := Transform{Train: true, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5}
	for _, name := range []string{"rgb420", "prog420", "grey"} {
		b := readFixture(t, name)
		for _, size := range []int{96, 24} {
			for _, interp := range []Interp{Bilinear, Bicubic} {
				tr := base
				tr.Size, tr.Interp = size, interp
				if size == 96 && interp == Bilinear {
					tr.RandAugment = &RandAugment{NumOps: 2, Magnitude: 9, MagnitudeStd: 0.5}
				} else if size == 96 {
					tr.AutoAugment = &AutoAugment{Policy: "imagenet"}
				}
				scaled, worst := 0, 0.0
				var sa, sb augScratch
				for i := range 24 {
					c := []int{3, 1}[i%2]
					ra, rb := rand.NewPCG(uint64(i), 9), rand.NewPCG(uint64(i), 9)
					got, err := tr.decodeApply(b, c, 0, ra, &sa)
					if err != nil {
						t.Fatal(err)
					}
					p, err := decodePixels(b, c, sb.dec, 0)
					if err != nil {
						t.Fatal(err)
					}
					sb.dec = p.pix
					want, err := tr.apply(p, rb, &sb)
					if err != nil {
						t.Fatal(err)
					}
					if ra.Uint64() != rb.Uint64() {
						t.Fatalf("%s size %d: decodeApply drew a different number of values", name, size)
					}
					_, _, bw, bh := RandomResizedCropParams(203, 151, tr.Scale, tr.Ratio, rand.NewPCG(uint64(i), 9))
					if !turboLoaded() || dctDenom(bw, bh, size) == 1 {
						if !bytes.Equal(got.pix, want.pix) {
							t.Fatalf("%s size %d %v, %d channels, example %d: decodeApply differs from decodePixels + apply", name, size, interp, c, i)
						}
						continue
					}
					scaled++
					_, mean := pixelDiff(t, got, want)
					worst = max(worst, mean)
				}
				if size == 24 && turboLoaded() {
					t.Logf("%s size %d %v: %d of 24 crops decoded at 1/2 or 1/4, worst mean difference %.2f", name, size, interp, scaled, worst)
					if scaled == 0 || worst > 4 {
						t.Errorf("%s size %d %v: %d scaled crops, worst mean difference %.2f (want some, <= 4)", name, size, interp, scaled, worst)
					}
				}
			}
		}
	}
}

// TestDecodeApplyAllocs: with libjpeg-turbo a training example reuses every buffer: no allocation
// per image once the worker's scratch has grown (image/jpeg allocates its planes per image).
func TestDecodeApplyAllocs(t *testing.T) {
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded: image/jpeg allocates per image")
	}
	b := readFixture(t, "rgb420")
	tr := Transform{Size: 96, Train: true, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5, Interp: Bicubic}
	var sc augScratch
	rng := rand.NewPCG(1, 2)
	for range 20 { // grow the buffers to the largest box
		if _, err := tr.decodeApply(b, 3, 0, rng, &sc); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(50, func() { tr.decodeApply(b, 3, 0, rng, &sc) }); a > 0.1 {
		t.Errorf("%v allocations per decodeApply, want 0", a)
	}
}

func TestDCTDenom(t *testing.T) {
	for _, tc := range []struct{ w, h, size, want int }{
		{224, 224, 224, 1}, {447, 900, 224, 1}, {448, 448, 224, 2}, {900, 1000, 224, 4},
		{1791, 1792, 224, 4}, {1792, 1792, 224, 8}, {5000, 4000, 224, 8}, {100, 100, 224, 1},
	} {
		if got := dctDenom(tc.w, tc.h, tc.size); got != tc.want {
			t.Errorf("dctDenom(%d, %d, %d) = %d, want %d", tc.w, tc.h, tc.size, got, tc.want)
		}
	}
}

// TestJPEGConcurrent decodes from several goroutines at once (each takes its own decompressor),
// with collections in between that free pooled ones, and checks every result.
func TestJPEGConcurrent(t *testing.T) {
	var want [][]uint8
	var inputs [][]byte
	for _, name := range jpegFixtures {
		b := readFixture(t, name)
		p, err := decodePixels(b, 3, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		inputs, want = append(inputs, b), append(want, p.pix)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []uint8
			for i := range 30 {
				k := (g + i) % len(inputs)
				p, err := decodePixels(inputs[k], 3, buf, 0)
				if err != nil || !bytes.Equal(p.pix, want[k]) {
					errs <- jpegFixtures[k]
					return
				}
				buf = p.pix
				if i%10 == 9 {
					runtime.GC()
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for name := range errs {
		t.Errorf("%s: a concurrent decode failed or differs", name)
	}
}

// TestJPEGHarmlessWarnings: junk between markers (libjpeg warns, Pillow decodes) gives the clean
// file's pixels; the same junk in a file that is also truncated is still refused, although TurboJPEG
// reports only the harmless first warning.
func TestJPEGHarmlessWarnings(t *testing.T) {
	b := readFixture(t, "rgb420")
	good, err := decodePixels(b, 3, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	junk := append(append(bytes.Clone(b[:2]), "junk"...), b[2:]...)
	p, err := decodePixels(junk, 3, nil, 0)
	if err != nil || !bytes.Equal(p.pix, good.pix) {
		t.Fatalf("junk before a marker: %v, or other pixels", err)
	}
	_, err = decodePixels(junk[:len(junk)*6/10], 3, nil, 0)
	if err == nil {
		t.Fatal("junk before a marker, then truncated: decoded")
	}
	if turboLoaded() && !strings.Contains(err.Error(), "extraneous bytes before marker") {
		t.Errorf("junk, then truncated: %q, want libjpeg's warning and image/jpeg's error", err)
	}
	if p, err := decodePixels(b, 3, nil, 0); err != nil || !bytes.Equal(p.pix, good.pix) {
		t.Fatalf("after the junk: %v, or other pixels", err)
	}
}

// TestJPEGDecoderChoice: the decoder in use is named, with the way to the faster one when it is Go's
// or libjpeg-turbo 2's;
// a library that is not there is reported by name.
func TestJPEGDecoderChoice(t *testing.T) {
	note := JPEGDecoderNote()
	if turboLoaded() {
		if !strings.HasPrefix(JPEGDecoder(), "libjpeg-turbo (") || !strings.Contains(note, JPEGDecoder()) {
			t.Errorf("decoder %q, note %q", JPEGDecoder(), note)
		}
		if hint := strings.Contains(note, "scripts/build-turbojpeg3.sh"); hint == turboHasV3() {
			t.Errorf("TurboJPEG 3 API %v, yet the note %q (it points to libjpeg-turbo 3 exactly when the library lacks it)", turboHasV3(), note)
		}
	} else if JPEGDecoder() != "Go image/jpeg" || !strings.Contains(note, "apt-get install libturbojpeg0") {
		t.Errorf("decoder %q, note %q", JPEGDecoder(), note)
	}
	if os.Getenv(TurboJPEGEnv) == "off" && turboLoaded() {
		t.Errorf("%s=off, yet libjpeg-turbo is loaded", TurboJPEGEnv)
	}
	if _, err := openTurbo([]string{"libturbojpeg-missing.so.0"}); err == nil || !strings.Contains(err.Error(), "libturbojpeg-missing.so.0") {
		t.Errorf("a missing library: %v, want an error naming it", err)
	}
}

// TestJPEGPureGoFallback runs this file's decoder tests again in a child process that does not load
// libjpeg-turbo, so one `go test` checks both decoders where the library is installed.
func TestJPEGPureGoFallback(t *testing.T) {
	if os.Getenv(TurboJPEGEnv) != "" {
		t.Skip("already the child")
	}
	if !turboLoaded() {
		t.Skip("libjpeg-turbo not loaded: the other tests ran with Go's decoder")
	}
	for _, env := range []string{"off", "/nonexistent/libturbojpeg.so.0"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^(TestJPEG|TestDecodeApply)", "-test.v")
		cmd.Env = append(os.Environ(), TurboJPEGEnv+"="+env)
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("--- PASS: TestJPEGDecodeMatchesPillow")) ||
			!bytes.Contains(out, []byte("--- PASS: TestJPEGErrors")) {
			t.Fatalf("%s=%s: %v\n%s", TurboJPEGEnv, env, err, out)
		}
	}
}

// TestSpareProcForDecode: with libjpeg-turbo, GOMAXPROCS is raised to one above the goroutines busy
// in foreign calls, never lowered, and left as the GOMAXPROCS environment variable sets it.
func TestSpareProcForDecode(t *testing.T) {
	if !turboLoaded() {
		if got, want := SpareProcForDecode(runtime.GOMAXPROCS(0)), runtime.GOMAXPROCS(0); got != want {
			t.Errorf("image/jpeg: SpareProcForDecode returned %d, GOMAXPROCS is %d", got, want)
		}
		t.Skip("libjpeg-turbo not loaded: image/jpeg makes no foreign calls and GOMAXPROCS stays")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	t.Setenv("GOMAXPROCS", "")
	for _, c := range []struct{ procs, busy, want int }{{2, 1, 2}, {2, 2, 3}, {2, 5, 6}, {8, 2, 8}} {
		runtime.GOMAXPROCS(c.procs)
		if got := SpareProcForDecode(c.busy); got != c.want || runtime.GOMAXPROCS(0) != c.want {
			t.Errorf("GOMAXPROCS %d, %d busy: returned %d, GOMAXPROCS now %d, want %d", c.procs, c.busy, got, runtime.GOMAXPROCS(0), c.want)
		}
	}
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	if got := SpareProcForDecode(2); got != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Errorf("GOMAXPROCS=2 in the environment: returned %d, GOMAXPROCS now %d, want 2 (the user's setting)", got, runtime.GOMAXPROCS(0))
	}
}
