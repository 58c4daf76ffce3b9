package stats

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writePerImage(t *testing.T, path string, classes int, recs [][2]int) {
	t.Helper()
	w, err := CreatePerImage(path, classes)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Add(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPerImageRoundTripAndCompare writes two files, checks the documented byte layout and pairs them.
func TestPerImageRoundTripAndCompare(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.perimage"), filepath.Join(dir, "b.perimage")
	// label, prediction: A right on 0,1,2,5; B right on 0,3,4,5 → both 0,5; only A 1,2; only B 3,4; both wrong 6.
	labels := []int{0, 1, 2, 3, 4, 300, 7}
	writePerImage(t, a, 1000, [][2]int{{0, 0}, {1, 1}, {2, 2}, {3, 9}, {4, 9}, {300, 300}, {7, 8}})
	writePerImage(t, b, 1000, [][2]int{{0, 0}, {1, 2}, {2, 3}, {3, 3}, {4, 4}, {300, 300}, {7, 999}})
	raw, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 24+4*len(labels) || string(raw[:4]) != "TRPI" || raw[4] != 1 || raw[8] != 0xe8 || raw[9] != 0x03 || raw[16] != 7 {
		t.Fatalf("header % x", raw[:24])
	}
	if raw[24+4*5] != 0x2c || raw[24+4*5+1] != 0x01 || raw[24+4*5+2] != 0x2c { // label 300 = 0x012c, little-endian
		t.Fatalf("record 5: % x", raw[24+4*5:24+4*6])
	}
	r, err := OpenPerImage(a)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range labels {
		l, _, ok, err := r.Next()
		if err != nil || !ok || l != want {
			t.Fatalf("record %d: label %d ok %v err %v, want %d", i, l, ok, err, want)
		}
	}
	if _, _, ok, err := r.Next(); ok || err != nil {
		t.Fatalf("past the end: ok %v err %v", ok, err)
	}
	r.Close()
	p, err := ComparePerImage(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := Paired{Images: 7, BothRight: 2, OnlyA: 2, OnlyB: 2, BothWrong: 1}
	if p != want || p.RightA() != 4 || p.RightB() != 4 || p.PValue() != 1 {
		t.Fatalf("paired %+v, want %+v with p 1", p, want)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temporaries left behind: %v", entries)
	}
}

// TestComparePerImageRefusesMismatchedFiles: other class counts, lengths, orders, truncation and foreign
// files are refused with an error naming the file.
func TestComparePerImageRefusesMismatchedFiles(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	writePerImage(t, p("a"), 10, [][2]int{{1, 1}, {2, 3}})
	writePerImage(t, p("classes"), 11, [][2]int{{1, 1}, {2, 3}})
	writePerImage(t, p("short"), 10, [][2]int{{1, 1}})
	writePerImage(t, p("order"), 10, [][2]int{{2, 3}, {1, 1}})
	raw, _ := os.ReadFile(p("a"))
	os.WriteFile(p("truncated"), raw[:len(raw)-2], 0o644)
	os.WriteFile(p("foreign"), []byte("PK\x03\x04 this is a zip archive, not results"), 0o644)
	for _, c := range []struct{ other, want string }{
		{"classes", "10 classes"},
		{"short", "holds 2 images"},
		{"order", "not the same images in the same order"},
		{"truncated", "truncated"},
		{"foreign", "not a per-image result file"},
	} {
		_, err := ComparePerImage(p("a"), p(c.other))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("compare with %s: %v, want an error saying %q", c.other, err, c.want)
		}
	}
}

// TestPerImageWriterLeavesNothingOnBadRecord: a record outside the class range fails, and no file
// appears at the path.
func TestPerImageWriterLeavesNothingOnBadRecord(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x")
	w, err := CreatePerImage(path, 5)
	if err != nil {
		t.Fatal(err)
	}
	w.Add(1, 1)
	if err := w.Add(5, 1); err == nil || !strings.Contains(err.Error(), "outside [0, 5)") {
		t.Fatalf("Add(5, 1): %v", err)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after a bad record succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	if _, err := CreatePerImage(path, 70000); err == nil {
		t.Error("70000 classes accepted")
	}
}
