package data

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// damagedShards packs n 2×3 grey examples (example i's pixels start at i) into one pixel shard in a
// temporary folder, flips a byte of each record in bad, and opens the set.
func damagedShards(t *testing.T, n int, bad ...int) (*Shards, *Dataset, string) {
	t.Helper()
	ds := synthDataset(n)
	ds.Channels, ds.Images = 1, ds.Images[:n*6]
	out := t.TempDir()
	paths, err := Pack(NewDatasetSource(ds), out, "x", PackOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(paths[0])
	for _, i := range bad {
		raw[ShardHeaderSize+6*i+1] ^= 0x80
	}
	os.WriteFile(paths[0], raw, 0o644)
	sh, err := OpenShards(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sh, ds, paths[0]
}

// rows returns the first size rows of a uint8 batch, one slice per row.
func rows(b Batch, size int) [][]uint8 {
	var out [][]uint8
	for r := range b.Size {
		out = append(out, b.Pixels[r*size:(r+1)*size])
	}
	return out
}

// TestSkipBadRecordsInTraining: with SkipBadRecords a corrupt record's row takes the next example of
// the epoch's order, so the batch stays full; the skip is counted and named; Batch and Iterate (1 and
// 3 workers) give the same bytes. Without it the batch is an error naming the shard and record.
func TestSkipBadRecordsInTraining(t *testing.T) {
	sh, ds, path := damagedShards(t, 12, 2, 3)
	opts := LoaderOptions{BatchSize: 4, DropLast: true, Uint8: true, Workers: 1}
	l, err := NewSourceLoader(sh, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Batch(0, 0); err == nil || !strings.Contains(err.Error(), path+" record 2: CRC-32C") {
		t.Fatalf("stop policy: %v, want an error naming %s record 2", err, path)
	}
	opts.SkipBadRecords = true
	for _, workers := range []int{1, 3} {
		opts.Workers = workers
		l, err := NewSourceLoader(sh, opts)
		if err != nil {
			t.Fatal(err)
		}
		b, err := l.Batch(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Row 2 (record 2, bad) takes record 3 (bad too), then record 4; row 3 takes record 4.
		want := [][]uint8{ds.Image(0), ds.Image(1), ds.Image(4), ds.Image(4)}
		if b.Size != 4 || !slices.EqualFunc(rows(b, 6), want, slices.Equal) || !slices.Equal(b.Indices, []int{0, 1, 4, 4}) ||
			!slices.Equal(b.Labels, []int32{0, 1, 4, 4}) {
			t.Errorf("%d workers: size %d, indices %v, labels %v, rows %v", workers, b.Size, b.Indices, b.Labels, rows(b, 6))
		}
		var names []string
		for _, e := range b.Skipped {
			if !errors.Is(e, ErrBadRecord) {
				t.Errorf("skipped %v is not a bad record", e)
			}
			names = append(names, e.Error()[:strings.Index(e.Error(), ": CRC")])
		}
		rec := func(i int) string { return fmt.Sprintf("data: %s record %d", path, i) }
		if !slices.Equal(names, []string{rec(2), rec(3), rec(3)}) || l.Skipped() != 3 {
			t.Errorf("%d workers: skipped %q, count %d; want records 2, 3 (row 2) and 3 (row 3)", workers, names, l.Skipped())
		}
		it := l.Iterate(0, 0)
		ib, ok := it.Next()
		if !ok || !slices.Equal(ib.Pixels, b.Pixels) || !slices.Equal(ib.Indices, b.Indices) || len(ib.Skipped) != 3 {
			t.Errorf("%d workers: Iterate's batch differs from Batch's (%v, %v)", workers, ok, it.Err())
		}
		for ib, ok = it.Next(); ok; ib, ok = it.Next() {
			if len(ib.Skipped) != 0 || ib.Size != 4 {
				t.Errorf("step %d: %d skipped, size %d", ib.Step, len(ib.Skipped), ib.Size)
			}
		}
		it.Close()
		if it.Err() != nil || l.Skipped() != 6 {
			t.Errorf("%d workers: %v, %d skipped in all", workers, it.Err(), l.Skipped())
		}
	}
}

// TestSkipBadRecordsInEval: eval leaves a corrupt record out of its batch, so every good image counts
// once and none twice: the rows after it move up, Size shrinks and the freed row is zero.
func TestSkipBadRecordsInEval(t *testing.T) {
	sh, ds, _ := damagedShards(t, 10, 1)
	for _, uint8s := range []bool{true, false} {
		l, err := NewSourceLoader(sh, LoaderOptions{BatchSize: 4, Uint8: uint8s, Workers: 2, SkipBadRecords: true})
		if err != nil {
			t.Fatal(err)
		}
		var seen []int
		it := l.Iterate(0, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			seen = append(seen, b.Indices...)
			if b.Step == 0 {
				if b.Size != 3 || len(b.Skipped) != 1 || !slices.Equal(b.Labels, []int32{0, 2, 3, 0}) {
					t.Errorf("uint8 %v: size %d, labels %v, %d skipped", uint8s, b.Size, b.Labels, len(b.Skipped))
				}
				if uint8s && (!slices.Equal(b.Pixels[6:12], ds.Image(2)) || slices.ContainsFunc(b.Pixels[18:], func(v uint8) bool { return v != 0 })) {
					t.Errorf("rows moved up %v, padding %v", b.Pixels[6:12], b.Pixels[18:])
				}
				if !uint8s && slices.ContainsFunc(b.Images[18:], func(v float32) bool { return v != 0 }) {
					t.Errorf("float padding row not zero: %v", b.Images[18:])
				}
			}
		}
		it.Close()
		if it.Err() != nil || !slices.Equal(seen, []int{0, 2, 3, 4, 5, 6, 7, 8, 9}) {
			t.Errorf("uint8 %v: eval saw %v, %v", uint8s, seen, it.Err())
		}
	}
}

// TestSkipBadRecordsGivesUpOnARun: more than maxBadInARow bad records in a row for one training row is
// not damage here and there: the iteration ends with an error saying so.
func TestSkipBadRecordsGivesUpOnARun(t *testing.T) {
	var bad []int
	for i := range 20 {
		bad = append(bad, i)
	}
	sh, _, _ := damagedShards(t, 24, bad...)
	l, err := NewSourceLoader(sh, LoaderOptions{BatchSize: 4, DropLast: true, Workers: 1, SkipBadRecords: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Batch(0, 0); err == nil || !strings.Contains(err.Error(), "17 bad records in a row") || !errors.Is(err, ErrBadRecord) {
		t.Errorf("%v, want an error after 17 bad records", err)
	}
}

// TestSkipBadRecordsCoversDecodeErrors: an image file that does not decode is a bad record too: the
// loader stops naming it, or skips it.
func TestSkipBadRecordsCoversDecodeErrors(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []string{"a"}, 4, 8, 8)
	src, _ := OpenImageFolder(root)
	jp := src.Describe(1)
	raw, _ := os.ReadFile(jp)
	os.WriteFile(jp, raw[:len(raw)/3], 0o644)
	opts := LoaderOptions{BatchSize: 4, Workers: 1, Transform: &Transform{Size: 4}, DropLast: true}
	l, _ := NewSourceLoader(src, opts)
	if _, err := l.Batch(0, 0); err == nil || !strings.Contains(err.Error(), jp) || !errors.Is(err, ErrBadRecord) {
		t.Errorf("stop: %v", err)
	}
	opts.SkipBadRecords = true
	l, _ = NewSourceLoader(src, opts)
	b, err := l.Batch(0, 0)
	if err != nil || !slices.Equal(b.Indices, []int{0, 2, 2, 3}) || len(b.Skipped) != 1 || !strings.Contains(b.Skipped[0].Error(), jp) {
		t.Errorf("skip: indices %v, skipped %v, %v", b.Indices, b.Skipped, err)
	}
}
