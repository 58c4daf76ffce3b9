package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// member is one file of a test archive; typ 0 means a regular file.
type member struct {
	name string
	body []byte
	typ  byte
}

// writeTar writes members as a tar (gzip-compressed when gz) at path.
func writeTar(t *testing.T, path string, gz bool, members []member) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		h := &tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.body)), Typeflag: tar.TypeReg}
		if m.typ != 0 {
			h.Typeflag, h.Size = m.typ, 0
			if m.typ == tar.TypeSymlink {
				h.Linkname = "/etc/passwd"
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			if _, err := tw.Write(m.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	out := buf.Bytes()
	if gz {
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(out)
		zw.Close()
		out = z.Bytes()
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// tarBytes is writeTar's tar to memory (for nested tars).
func tarBytes(t *testing.T, members []member) []byte {
	p := filepath.Join(t.TempDir(), "inner.tar")
	writeTar(t, p, false, members)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pngOf is a small PNG whose pixels encode seed, so every test image differs.
func pngOf(seed int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 5, 4))
	for i := range 20 {
		img.Set(i%5, i/5, color.RGBA{uint8(seed), uint8(seed * 7), uint8(i), 255})
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// imagenetteMembers lays out an Imagenette-style tree (prefix/train|val/<class>/<image>), with a
// non-image file and directory entries, in an order that is not sorted.
func imagenetteMembers() (members []member, tree map[string][]byte) {
	tree = map[string][]byte{}
	members = []member{{name: "imagenette2-320/", typ: tar.TypeDir}, {name: "imagenette2-320/noisy_imagenette.csv", body: []byte("path,label\n")}}
	seed := 0
	for _, split := range []string{"val", "train"} {
		for _, class := range []string{"n03", "n01", "n02"} {
			members = append(members, member{name: "imagenette2-320/" + split + "/" + class + "/", typ: tar.TypeDir})
			for _, file := range []string{"b.JPEG", "a.JPEG", "c.png"} {
				seed++
				name := split + "/" + class + "/" + file
				members = append(members, member{name: "./imagenette2-320/" + name, body: pngOf(seed)})
				tree[name] = pngOf(seed)
			}
		}
	}
	return members, tree
}

// writeTree unpacks tree under a fresh directory and returns it.
func writeTree(t *testing.T, tree map[string][]byte) string {
	dir := t.TempDir()
	for name, body := range tree {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// records reads every example of src as (label, bytes) strings.
func records(t *testing.T, src Source) []string {
	t.Helper()
	var out []string
	for i := range src.Len() {
		ex, err := src.Example(i, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d:%x", ex.Label, ex.Encoded))
	}
	return out
}

func openArchive(t *testing.T, p string, opts ArchiveOptions) *Archive {
	t.Helper()
	a, err := OpenArchive(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// TestArchiveImagenette: an Imagenette .tgz (and the same tree as a plain .tar) reads as the
// ImageFolder of its unpacked tree: the same splits, classes, labels and image bytes; the plain tar
// in the same order, the compressed one in archive order.
func TestArchiveImagenette(t *testing.T) {
	members, tree := imagenetteMembers()
	unpacked := writeTree(t, tree)
	dir := t.TempDir()
	for _, gz := range []bool{false, true} {
		p := filepath.Join(dir, map[bool]string{false: "imagenette2-320.tar", true: "imagenette2-320.tgz"}[gz])
		writeTar(t, p, gz, members)
		if !IsArchive(p) {
			t.Fatalf("IsArchive(%s) = false", p)
		}
		a := openArchive(t, p, ArchiveOptions{})
		if len(a.Splits) != 2 || a.Splits[0].Name != "train" || a.Splits[1].Name != "val" {
			t.Fatalf("%s: splits %+v, want train and val", p, a.Splits)
		}
		for _, split := range a.Splits {
			folder, err := OpenImageFolder(filepath.Join(unpacked, split.Name))
			if err != nil {
				t.Fatal(err)
			}
			src := split.Source
			if !slices.Equal(src.ClassNames(), folder.ClassNames()) || src.Len() != folder.Len() {
				t.Fatalf("%s %s: classes %v (%d images), the unpacked tree's %v (%d)", p, split.Name, src.ClassNames(), src.Len(),
					folder.ClassNames(), folder.Len())
			}
			got, want := records(t, src), records(t, folder)
			if gz {
				slices.Sort(got)
				slices.Sort(want)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s %s: records differ from the unpacked tree's\n got %v\nwant %v", p, split.Name, got, want)
			}
			for i := range src.Len() {
				if ex, _ := src.Example(i, nil); ex.Label != src.Label(i) {
					t.Errorf("%s: Label(%d) %d, Example's %d", p, i, src.Label(i), ex.Label)
				}
			}
			if d := src.Describe(0); !strings.HasPrefix(d, p+": imagenette2-320/"+split.Name+"/") {
				t.Errorf("Describe(0) = %q", d)
			}
		}
	}
}

// TestArchiveStreamOrder: a compressed archive's images read in any order come back right (an earlier
// one restarts the stream), and from several goroutines.
func TestArchiveStreamOrder(t *testing.T) {
	members, _ := imagenetteMembers()
	p := filepath.Join(t.TempDir(), "x.tgz")
	writeTar(t, p, true, members)
	src := openArchive(t, p, ArchiveOptions{}).Splits[0].Source
	want := records(t, src)
	for _, i := range []int{5, 2, 2, 8, 0, 7} {
		ex, err := src.Example(i, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%d:%x", ex.Label, ex.Encoded); got != want[i] {
			t.Errorf("Example(%d) out of order differs from in order", i)
		}
	}
	done := make(chan error)
	for g := range 3 {
		go func() {
			for i := range src.Len() {
				ex, err := src.Example((i+g)%src.Len(), nil)
				if err == nil && fmt.Sprintf("%d:%x", ex.Label, ex.Encoded) != want[(i+g)%src.Len()] {
					err = fmt.Errorf("goroutine %d: example %d differs", g, (i+g)%src.Len())
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// ilsvrcTrain lays out ILSVRC2012_img_train.tar: one tar per class, named by its WordNet ID.
func ilsvrcTrain(t *testing.T) (members []member, tree map[string][]byte) {
	tree = map[string][]byte{}
	for c, wnid := range []string{"n02000002", "n01000001", "n03000003"} {
		var inner []member
		for k := range 3 - c%2 {
			name := fmt.Sprintf("%s_%d.JPEG", wnid, 10-k)
			inner = append(inner, member{name: name, body: pngOf(40 + 10*c + k)})
			tree[wnid+"/"+name] = pngOf(40 + 10*c + k)
		}
		members = append(members, member{name: wnid + ".tar", body: tarBytes(t, inner)})
	}
	return members, tree
}

// TestArchiveILSVRCTrain: a tar of per-class tars reads as one split whose classes are the inner
// tars' names, identical (order included) to the ImageFolder of the unpacked tree when the tar is
// plain, and the same records when it is compressed.
func TestArchiveILSVRCTrain(t *testing.T) {
	members, tree := ilsvrcTrain(t)
	folder, err := OpenImageFolder(writeTree(t, tree))
	if err != nil {
		t.Fatal(err)
	}
	want := records(t, folder)
	for _, gz := range []bool{false, true} {
		p := filepath.Join(t.TempDir(), "ILSVRC2012_img_train.tar")
		writeTar(t, p, gz, members)
		a := openArchive(t, p, ArchiveOptions{})
		if len(a.Splits) != 1 || a.Splits[0].Name != "" {
			t.Fatalf("splits %+v, want one", a.Splits)
		}
		src := a.Splits[0].Source
		if !slices.Equal(src.ClassNames(), []string{"n01000001", "n02000002", "n03000003"}) {
			t.Errorf("classes %v", src.ClassNames())
		}
		got := records(t, src)
		if gz {
			slices.Sort(got)
			want := slices.Clone(want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("compressed: records differ from the unpacked tree's")
			}
		} else if !slices.Equal(got, want) {
			t.Errorf("plain: records differ from the unpacked tree's (order included)\n got %v\nwant %v", got, want)
		}
		if d := src.Describe(0); !strings.Contains(d, ".tar: n0") || !strings.Contains(d, ".tar/n0") {
			t.Errorf("Describe(0) = %q", d)
		}
	}
}

// TestArchiveILSVRCVal: flat validation images are refused without labels and sorted into the
// labels' classes with them (from LOC_val_solution.csv and from a devkit archive).
func TestArchiveILSVRCVal(t *testing.T) {
	dir := t.TempDir()
	// The devkit's ground truth names ILSVRC2012_IDs; meta_plain.mat maps 1 -> n03000003, 2 -> n01000001,
	// 3 -> n02000002 (leaves) and 4, 5 to parents (scripts/make_meta_mat.py).
	ids := []int{2, 3, 1, 2, 1}
	wnidOf := map[int]string{1: "n03000003", 2: "n01000001", 3: "n02000002"}
	var members []member
	csv := "ImageId,PredictionString\n"
	var truth strings.Builder
	for i, id := range ids {
		name := fmt.Sprintf("ILSVRC2012_val_%08d", i+1)
		members = append(members, member{name: name + ".JPEG", body: pngOf(100 + i)})
		csv += fmt.Sprintf("%s,%s 1 2 3 4 %s 5 6 7 8 \n", name, wnidOf[id], wnidOf[id])
		fmt.Fprintln(&truth, id)
	}
	valTar := filepath.Join(dir, "ILSVRC2012_img_val.tar")
	writeTar(t, valTar, false, members)
	if _, err := OpenArchive(valTar, ArchiveOptions{}); err == nil || !strings.Contains(err.Error(), "LOC_val_solution.csv") {
		t.Fatalf("flat images without labels: err = %v, want one naming the labels to give", err)
	}
	csvPath := filepath.Join(dir, "LOC_val_solution.csv")
	os.WriteFile(csvPath, []byte(csv), 0o644)
	meta, err := os.ReadFile(filepath.Join("testdata", "devkit", "meta_compressed.mat"))
	if err != nil {
		t.Fatal(err)
	}
	devkit := filepath.Join(dir, "ILSVRC2012_devkit_t12.tar.gz")
	writeTar(t, devkit, true, []member{
		{name: "ILSVRC2012_devkit_t12/readme.txt", body: []byte("devkit")},
		{name: "ILSVRC2012_devkit_t12/data/meta.mat", body: meta},
		{name: "ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt", body: []byte(truth.String())},
	})
	var results [][]string
	for _, labelsPath := range []string{csvPath, devkit} {
		labels, err := ReadImageLabels(labelsPath)
		if err != nil {
			t.Fatal(err)
		}
		if labels.Len() != len(ids) {
			t.Errorf("%s: %d labelled images, want %d", labelsPath, labels.Len(), len(ids))
		}
		src := openArchive(t, valTar, ArchiveOptions{Labels: labels}).Splits[0].Source
		if !slices.Equal(src.ClassNames(), []string{"n01000001", "n02000002", "n03000003"}) {
			t.Errorf("%s: classes %v", labelsPath, src.ClassNames())
		}
		var labelOf []string
		for i := range src.Len() {
			ex, err := src.Example(i, nil)
			if err != nil {
				t.Fatal(err)
			}
			// The images are in class order; each must carry its ground truth's class.
			k := slices.IndexFunc(members, func(m member) bool { return bytes.Equal(m.body, ex.Encoded) })
			if got, want := src.ClassNames()[ex.Label], wnidOf[ids[k]]; got != want {
				t.Errorf("%s: %s labelled %s, want %s", labelsPath, members[k].name, got, want)
			}
			labelOf = append(labelOf, fmt.Sprintf("%s=%d", members[k].name, ex.Label))
		}
		results = append(results, labelOf)
	}
	if !slices.Equal(results[0], results[1]) {
		t.Errorf("the csv and the devkit label differently: %v vs %v", results[0], results[1])
	}
	// An image the labels do not name is an error naming both.
	writeTar(t, valTar, false, append(members, member{name: "ILSVRC2012_val_00000099.JPEG", body: pngOf(1)}))
	labels, _ := ReadImageLabels(csvPath)
	if _, err := OpenArchive(valTar, ArchiveOptions{Labels: labels}); err == nil || !strings.Contains(err.Error(), "ILSVRC2012_val_00000099.JPEG has no label") {
		t.Errorf("unlabelled image: err = %v", err)
	}
}

// TestArchiveRefusals: names that climb out or are absolute, links, too many members and a member
// too large are refused naming the member, before anything is allocated for it.
func TestArchiveRefusals(t *testing.T) {
	img := pngOf(1)
	cases := []struct {
		name    string
		members []member
		opts    ArchiveOptions
		want    string
	}{
		{"dotdot", []member{{name: "a/b/x.png", body: img}, {name: "a/../../etc/x.png", body: img}}, ArchiveOptions{}, "climbs out"},
		{"backslash dotdot", []member{{name: `a\..\..\x.png`, body: img}}, ArchiveOptions{}, "climbs out"},
		{"absolute", []member{{name: "/etc/x.png", body: img}}, ArchiveOptions{}, "absolute"},
		{"symlink", []member{{name: "c/x.png", typ: tar.TypeSymlink}}, ArchiveOptions{}, "not a regular file"},
		{"too many", []member{{name: "c/1.png", body: img}, {name: "c/2.png", body: img}, {name: "c/3.png", body: img}}, ArchiveOptions{MaxMembers: 2}, "more than 2 members"},
		{"too large", []member{{name: "c/1.png", body: img}}, ArchiveOptions{MaxMemberSize: 10}, "more than the 10"},
		{"no image", []member{{name: "c/readme.txt", body: []byte("x")}}, ArchiveOptions{}, "no .jpeg"},
		{"two roots", []member{{name: "a/c/1.png", body: img}, {name: "b/c/1.png", body: img}}, ArchiveOptions{}, "two roots"},
		{"split folders differing in case", []member{{name: "train/c/1.png", body: img}, {name: "Train/c/2.png", body: img}}, ArchiveOptions{}, `"train" and "Train" both make the train split`},
		{"two names of val", []member{{name: "train/c/1.png", body: img}, {name: "val/c/2.png", body: img}, {name: "test/c/3.png", body: img}}, ArchiveOptions{}, `"val" and "test" both make the val split`},
	}
	for _, c := range cases {
		for _, gz := range []bool{false, true} {
			p := filepath.Join(t.TempDir(), "x.tar")
			writeTar(t, p, gz, c.members)
			a, err := OpenArchive(p, c.opts)
			if err == nil {
				a.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s (gzip %v): err = %v, want one containing %q", c.name, gz, err, c.want)
			}
		}
	}
	// A truncated plain tar is an error at open, not a short image later.
	p := filepath.Join(t.TempDir(), "x.tar")
	writeTar(t, p, false, []member{{name: "c/1.png", body: img}})
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:512+len(img)-1], 0o644)
	if a, err := OpenArchive(p, ArchiveOptions{}); err == nil || !strings.Contains(err.Error(), "truncated") && !strings.Contains(err.Error(), "unexpected EOF") {
		if a != nil {
			a.Close()
		}
		t.Errorf("a truncated tar: err = %v, want one saying it is truncated", err)
	}
}

// TestArchivePacks: Pack takes an archive's split like any source, and the shards of a plain tar are
// byte-identical to those of the unpacked tree.
func TestArchivePacks(t *testing.T) {
	members, tree := ilsvrcTrain(t)
	p := filepath.Join(t.TempDir(), "ILSVRC2012_img_train.tar")
	writeTar(t, p, false, members)
	folder, err := OpenImageFolder(writeTree(t, tree))
	if err != nil {
		t.Fatal(err)
	}
	fromTree, err := Pack(folder, t.TempDir(), "train", PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := Pack(openArchive(t, p, ArchiveOptions{}).Splits[0].Source, t.TempDir(), "train", PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(fromTree[0])
	b, _ := os.ReadFile(fromTar[0])
	if !bytes.Equal(a, b) {
		t.Error("the shard packed from the tar differs from the one packed from the unpacked tree")
	}
}
