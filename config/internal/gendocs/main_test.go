package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDocsAreGenerated: the key tables in docs/ are what config.Keys renders, so a key's default or
// meaning cannot change in one place only. After changing config/keys.go or Defaults: go generate ./config.
func TestDocsAreGenerated(t *testing.T) {
	pages, err := render(filepath.Join("..", "..", "..", "docs"))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range pages {
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from its generated key table: run go generate ./config", path)
		}
	}
}
