package data

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// restartTestJPEGs are the fixtures (4:2:0, 4:2:2, 4:4:4, grey, progressive, 203×151) and two
// 4:2:0 images of Go's encoder whose rows have 20 and 25 MCUs, the latter ImageNet-like.
func restartTestJPEGs(t testing.TB) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	for _, name := range jpegFixtures {
		m[name] = readFixture(t, name)
	}
	for _, size := range [][2]int{{320, 200}, {400, 350}} {
		img := image.NewRGBA(image.Rect(0, 0, size[0], size[1]))
		rng := rand.New(rand.NewPCG(uint64(size[0]), 1))
		for y := range size[1] {
			for x := range size[0] {
				img.Set(x, y, color.RGBA{uint8(x*255/size[0] + rng.IntN(40)), uint8(y + rng.IntN(90)), uint8((x*y)>>6 + rng.IntN(20)), 255})
			}
		}
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		m["go"+string(rune('0'+size[0]/100))] = b.Bytes()
	}
	return m
}

func goDecodeRGBA(t *testing.T, b []byte) *image.RGBA {
	t.Helper()
	img, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out := image.NewRGBA(img.Bounds())
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			out.Set(x, y, img.At(x, y))
		}
	}
	return out
}

// TestAddRestartMarkersSamePixels: the recoded JPEG has a restart marker every interval, each in
// its order, and decodes to the same pixels as the original, with image/jpeg and libjpeg-turbo.
func TestAddRestartMarkersSamePixels(t *testing.T) {
	for name, b := range restartTestJPEGs(t) {
		for _, minMCUs := range []int{1, 2, 5} {
			out, ok, err := AddRestartMarkers(b, minMCUs)
			if n, ok := JPEGRestartInterval(b); ok != (name != "prog420") || n != 0 {
				t.Fatalf("%s: JPEGRestartInterval %d, %v", name, n, ok)
			}
			if name == "prog420" {
				if ok || err != nil || !bytes.Equal(out, b) {
					t.Fatalf("progressive %s: ok %v, err %v, changed %v: want it left as it is", name, ok, err, !bytes.Equal(out, b))
				}
				continue
			}
			if !ok || err != nil {
				t.Fatalf("%s, %d MCUs: ok %v, %v", name, minMCUs, ok, err)
			}
			var l, orig jpegLayout
			if err := parseJPEGLayout(&l, out, true); err != nil {
				t.Fatalf("%s: the recoded JPEG's headers: %v", name, err)
			}
			if err := parseJPEGLayout(&orig, b, true); err != nil {
				t.Fatal(err)
			}
			if want := restartInterval(orig.mcusX, minMCUs); l.restart != want || l.restart < min(minMCUs, orig.mcusX) || orig.mcusX%l.restart != 0 {
				t.Fatalf("%s, %d MCUs: interval %d, want %d (a divisor of the row's %d MCUs)", name, minMCUs, l.restart, want, orig.mcusX)
			}
			if n, ok := JPEGRestartInterval(out); !ok || n != l.restart {
				t.Fatalf("%s: JPEGRestartInterval of the recoded JPEG %d, %v; want %d", name, n, ok, l.restart)
			}
			starts, ends, ok := l.restartPieces(out, nil, nil)
			if want := (l.mcusX*l.mcusY + l.restart - 1) / l.restart; !ok || len(starts) != want || len(ends) != want {
				t.Fatalf("%s: %d pieces (ok %v), want %d", name, len(starts), ok, want)
			}
			if got, want := goDecodeRGBA(t, out), goDecodeRGBA(t, b); !bytes.Equal(got.Pix, want.Pix) {
				t.Fatalf("%s, %d MCUs: image/jpeg decodes the recoded JPEG differently", name, minMCUs)
			}
			if turboLoaded() {
				for _, c := range []int{3, 1} {
					got, err1 := decodePixels(out, c, nil, 0)
					want, err2 := decodePixels(b, c, nil, 0)
					if err1 != nil || err2 != nil || !bytes.Equal(got.pix, want.pix) {
						t.Fatalf("%s, %d MCUs, %d channels: libjpeg-turbo decodes the recoded JPEG differently (%v, %v)", name, minMCUs, c, err1, err2)
					}
				}
			}
			// Recoding again leaves it as it is.
			if again, ok, err := AddRestartMarkers(out, minMCUs); ok || err != nil || !bytes.Equal(again, out) {
				t.Fatalf("%s: a JPEG with restart markers was recoded again (ok %v, %v)", name, ok, err)
			}
		}
	}
}

