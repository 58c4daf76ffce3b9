package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image/jpeg"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// makeTree writes root/<class>/<i>.png (or .JPEG for odd i) images of w×h for each class, and returns
// the images' pixels in ImageFolder order.
func makeTree(t testing.TB, root string, classes []string, perClass, w, h int) {
	t.Helper()
	for c, class := range classes {
		dir := filepath.Join(root, class)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range perClass {
			img := testImage(w+i, h, uint64(100*c+i))
			if i%2 == 1 {
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("img%02d.JPEG", i)))
				if err != nil {
					t.Fatal(err)
				}
				if err := jpeg.Encode(f, img, &jpeg.Options{Quality: 90}); err != nil {
					t.Fatal(err)
				}
				f.Close()
				continue
			}
			writePNG(t, filepath.Join(dir, fmt.Sprintf("img%02d.png", i)), img)
		}
	}
}

func TestImageFolder(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"zebra", "ant", "moth"}, 3, 12, 10)
	os.WriteFile(filepath.Join(root, "ant", "notes.txt"), []byte("x"), 0o644) // not an image: skipped
	f, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.Classes, []string{"ant", "moth", "zebra"}) || f.Len() != 9 {
		t.Fatalf("classes %v, %d files", f.Classes, f.Len())
	}
	if f.Files[3] != filepath.Join("moth", "img00.png") || f.Label(3) != 1 || f.Label(8) != 2 {
		t.Errorf("file 3 %s label %d, label 8 %d", f.Files[3], f.Label(3), f.Label(8))
	}
	ex, err := f.Example(4, nil)
	if err != nil || !bytes.HasPrefix(ex.Encoded, []byte{0xff, 0xd8}) || ex.Label != 1 {
		t.Errorf("example 4 (moth/img01.JPEG): label %d, %d bytes starting % x, %v", ex.Label, len(ex.Encoded), ex.Encoded[:2], err)
	}
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	if _, err := OpenImageFolder(root); err == nil || !strings.Contains(err.Error(), `"empty"`) {
		t.Errorf("empty class folder: %v", err)
	}
	if _, err := OpenImageFolder(filepath.Join(root, "nope")); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing root: %v", err)
	}
}

func TestCIFAR10AndImagenetteBin(t *testing.T) {
	dir := t.TempDir()
	// Two CIFAR records per batch file: label, then R, G, B planes; pixel p of channel c is p+c.
	rec := func(label byte) []byte {
		r := []byte{label}
		for c := range 3 {
			for p := range 1024 {
				r = append(r, byte(p+c))
			}
		}
		return r
	}
	for i := 1; i <= 5; i++ {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("data_batch_%d.bin", i)), append(rec(byte(i)), rec(9)...), 0o644)
	}
	os.WriteFile(filepath.Join(dir, "test_batch.bin"), rec(3)[:100], 0o644) // truncated
	ds, err := LoadCIFAR10(dir, "train")
	if err != nil {
		t.Fatal(err)
	}
	if ds.N != 10 || ds.Labels[2] != 2 || ds.Labels[3] != 9 || ds.ClassNames[9] != "truck" {
		t.Fatalf("N %d labels %v", ds.N, ds.Labels)
	}
	// HWC: pixel (y=1, x=2) is p = 34, channels 34, 35, 36.
	if got := ds.Image(0)[3*34 : 3*34+3]; !slices.Equal(got, []uint8{34, 35, 36}) {
		t.Errorf("pixel 34 = %v, want [34 35 36]", got)
	}
	if _, err := LoadCIFAR10(dir, "test"); err == nil || !strings.Contains(err.Error(), "test_batch.bin") {
		t.Errorf("truncated test batch: %v", err)
	}

	// Imagenette .bin: count 3, records of 1 + 3*4*4 bytes.
	bin := binary.LittleEndian.AppendUint32(nil, 3)
	for i := range 3 {
		bin = append(bin, byte(i*4))
		for c := range 3 {
			for p := range 16 {
				bin = append(bin, byte(10*c+p))
			}
		}
	}
	path := filepath.Join(dir, "train.bin")
	os.WriteFile(path, bin, 0o644)
	ds, err = LoadImagenetteBin(path, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ds.N != 3 || ds.Height != 4 || ds.Width != 4 || ds.Labels[2] != 8 || !slices.Equal(ds.Image(1)[15:18], []uint8{5, 15, 25}) {
		t.Errorf("imagenette-bin: N %d %dx%d labels %v pixel 5 %v", ds.N, ds.Height, ds.Width, ds.Labels, ds.Image(1)[15:18])
	}
	if _, err := LoadImagenetteBin(path, 2, 8, 0); err != nil {
		t.Errorf("explicit 2x8: %v", err)
	}
	if _, err := LoadImagenetteBin(path, 0, 0, 5); err == nil || !strings.Contains(err.Error(), "record 2 has label 8") {
		t.Errorf("label out of range: %v", err)
	}
	os.WriteFile(path, bin[:len(bin)-1], 0o644)
	if _, err := LoadImagenetteBin(path, 0, 0, 0); err == nil || !strings.Contains(err.Error(), "count 3") {
		t.Errorf("truncated: %v", err)
	}
}

