package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trainer/trainer/data"
)

// archiveOf returns a tar (gzip-compressed when gz) of name -> body, in the order given.
func archiveOf(t *testing.T, gz bool, names []string, bodies map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range names {
		b := bodies[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	tw.Close()
	if !gz {
		return buf.Bytes()
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(buf.Bytes())
	zw.Close()
	return z.Bytes()
}

// tinyPNG is a 6x4 PNG whose pixels encode seed.
func tinyPNG(seed int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 6, 4))
	for i := range img.Pix {
		img.Pix[i] = uint8(seed*31 + i)
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// imagenetteTgz is a small archive laid out as fast.ai's imagenette2-320.tgz: 3 classes, 4 train and
// 2 val images each.
func imagenetteTgz(t *testing.T) []byte {
	bodies := map[string][]byte{"imagenette2-320/noisy_imagenette.csv": []byte("path,noisy_labels_0\n")}
	names := []string{"imagenette2-320/noisy_imagenette.csv"}
	seed := 0
	for _, split := range []string{"train", "val"} {
		for _, class := range []string{"n03888257", "n01440764", "n02102040"} {
			for k := range map[string]int{"train": 4, "val": 2}[split] {
				seed++
				name := fmt.Sprintf("imagenette2-320/%s/%s/%s_%d.JPEG", split, class, class, k)
				names = append(names, name)
				bodies[name] = tinyPNG(seed)
			}
		}
	}
	return archiveOf(t, true, names, bodies)
}

// TestDataPackArchives: pack takes Imagenette's .tgz as a file, and a folder holding ImageNet's train
// tar (per-class tars), val tar and LOC_val_solution.csv, sorting the validation images into classes.
func TestDataPackArchives(t *testing.T) {
	dir := t.TempDir()
	tgz := filepath.Join(dir, "imagenette2-320.tgz")
	os.WriteFile(tgz, imagenetteTgz(t), 0o644)
	out := filepath.Join(dir, "imagenette")
	var stdout, stderr bytes.Buffer
	if err := cmdData([]string{"pack", tgz, out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"train: 12 images of 3 classes", "val: 6 images of 3 classes"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("pack of the .tgz: %q missing from\n%s", want, stdout.String())
		}
	}

	imagenet := filepath.Join(dir, "ilsvrc")
	os.MkdirAll(imagenet, 0o755)
	classes := []string{"n02000002", "n01000001"}
	var outer []string
	outerBodies := map[string][]byte{}
	for c, wnid := range classes {
		inner := map[string][]byte{}
		var names []string
		for k := range 3 {
			name := fmt.Sprintf("%s_%d.JPEG", wnid, k)
			names = append(names, name)
			inner[name] = tinyPNG(50 + 10*c + k)
		}
		outer = append(outer, wnid+".tar")
		outerBodies[wnid+".tar"] = archiveOf(t, false, names, inner)
	}
	os.WriteFile(filepath.Join(imagenet, "ILSVRC2012_img_train.tar"), archiveOf(t, false, outer, outerBodies), 0o644)
	val := map[string][]byte{}
	var valNames []string
	csv := "ImageId,PredictionString\n"
	for i := range 4 {
		id := fmt.Sprintf("ILSVRC2012_val_%08d", i+1)
		valNames = append(valNames, id+".JPEG")
		val[id+".JPEG"] = tinyPNG(90 + i)
		csv += fmt.Sprintf("%s,%s 1 2 3 4\n", id, classes[i%2])
	}
	valTar := filepath.Join(imagenet, "ILSVRC2012_img_val.tar")
	os.WriteFile(valTar, archiveOf(t, false, valNames, val), 0o644)

	// The val tar alone, without labels, says how to give them.
	err := cmdData([]string{"pack", valTar, filepath.Join(dir, "v")}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "LOC_val_solution.csv") {
		t.Errorf("val tar without labels: %v", err)
	}
	err = cmdData([]string{"pack", imagenet, filepath.Join(dir, "x")}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "--labels") {
		t.Errorf("folder without labels: %v", err)
	}
	os.WriteFile(filepath.Join(imagenet, "LOC_val_solution.csv"), []byte(csv), 0o644)
	stdout.Reset()
	packed := filepath.Join(dir, "imagenet")
	if err := cmdData([]string{"pack", imagenet, packed}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"train: 6 images of 2 classes", "val: 4 images of 2 classes"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("pack of the ImageNet folder: %q missing from\n%s", want, stdout.String())
		}
	}
	sh, err := data.OpenShards(filepath.Join(packed, "val"))
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	for i := range sh.Len() {
		ex, _ := sh.Example(i, nil)
		for n, name := range valNames {
			if bytes.Equal(ex.Encoded, val[name]) && sh.ClassNames()[ex.Label] != classes[n%2] {
				t.Errorf("%s packed as %s, its label is %s", name, sh.ClassNames()[ex.Label], classes[n%2])
			}
		}
	}
}

// fetchServer serves files on 127.0.0.1 and counts the requests.
func fetchServer(files map[string][]byte) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		b, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
	})), &n
}

