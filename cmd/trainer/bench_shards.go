package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/trainer"
)

// benchShards is `trainer bench CONFIG --data shards`: the recipe's whole loop — its data source
// decoded and augmented by the loader's workers, prefetched to the device, the step dispatched, the
// results drained — beside the same compiled step on one batch kept on the device
// (trainer.BenchLoop), where the loop's time went, and the loop that reads every micro-batch without
// prefetching. recipe names the CONFIG.
func benchShards(stdout io.Writer, cfg config.Config, recipe string, steps int, asJSON bool) error {
	if recipe == "" {
		return errors.New("bench: --data shards times a recipe's loop from its data: give a CONFIG")
	}
	rep, err := trainer.BenchLoop(cfg, steps)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Config string `json:"config"`
			Data   string `json:"data"`
			trainer.LoopBench
		}{recipe, "shards", rep})
	}
	workers := fmt.Sprint(rep.Workers)
	if rep.Workers == 0 {
		workers = "one per core"
	}
	fmt.Fprintf(stdout, "%s (%s) batch=%d size=%d %s, data.source %s, decode workers %s; compile %.1f s\n",
		recipe, rep.Net, rep.Batch, rep.Size, rep.Precision, rep.Source, workers, rep.CompileS)
	fmt.Fprintf(stdout, "resident step: %.1f ms/micro-batch, %.0f images/s (one batch on the device)\n", rep.ResidentMS, rep.ResidentImagesPS)
	fmt.Fprintf(stdout, "fed loop:      %.1f ms/micro-batch, %.0f images/s = %.2f× resident (%d micro-batches after the first; pipeline start %.2f s)\n",
		rep.FedMS, rep.FedImagesPS, rep.Ratio, rep.Micro, rep.StartupS)
	pct := func(s float64) float64 { return 100 * s / rep.WallS }
	fmt.Fprintf(stdout, "where the loop's %.2f s went: device (step dispatch) %.0f%%, waiting for the feed %.0f%%, reading results %.0f%%, rest of the host loop %.0f%%; host→device copies %.2f s on the prefetcher, overlapped\n",
		rep.WallS, pct(rep.DispatchS), pct(rep.FeedWaitS), pct(rep.DrainS), pct(rep.HostOtherS), rep.TransferS)
	fmt.Fprintf(stdout, "the loop reading every micro-batch, no prefetch: %.0f images/s (%.2f× the loop above), waiting for the feed %.2f s\n",
		rep.SyncFedImagesPS, rep.SyncFedImagesPS/rep.FedImagesPS, rep.SyncFeedWaitS)
	return nil
}
