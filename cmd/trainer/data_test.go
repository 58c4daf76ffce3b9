package main

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trainer/trainer/data"
)

// writeTree writes root/{train,val}/<class>/<i>.png, 16x12 images.
func writeTree(t *testing.T, root string) {
	t.Helper()
	for _, split := range []string{"train", "val"} {
		for c, class := range []string{"n01", "n02"} {
			dir := filepath.Join(root, split, class)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				img := image.NewNRGBA(image.Rect(0, 0, 16, 12))
				for p := range img.Pix {
					img.Pix[p] = uint8(p*(c+1) + i)
				}
				img.Set(0, 0, color.White)
				var b bytes.Buffer
				png.Encode(&b, img)
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.png", i)), b.Bytes(), 0o644)
			}
		}
	}
}

func TestDataPackInspectVerify(t *testing.T) {
	tree, out := t.TempDir(), t.TempDir()
	writeTree(t, tree)
	var stdout, stderr bytes.Buffer
	if err := cmdData([]string{"pack", tree, out, "--shard-size", "2KiB"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "train: 6 images of 2 classes in") || !strings.Contains(stderr.String(), "pack val: 6/6 images") {
		t.Errorf("pack output:\n%s\n%s", stdout.String(), stderr.String())
	}
	stdout.Reset()
	if err := cmdData([]string{"inspect", filepath.Join(out, "train")}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if s := stdout.String(); !strings.Contains(s, "6 records, 2 classes") || !strings.Contains(s, "n02") || !strings.Contains(s, "of png, 16x12") {
		t.Errorf("inspect:\n%s", s)
	}
	stdout.Reset()
	if err := cmdData([]string{"verify", filepath.Join(out, "val"), "--decode"}, &stdout, &stderr); err != nil || !strings.Contains(stdout.String(), "ok: ") {
		t.Fatalf("verify: %v\n%s", err, stdout.String())
	}
	// Damage one record byte of the first val shard: verify names the file.
	shards, _ := filepath.Glob(filepath.Join(out, "val", "*.shard"))
	raw, _ := os.ReadFile(shards[0])
	raw[100] ^= 0xff
	os.WriteFile(shards[0], raw, 0o644)
	if err := cmdData([]string{"verify", filepath.Join(out, "val")}, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), shards[0]) {
		t.Errorf("verify of a damaged shard: %v", err)
	}
	if v, err := parseByteSize("1GiB"); err != nil || v != 1<<30 {
		t.Errorf("1GiB = %d, %v", v, err)
	}
	if _, err := parseByteSize("lots"); err == nil {
		t.Error("parsed \"lots\"")
	}
}

// TestDataPackRefusals: pack refuses a non-empty OUT before reading anything unless --overwrite, and
// an image above --max-image-pixels naming it; verify --decode applies the same limit; inspect says
// when a shard predates per-record checksums.
func TestDataPackRefusals(t *testing.T) {
	tree, out := t.TempDir(), t.TempDir()
	writeTree(t, tree)
	os.WriteFile(filepath.Join(out, "notes.txt"), []byte("x"), 0o644)
	err := cmdData([]string{"pack", tree, out}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), out+" is not empty") || !strings.Contains(err.Error(), "--overwrite") {
		t.Errorf("non-empty OUT: %v", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Errorf("a refused pack wrote %d entries", len(entries)-1)
	}
	if err := cmdData([]string{"pack", tree, out, "--overwrite"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("--overwrite: %v", err)
	}
	if err := cmdData([]string{"pack", tree, out, "--overwrite"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("--overwrite over shards: %v", err)
	}
	// 16x12 = 192 pixels: above a limit of 191, from the header.
	err = cmdData([]string{"pack", tree, t.TempDir(), "--max-image-pixels", "191"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(tree, "train", "n01", "0.png")) || !strings.Contains(err.Error(), "16x12 is 192 pixels, more than 191") {
		t.Errorf("--max-image-pixels 191: %v", err)
	}
	if err := cmdData([]string{"pack", tree, t.TempDir(), "--max-image-pixels", "0"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "--max-image-pixels 0") {
		t.Errorf("--max-image-pixels 0: %v", err)
	}
	var stdout bytes.Buffer
	err = cmdData([]string{"verify", filepath.Join(out, "val"), "--decode", "--max-image-pixels", "191"}, &stdout, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "record 0: image above the pixel limit") {
		t.Errorf("verify --decode --max-image-pixels 191: %v", err)
	}
	v1 := filepath.Join("..", "..", "data", "testdata", "shard_v1", "pixels-00000-of-00001.shard")
	if err := cmdData([]string{"inspect", v1}, &stdout, io.Discard); err != nil || !strings.Contains(stdout.String(), "format v1") ||
		!strings.Contains(stdout.String(), "no per-record CRC-32C") {
		t.Errorf("inspect of a version 1 shard: %v\n%s", err, stdout.String())
	}
}

// TestDataBench times the loader on a generated ImageFolder, and on its packed shards.
func TestDataBench(t *testing.T) {
	tree, out := t.TempDir(), t.TempDir()
	writeTree(t, tree)
	var stdout, stderr bytes.Buffer
	if err := cmdData([]string{"bench", filepath.Join(tree, "train"), "--size", "16", "--batch", "2", "--batches", "5", "--workers", "2"}, &stdout, &stderr); err != nil {
		t.Fatal(err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "images/s with 2 workers") {
		t.Errorf("bench output: %q", stdout.String())
	}
	if err := cmdData([]string{"pack", tree, out}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if err := cmdData([]string{"bench", filepath.Join(out, "train"), "--source", "shards", "--size", "16", "--batch", "2", "--batches", "3"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "(6 images)") {
		t.Errorf("bench output on shards: %q", stdout.String())
	}
	if err := cmdData([]string{"bench", filepath.Join(tree, "train"), "--batch", "64"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "gives no batch") {
		t.Errorf("a split smaller than a batch: %v", err)
	}
}

// TestDataPackOverwriteIsAllOrNothing: `data pack --overwrite` that fails while packing val (here a
// corrupt image; a full disk is the same) leaves the old dataset byte for byte, with no new train beside
// the old val; one that succeeds replaces both splits, keeps the other files and folders there, and
// leaves nothing beside OUT.
func TestDataPackOverwriteIsAllOrNothing(t *testing.T) {
	tree, parent := t.TempDir(), t.TempDir()
	out := filepath.Join(parent, "ds")
	writeTree(t, tree)
	if err := cmdData([]string{"pack", tree, out}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(out, "README"), []byte("notes"), 0o644)
	os.MkdirAll(filepath.Join(out, "test"), 0o755)
	os.WriteFile(filepath.Join(out, "test", "keep-00000-of-00001.shard"), []byte("another split"), 0o644)
	before := treeFiles(t, out)

	// A second class of train images makes the new train differ; val gets a corrupt image.
	os.WriteFile(filepath.Join(tree, "train", "n01", "9.png"), mustPNG(t), 0o644)
	os.WriteFile(filepath.Join(tree, "val", "n02", "bad.png"), []byte("not a png"), 0o644)
	var stdout bytes.Buffer
	err := cmdData([]string{"pack", tree, out, "--overwrite"}, &stdout, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "bad.png") || !strings.Contains(err.Error(), out+" is unchanged") {
		t.Errorf("a pack failing in val: %v", err)
	}
	if after := treeFiles(t, out); !maps.Equal(before, after) {
		t.Errorf("a failed --overwrite changed %s: %d files before, %d after", out, len(before), len(after))
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("beside OUT: %d entries, want none", len(entries)-1)
	}

	os.Remove(filepath.Join(tree, "val", "n02", "bad.png"))
	stdout.Reset()
	if err := cmdData([]string{"pack", tree, out, "--overwrite"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "train: 7 images of 2 classes") || !strings.Contains(stdout.String(), "under "+filepath.Join(out, "train")) {
		t.Errorf("pack output:\n%s", stdout.String())
	}
	after := treeFiles(t, out)
	if after["README"] != "notes" || after[filepath.Join("test", "keep-00000-of-00001.shard")] != "another split" {
		t.Errorf("--overwrite lost the files it does not replace: %v", slices.Collect(maps.Keys(after)))
	}
	sh, err := data.OpenShards(filepath.Join(out, "train"))
	if err != nil || sh.Len() != 7 {
		t.Fatalf("the new train: %v", err)
	}
	sh.Close()
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("beside OUT: %d entries, want none", len(entries)-1)
	}
}

// treeFiles reads every file under dir by its path relative to dir.
func treeFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func mustPNG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 16, 12))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// zeroHeightJPEG is a valid 8x8 JPEG whose frame header (SOF0) then declares a height of 0.
func zeroHeightJPEG(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	out := b.Bytes()
	i := bytes.Index(out, []byte{0xFF, 0xC0})
	if i < 0 {
		t.Fatal("no SOF0 marker")
	}
	out[i+5], out[i+6] = 0, 0 // marker, length (2), precision (1), then the height
	return out
}

// TestDataPackRefusesAmbiguousFolders: an ImageFolder whose train and val have different class names
// (the same count) is refused naming the first class that differs, before anything is written (the
// check ran for archives only); a JPEG whose header declares a height of 0 is refused naming the file
// (Go's decoder takes it for an empty image, which stopped the run later).
func TestDataPackRefusesAmbiguousFolders(t *testing.T) {
	tree, out := t.TempDir(), t.TempDir()
	writeTree(t, tree)
	if err := os.Rename(filepath.Join(tree, "val", "n02"), filepath.Join(tree, "val", "n03")); err != nil {
		t.Fatal(err)
	}
	err := cmdData([]string{"pack", tree, out}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `class 1 is "n03" in val and "n02" in train`) {
		t.Errorf("val with class n03 for train's n02: %v, want it refused naming both", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a refused pack wrote %d entries", len(entries))
	}

	tree = t.TempDir()
	writeTree(t, tree)
	bad := filepath.Join(tree, "val", "n01", "flat.jpg")
	os.WriteFile(bad, zeroHeightJPEG(t), 0o644)
	err = cmdData([]string{"pack", tree, t.TempDir()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "8x0 image") {
		t.Errorf("a JPEG of height 0: %v, want it refused naming the file", err)
	}
}

// TestDataPackRestartMarkers: pack recodes JPEGs with restart markers by default and inspect says
// so; --restart-mcus 0 stores them as they are, and inspect says they have none.
func TestDataPackRestartMarkers(t *testing.T) {
	tree := t.TempDir()
	dir := filepath.Join(tree, "n01")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	img := image.NewNRGBA(image.Rect(0, 0, 48, 40))
	for p := range img.Pix {
		img.Pix[p] = uint8(p * 7)
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "0.jpg"), b.Bytes(), 0o644)
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "of jpeg, 48x40, restart markers every 1 MCUs"},
		{[]string{"--restart-mcus", "0"}, "of jpeg, 48x40, no restart markers"},
		{[]string{"--restart-mcus", "2"}, "of jpeg, 48x40, restart markers every 3 MCUs"},
	} {
		out := t.TempDir()
		var stdout bytes.Buffer
		if err := cmdData(append([]string{"pack", tree, out}, c.flags...), io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
		if err := cmdData([]string{"inspect", out}, &stdout, io.Discard); err != nil || !strings.Contains(stdout.String(), c.want) {
			t.Errorf("pack %v, inspect: %v\n%s\nwant %q", c.flags, err, stdout.String(), c.want)
		}
	}
	if err := cmdData([]string{"pack", tree, t.TempDir(), "--restart-mcus", "-1"}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "restart MCUs -1") {
		t.Errorf("--restart-mcus -1: %v", err)
	}
}
