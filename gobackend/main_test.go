package gobackend

import (
	"flag"
	"os"
	"testing"

	"github.com/trainer/trainer/gobackend/kernels"
)

// TestMain shares out every op with more than one chunk of work between the cores however short its
// work, unless benchmarks run (they time the threshold a user gets): the tests' inputs are small, and
// the split paths must give the same bits as the whole ones.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		kernels.SetSplitMinNs(0)
	}
	os.Exit(m.Run())
}