// TestAddRestartMarkersDamaged: a damaged scan is an error naming where, with the input returned;
// nothing panics on damaged bytes anywhere.
func TestAddRestartMarkersDamaged(t *testing.T) {
	b := readFixture(t, "rgb420")
	out, ok, err := AddRestartMarkers(b[:len(b)*6/10], 2)
	if ok || err == nil || !bytes.Contains([]byte(err.Error()), []byte("JPEG scan damaged at MCU")) || !bytes.Equal(out, b[:len(b)*6/10]) {
		t.Fatalf("truncated scan: ok %v, err %v", ok, err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		d := bytes.Clone(b)
		for range 1 + rng.IntN(4) {
			d[rng.IntN(len(d))] = byte(rng.Uint32())
		}
		out, ok, _ := AddRestartMarkers(d, 1+rng.IntN(3))
		if !ok && !bytes.Equal(out, d) {
			t.Fatal("a JPEG that was not recoded came back changed")
		}
	}
}

func FuzzAddRestartMarkers(f *testing.F) {
	f.Add(readFixture(f, "rgb420"), 2)
	f.Add(readFixture(f, "grey"), 1)
	f.Fuzz(func(t *testing.T, b []byte, minMCUs int) {
		out, ok, _ := AddRestartMarkers(b, minMCUs%8)
		if !ok && !bytes.Equal(out, b) {
			t.Fatal("not recoded, yet changed")
		}
	})
}

// TestPackRestartMarkers: with RestartMCUs, Pack stores each JPEG recoded with restart markers and
// every other file as it is, all decoding to the same pixels; without it, the bytes as they are.
func TestPackRestartMarkers(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"a", "b"}, 4, 40, 33)
	src, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Pack(src, t.TempDir(), "x", PackOptions{RestartMCUs: -1}); err == nil || !strings.Contains(err.Error(), "restart MCUs -1") {
		t.Fatalf("negative RestartMCUs: %v", err)
	}
	marked, plain := t.TempDir(), t.TempDir()
	if _, err := Pack(src, marked, "x", PackOptions{RestartMCUs: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Pack(src, plain, "x", PackOptions{}); err != nil {
		t.Fatal(err)
	}
	shm, err := OpenShards(marked)
	if err != nil {
		t.Fatal(err)
	}
	defer shm.Close()
	shp, err := OpenShards(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer shp.Close()
	jpegs := 0
	for i := range src.Len() {
		want, _ := src.Example(i, nil)
		m, err1 := shm.Example(i, nil)
		p, err2 := shp.Example(i, nil)
		if err1 != nil || err2 != nil || !bytes.Equal(p.Encoded, want.Encoded) {
			t.Fatalf("record %d: %v %v, or the plain pack changed the bytes", i, err1, err2)
		}
		var l jpegLayout
		isJPEG := bytes.HasPrefix(want.Encoded, []byte{0xff, 0xd8})
		if err := parseJPEGLayout(&l, m.Encoded, false); isJPEG && (err != nil || l.restart != 1) {
			t.Fatalf("record %d (%s): restart interval %d (%v), want 1", i, src.Describe(i), l.restart, err)
		}
		if !isJPEG && !bytes.Equal(m.Encoded, want.Encoded) {
			t.Fatalf("record %d (%s), not a JPEG, was changed", i, src.Describe(i))
		}
		if isJPEG {
			jpegs++
		}
		if got, want := goDecodeRGBA(t, m.Encoded), goDecodeRGBA(t, want.Encoded); !bytes.Equal(got.Pix, want.Pix) {
			t.Fatalf("record %d: other pixels", i)
		}
	}
	if jpegs == 0 {
		t.Fatal("no JPEG in the tree")
	}
}

// TestPackWorkersSameShards: packing with one worker and with several writes the same bytes, resized
// and recoded or not; with several damaged files the pack stops naming the first of them in order,
// and a source that fails to read stops it with the source's error.
func TestPackWorkersSameShards(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"a", "b", "c"}, 6, 40, 33)
	src, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []PackOptions{{RestartMCUs: 1}, {Resize: 20, RestartMCUs: 1}, {}} {
		var want [][]byte
		for _, workers := range []int{1, 4} {
			opts.Workers, opts.ShardSize = workers, 3000
			out := t.TempDir()
			paths, err := Pack(src, out, "x", opts)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]byte
			for _, p := range paths {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, b)
			}
			if want == nil {
				want = got
			} else if !slices.EqualFunc(got, want, bytes.Equal) {
				t.Fatalf("%+v: %d workers wrote other shards than 1", opts, workers)
			}
		}
	}
	var damaged []string
	for _, name := range []string{filepath.Join("b", "img03.JPEG"), filepath.Join("c", "img01.JPEG"), filepath.Join("a", "img05.JPEG")} {
		p := filepath.Join(root, name)
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(p, raw[:len(raw)/3], 0o644)
		damaged = append(damaged, p)
	}
	src, _ = OpenImageFolder(root)
	for range 5 {
		_, err := Pack(src, t.TempDir(), "x", PackOptions{Workers: 4})
		if err == nil || !strings.Contains(err.Error(), damaged[2]+" does not decode") {
			t.Fatalf("three damaged files: %v, want the first in order (%s)", err, damaged[2])
		}
	}
	gone := filepath.Join(root, "a", "img00.png") // before every damaged file
	os.Remove(gone)
	if _, err := Pack(src, t.TempDir(), "x", PackOptions{Workers: 4}); err == nil || !strings.Contains(err.Error(), gone) {
		t.Fatalf("a file gone after the listing: %v, want the source's error naming %s", err, gone)
	}
}
