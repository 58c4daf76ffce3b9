package data

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestManySmallShardsOpenLazily: a set of more shards than maxOpenShards (pack --shard-size 1 writes a
// shard per image) opens, reads every record, and never holds more than maxOpenShards files open
// (before: one descriptor per shard from the start, and "too many open files" past the limit).
func TestManySmallShardsOpenLazily(t *testing.T) {
	n := maxOpenShards + 36
	ds := synthDataset(n)
	ds.Channels, ds.Images = 1, ds.Images[:n*6] // 2x3 grey
	out := t.TempDir()
	paths, err := Pack(NewDatasetSource(ds), out, "x", PackOptions{ShardSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != n {
		t.Fatalf("%d shards, want one per record (%d)", len(paths), n)
	}
	sh, err := OpenShards(out)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if got := sh.openCount(); got != 0 {
		t.Errorf("%d files open after OpenShards, want none until a record is read", got)
	}
	for pass := range 2 {
		for i := range n {
			ex, err := sh.Example(i, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ex.Pixels, ds.Image(i)) {
				t.Fatalf("pass %d record %d: %v, want %v", pass, i, ex.Pixels, ds.Image(i))
			}
			if got := sh.openCount(); got > maxOpenShards {
				t.Fatalf("%d files open, more than %d", got, maxOpenShards)
			}
		}
	}
	if err := sh.Close(); err != nil || sh.openCount() != 0 {
		t.Errorf("Close: %v, %d files still open", err, sh.openCount())
	}
}

// TestPackRefusesTooManyShards: a shard size that would make more than MaxShards shards stops the
// pack with an error saying so, and leaves no shard behind.
func TestPackRefusesTooManyShards(t *testing.T) {
	defer func(old int) { MaxShards = old }(MaxShards)
	MaxShards = 5
	ds := synthDataset(8)
	ds.Channels, ds.Images = 1, ds.Images[:8*6]
	out := t.TempDir()
	_, err := Pack(NewDatasetSource(ds), out, "x", PackOptions{ShardSize: 1})
	if err == nil || !strings.Contains(err.Error(), "more than 5 shards") || !strings.Contains(err.Error(), "--shard-size") {
		t.Errorf("8 one-record shards with at most 5: %v", err)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a refused pack left %d files", len(entries))
	}
}