func TestPackRoundTripAndVerify(t *testing.T) {
	root, out := t.TempDir(), t.TempDir()
	makeTree(t, root, []string{"a", "b", "c"}, 4, 30, 20)
	src, err := OpenImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	paths, err := Pack(src, out, "train", PackOptions{ShardSize: 4000, Progress: func(done, total int, _ int64) {
		calls++
		if total != 12 || done != calls {
			t.Errorf("progress %d/%d at call %d", done, total, calls)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2 || !strings.HasSuffix(paths[0], fmt.Sprintf("train-00000-of-%05d.shard", len(paths))) {
		t.Fatalf("paths %v: want several shards of 4000 bytes", paths)
	}
	sh, err := OpenShards(out)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if sh.Len() != 12 || !slices.Equal(sh.ClassNames(), []string{"a", "b", "c"}) || sh.Kind() != ShardEncoded {
		t.Fatalf("shards: %d records, classes %v, kind %v", sh.Len(), sh.ClassNames(), sh.Kind())
	}
	for i := range 12 {
		want, _ := src.Example(i, nil)
		got, err := sh.Example(i, nil)
		if err != nil || !bytes.Equal(got.Encoded, want.Encoded) || got.Label != want.Label || sh.Label(i) != want.Label {
			t.Fatalf("record %d (%s): label %d, want %d; bytes equal %v; %v", i, sh.Describe(i), got.Label, want.Label,
				bytes.Equal(got.Encoded, want.Encoded), err)
		}
	}
	for _, p := range paths {
		if _, err := VerifyShard(p); err != nil {
			t.Error(err)
		}
	}

	// Resized packing: 30x20 images with --resize 10 become JPEGs with shorter side 10.
	out2 := t.TempDir()
	if _, err := Pack(src, out2, "val", PackOptions{Resize: 10}); err != nil {
		t.Fatal(err)
	}
	sh2, err := OpenShards(out2)
	if err != nil {
		t.Fatal(err)
	}
	defer sh2.Close()
	ex, _ := sh2.Example(5, nil)
	p, err := decodePixels(ex.Encoded, 3, nil, 0)
	if err != nil || p.h != 10 || p.w != 15 { // record 5 is 31x20: int(10*31/20) = 15
		t.Errorf("resized record 5: %dx%d, %v", p.w, p.h, err)
	}

	// Damage: a flipped record byte fails verify (not open); truncation and a bad header fail open.
	raw, _ := os.ReadFile(paths[0])
	bad := slices.Clone(raw)
	bad[ShardHeaderSize+10] ^= 1
	os.WriteFile(paths[0], bad, 0o644)
	if _, err := VerifyShard(paths[0]); err == nil || !strings.Contains(err.Error(), "records CRC") || !strings.Contains(err.Error(), paths[0]) {
		t.Errorf("flipped record byte: %v", err)
	}
	os.WriteFile(paths[0], raw[:len(raw)-3], 0o644)
	if _, err := OpenShards(out); err == nil || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), paths[0]) {
		t.Errorf("truncated shard: %v", err)
	}
	os.Remove(paths[0])
	if _, err := OpenShards(out); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing shard: %v", err)
	}
}

func TestPackPixelsAndCorruptInput(t *testing.T) {
	ds := synthDataset(7)
	ds.Channels, ds.Images = 1, ds.Images[:7*6] // 2x3 grey
	out := t.TempDir()
	if _, err := Pack(NewDatasetSource(ds), out, "x", PackOptions{}); err != nil {
		t.Fatal(err)
	}
	sh, err := OpenShards(out)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if h, w, c := sh.Shape(); h != 2 || w != 3 || c != 1 || sh.Len() != 7 {
		t.Fatalf("pixel shards %dx%dx%d, %d records", h, w, c, sh.Len())
	}
	ex, _ := sh.Example(6, nil)
	if !slices.Equal(ex.Pixels, ds.Image(6)) || ex.Label != 6 {
		t.Errorf("record 6: %v label %d, want %v 6", ex.Pixels, ex.Label, ds.Image(6))
	}

	root := t.TempDir()
	makeTree(t, root, []string{"a"}, 2, 8, 8)
	jp := filepath.Join(root, "a", "img01.JPEG")
	raw, _ := os.ReadFile(jp)
	os.WriteFile(jp, raw[:len(raw)/2], 0o644)
	src, _ := OpenImageFolder(root)
	if _, err := Pack(src, t.TempDir(), "x", PackOptions{}); err == nil || !strings.Contains(err.Error(), jp) {
		t.Errorf("corrupt JPEG: %v", err)
	}
	l, err := NewSourceLoader(src, LoaderOptions{BatchSize: 2, Transform: &Transform{Size: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Batch(0, 0); err == nil || !strings.Contains(err.Error(), jp) {
		t.Errorf("loader on a corrupt JPEG: %v", err)
	}
}

// TestPackIntoANonEmptyFolder: packing into a folder that holds anything is refused, naming it and
// --overwrite, and writes nothing; with Overwrite the new set replaces the old shards (a set of six
// by a set of one) and other files stay.
func TestPackIntoANonEmptyFolder(t *testing.T) {
	ds := synthDataset(12)
	ds.Channels, ds.Images = 1, ds.Images[:12*6]
	out := t.TempDir()
	old, err := Pack(NewDatasetSource(ds), out, "x", PackOptions{ShardSize: 100})
	if err != nil || len(old) < 3 {
		t.Fatalf("first pack: %d shards, %v", len(old), err)
	}
	os.WriteFile(filepath.Join(out, "README"), []byte("mine"), 0o644)
	before, _ := os.ReadDir(out)
	if _, err := Pack(NewDatasetSource(ds), out, "x", PackOptions{}); err == nil || !strings.Contains(err.Error(), out+" is not empty") ||
		!strings.Contains(err.Error(), "--overwrite") {
		t.Errorf("non-empty folder: %v", err)
	}
	if after, _ := os.ReadDir(out); len(after) != len(before) {
		t.Errorf("a refused pack changed the folder: %d entries, then %d", len(before), len(after))
	}
	paths, err := Pack(NewDatasetSource(ds), out, "x", PackOptions{Overwrite: true})
	if err != nil || len(paths) != 1 {
		t.Fatalf("overwrite: %v, %v", paths, err)
	}
	sh, err := OpenShards(out)
	if err != nil || sh.Len() != 12 || len(sh.Paths) != 1 {
		t.Fatalf("after overwrite: %v", err)
	}
	sh.Close()
	if b, err := os.ReadFile(filepath.Join(out, "README")); err != nil || string(b) != "mine" {
		t.Errorf("overwrite removed a file that is not a shard: %v", err)
	}
}

// validShard returns a small valid encoded shard's bytes.
func validShard(t testing.TB) []byte {
	p := filepath.Join(t.TempDir(), "s.shard")
	w, err := CreateShard(p, ShardEncoded, []string{"cat", "dog"}, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Add(1, []byte("hello"))
	w.Add(0, []byte("jpeg!!"))
	if err := w.Finish(0, 1); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	return b
}

func TestShardBytesGolden(t *testing.T) {
	b := validShard(t)
	info, err := ParseShard(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	// 88 header + 11 record bytes + 2*20 index + (2+3)+(2+3) names.
	if len(b) != 88+11+40+10 || info.IndexOffset != 99 || info.ClassesOffset != 139 || info.Len(1) != 6 || info.Labels[0] != 1 {
		t.Fatalf("layout: %d bytes, index at %d, names at %d", len(b), info.IndexOffset, info.ClassesOffset)
	}
	if got := fmt.Sprintf("% x", b[:16]); got != "54 52 4e 53 48 41 52 44 02 00 00 00 01 00 00 00" {
		t.Errorf("magic, version, kind: %s", got)
	}
	// offset 88, length 5, label 1, CRC-32C("hello") = 0x9a71bb4c.
	if got := fmt.Sprintf("% x", b[99:119]); got != "58 00 00 00 00 00 00 00 05 00 00 00 01 00 00 00 4c bb 71 9a" {
		t.Errorf("index entry 0: %s", got)
	}
	if !slices.Equal(info.CRCs, []uint32{0x9a71bb4c, crc32.Checksum([]byte("jpeg!!"), castagnoli)}) {
		t.Errorf("record CRCs %x", info.CRCs)
	}
	for _, cut := range []int{0, 10, 87, 88, 98, 120, len(b) - 1} {
		if _, err := ParseShard(bytes.NewReader(b[:cut]), int64(cut)); err == nil {
			t.Errorf("parsed a shard cut at %d bytes", cut)
		}
	}
	for _, flip := range []int{9, 20, 50, 100, 135} {
		bad := slices.Clone(b)
		bad[flip] ^= 0x40
		if _, err := ParseShard(bytes.NewReader(bad), int64(len(bad))); err == nil {
			t.Errorf("parsed a shard with byte %d flipped", flip)
		}
	}
}

// TestShardVersion1StillReads: shards packed before the per-record CRC-32C (format version 1, 16-byte
// index entries; testdata/shard_v1 was written by that packer) open, read and verify as before; their
// records are not checked one by one.
func TestShardVersion1StillReads(t *testing.T) {
	for _, name := range []string{"pixels", "encoded"} {
		path := filepath.Join("testdata", "shard_v1", name+"-00000-of-00001.shard")
		sh, err := OpenShards(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		defer sh.Close()
		info := sh.Infos[0]
		if info.Version != 1 || info.CRCs != nil || info.ClassesOffset-info.IndexOffset != 16*int64(info.Count) {
			t.Errorf("%s: version %d, CRCs %v, index of %d bytes for %d records", name, info.Version, info.CRCs,
				info.ClassesOffset-info.IndexOffset, info.Count)
		}
		if _, err := VerifyShard(path); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		ex, err := sh.Example(1, nil)
		if err != nil {
			t.Fatalf("%s record 1: %v", name, err)
		}
		if name == "pixels" {
			if want := []uint8{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}; sh.Len() != 3 || !slices.Equal(ex.Pixels, want) || ex.Label != 1 {
				t.Errorf("pixels record 1: %v label %d of %d records", ex.Pixels, ex.Label, sh.Len())
			}
			continue
		}
		if p, err := decodePixels(ex.Encoded, 3, nil, 0); err != nil || p.w != 5 || p.h != 4 || ex.Label != 1 {
			t.Errorf("encoded record 1: %dx%d label %d, %v", p.w, p.h, ex.Label, err)
		}
	}
}

// TestShardRecordCRCIsCheckedOnRead: a record whose bytes changed after packing (a flipped bit on the
// disk) is an error naming the file, the record and its bytes, whoever reads it; the records beside
// it read as before, and verify names the damaged record.
func TestShardRecordCRCIsCheckedOnRead(t *testing.T) {
	ds := synthDataset(6)
	ds.Channels, ds.Images = 1, ds.Images[:6*6] // 2x3 grey
	out := t.TempDir()
	paths, err := Pack(NewDatasetSource(ds), out, "x", PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(paths[0])
	sh, err := OpenShards(out)
	if err != nil {
		t.Fatal(err)
	}
	info := sh.Infos[0]
	sh.Close()
	raw[info.Offsets[3]+2] ^= 0x10 // record 3
	os.WriteFile(paths[0], raw, 0o644)
	sh, err = OpenShards(out)
	if err != nil {
		t.Fatalf("open (records are checked when read): %v", err)
	}
	defer sh.Close()
	_, err = sh.Example(3, nil)
	want := fmt.Sprintf("%s record 3: CRC-32C", paths[0])
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrBadRecord) {
		t.Errorf("damaged record 3: %v, want a bad record error containing %q", err, want)
	}
	for _, i := range []int{2, 4} {
		if ex, err := sh.Example(i, nil); err != nil || !slices.Equal(ex.Pixels, ds.Image(i)) {
			t.Errorf("record %d beside the damaged one: %v", i, err)
		}
	}
	if _, err := VerifyShard(paths[0]); err == nil || !strings.Contains(err.Error(), "record 3 does not match its CRC-32C") {
		t.Errorf("verify: %v, want it to name record 3", err)
	}
	l, err := NewSourceLoader(sh, LoaderOptions{BatchSize: 6, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Batch(0, 0); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("loader: %v, want the run stopped naming the shard and record", err)
	}
}

// FuzzReadShardHeader feeds arbitrary bytes to the header and index parser: it must return an error
// or a shard whose index is self-consistent, never panic or allocate beyond the input.
func FuzzReadShardHeader(f *testing.F) {
	good := validShard(f)
	f.Add(good)
	f.Add(good[:ShardHeaderSize])
	f.Add([]byte(ShardMagic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if h, err := ReadShardHeader(b); err == nil && h.FileSize < h.IndexOffset {
			t.Fatalf("accepted header with file size %d below index offset %d", h.FileSize, h.IndexOffset)
		}
		checkParse(t, b)
		// Mutations rarely keep the CRCs right; recompute them so the index checks get exercised too.
		checkParse(t, withFixedCRCs(b))
	})
}

// withFixedCRCs returns a copy of b whose index and header CRC-32Cs match its content, where the
// header's offsets allow computing them.
func withFixedCRCs(b []byte) []byte {
	if len(b) < ShardHeaderSize {
		return b
	}
	b = slices.Clone(b)
	le := binary.LittleEndian
	if idx := le.Uint64(b[48:]); idx <= uint64(len(b)) {
		le.PutUint32(b[76:], crc32.Checksum(b[idx:], castagnoli))
	}
	le.PutUint64(b[64:], uint64(len(b)))
	le.PutUint32(b[80:], crc32.Checksum(b[:80], castagnoli))
	return b
}

func checkParse(t *testing.T, b []byte) {
	info, err := ParseShard(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return
	}
	if len(info.Offsets) != info.Count+1 || len(info.Classes) != info.NumClasses || info.Offsets[info.Count] != info.IndexOffset {
		t.Fatalf("inconsistent parse: %+v", info.ShardHeader)
	}
	for i := range info.Count {
		if info.Len(i) < 0 || info.Labels[i] < 0 || int(info.Labels[i]) >= info.NumClasses {
			t.Fatalf("record %d: length %d label %d", i, info.Len(i), info.Labels[i])
		}
	}
}
