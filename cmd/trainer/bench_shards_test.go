package main

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// bench CONFIG --data shards times the recipe's loop from packed shards beside its resident step, and
// accounts for the loop's time: the parts add up to the wall time and the rates to the batches.
func TestBenchShards(t *testing.T) {
	tree, packed := t.TempDir(), t.TempDir()
	writeTree(t, tree)
	var out, errOut bytes.Buffer
	if err := cmdData([]string{"pack", tree, packed}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	args := []string{"../../configs/resnet50_sgd.yaml", "--data", "shards", "--size", "32", "--width", "0.125",
		"--batch", "2", "--steps", "2", "--backend", "go", "--set", "data.source=shards",
		"--set", "data.train=" + filepath.Join(packed, "train"), "--set", "net.num_classes=2", "--set", "data.workers=1"}
	out.Reset()
	if err := cmdBench(append(args, "--json"), &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var rep struct {
		Config, Data, Net string
		Batch             int
		Resident          float64 `json:"resident_images_per_s"`
		Fed               float64 `json:"fed_images_per_s"`
		FedMS             float64 `json:"fed_ms_per_micro_batch"`
		Ratio             float64 `json:"fed_over_resident"`
		Micro             int     `json:"micro_batches"`
		WallS             float64 `json:"wall_s"`
		FeedWaitS         float64 `json:"feed_wait_s"`
		DispatchS         float64 `json:"dispatch_s"`
		DrainS            float64 `json:"drain_s"`
		HostOtherS        float64 `json:"host_other_s"`
		SyncFed           float64 `json:"sync_fed_images_per_s"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if rep.Data != "shards" || rep.Net != "resnet50" || rep.Batch != 2 || rep.Micro != 2 {
		t.Fatalf("report %s", out.String())
	}
	if rep.Resident <= 0 || rep.Fed <= 0 || rep.SyncFed <= 0 || math.Abs(rep.Ratio-rep.Fed/rep.Resident) > 1e-9*rep.Ratio {
		t.Errorf("rates: resident %g, fed %g (ratio %g), sync %g", rep.Resident, rep.Fed, rep.Ratio, rep.SyncFed)
	}
	if d := rep.Fed*rep.FedMS/1000/2 - 1; math.Abs(d) > 1e-9 {
		t.Errorf("%g images/s inconsistent with %g ms per batch of 2", rep.Fed, rep.FedMS)
	}
	parts := rep.FeedWaitS + rep.DispatchS + rep.DrainS + rep.HostOtherS
	if rep.WallS <= 0 || math.Abs(parts-rep.WallS) > 1e-9 || rep.DispatchS <= 0 || rep.FeedWaitS < 0 || rep.DrainS < 0 {
		t.Errorf("time: wall %g, feed %g + dispatch %g + drain %g + other %g", rep.WallS, rep.FeedWaitS, rep.DispatchS, rep.DrainS, rep.HostOtherS)
	}
	out.Reset()
	if err := cmdBench(args, &out, &errOut); err != nil || !strings.Contains(out.String(), "× resident") ||
		!strings.Contains(out.String(), "waiting for the feed") {
		t.Errorf("text report: %v\n%s", err, out.String())
	}
	if err := cmdBench([]string{"--net", "mlp", "--data", "shards"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "CONFIG") {
		t.Errorf("--data shards without a CONFIG: %v", err)
	}
}