// TestDataFetch: fetch downloads the archive from a mirror on 127.0.0.1, checks it against the digest
// (the published size and digest refuse this stand-in), packs train and val, and a second run finds them ready
// without asking the server.
func TestDataFetch(t *testing.T) {
	tgz := imagenetteTgz(t)
	sum := sha256.Sum256(tgz)
	digest := hex.EncodeToString(sum[:])
	ts, requests := fetchServer(map[string][]byte{"imagenette2-160.tgz": tgz})
	defer ts.Close()
	out := filepath.Join(t.TempDir(), "imagenette")
	var stdout, stderr bytes.Buffer

	err := cmdData([]string{"fetch", "imagenette", out, "--size", "160", "--mirror", ts.URL}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "expected 99003388") {
		t.Fatalf("the stand-in archive against the published size and digest: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "imagenette2-160.tgz")); !os.IsNotExist(err) {
		t.Errorf("a refused download was kept: %v", err)
	}
	t.Setenv(mirrorEnv, ts.URL) // the environment names the mirror as well as --mirror
	stdout.Reset()
	if err := cmdData([]string{"fetch", "imagenette", out, "--size", "160", "--sha256", digest}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SHA-256 " + digest + " checked", "train: 12 images of 3 classes", "val: 6 images of 3 classes",
		"data.source: shards, data.dir: " + out} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("fetch: %q missing from\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "imagenette2-160.tgz: ") || !strings.Contains(stderr.String(), "(100%)") {
		t.Errorf("no progress lines on stderr:\n%s", stderr.String())
	}
	before := requests.Load()
	stdout.Reset()
	if err := cmdData([]string{"fetch", "imagenette", out, "--size", "160", "--sha256", digest}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if requests.Load() != before || !strings.Contains(stdout.String(), "already packed") {
		t.Errorf("the second fetch asked the server %d times:\n%s", requests.Load()-before, stdout.String())
	}
	// With one split's shards gone, the kept archive is re-packed without a download.
	os.RemoveAll(filepath.Join(out, "val"))
	stdout.Reset()
	if err := cmdData([]string{"fetch", "imagenette", out, "--size", "160", "--sha256", digest}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if requests.Load() != before || !strings.Contains(stdout.String(), "already downloaded") || !strings.Contains(stdout.String(), "val: 6 images") {
		t.Errorf("re-pack of val:\n%s", stdout.String())
	}
	for _, c := range [][]string{{"fetch", "imagenet", out}, {"fetch", "imagenette", out, "--size", "999"}} {
		err := cmdData(c, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), map[string]string{"imagenet": "image-net.org", "imagenette": "160"}[c[1]]) {
			t.Errorf("%v: %v", c, err)
		}
	}
}
