package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/data"
)

// newDataBenchCommand declares `trainer data bench` and its flags.
func newDataBenchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench SPLIT",
		Short: "Time the training input pipeline on a split",
		Long: `Times the training input pipeline as a run uses it: the loader's parallel workers reading SPLIT
(e.g. imagenette2/train or shards/train), decoding, RandomResizedCrop + flip at --size and normalising,
batch after batch. Prints images/s, images per CPU-second (the process's user + system time, so
a busy machine does not lower it) and, with --target-images-per-sec, the cores that rate needs.`,
		Args: cobra.ExactArgs(1),
	}
	fs := cmd.Flags()
	source := fs.String("source", "imagefolder", "what SPLIT is, `imagefolder|shards`: a folder of class folders, or of shards")
	size := fs.Int("size", 224, "output resolution `S`")
	batch := fs.Int("batch", 64, "batch size `N`")
	batches := fs.Int("batches", 20, "batches `K` to time (after one warm-up batch)")
	workers := fs.Int("workers", 0, "decode workers `N` (0: one per core)")
	interp := fs.String("interpolation", "bilinear", "resampling filter `bilinear|bicubic`")
	fast := fs.Bool("fast-decode", false, "decode as data.fast_decode does (libjpeg-turbo's fast IDCT and upsampling)")
	target := fs.Float64("target-images-per-sec", 0, "also print the cores that would feed `R` images/s (a GPU's step rate, from trainer bench)")
	cmd.RunE = func(cmd *cobra.Command, positional []string) error {
		return dataBenchMain(positional, cmd.OutOrStdout(), source, size, batch, batches, workers, interp, fast, target)
	}
	return cmd
}

// dataBenchMain times the training input pipeline as a run uses it: the loader's parallel workers
// reading SPLIT, decoding, RandomResizedCrop + flip at --size and normalising, batch after batch.
func dataBenchMain(positional []string, stdout io.Writer, source *string, size, batch, batches, workers *int, interp *string, fast *bool, target *float64) error {
	if *target < 0 {
		return fmt.Errorf("data bench: --target-images-per-sec %g, want >= 0", *target)
	}
	if *source != "imagefolder" && *source != "shards" {
		return fmt.Errorf("data bench: --source %q, expected imagefolder or shards", *source)
	}
	if *size < 8 || *batch < 1 || *batches < 1 {
		return errors.New("data bench: --size must be >= 8, --batch and --batches >= 1")
	}
	// A run's bounds (net.image_size, data.batch_size, data.workers), checked before the loader
	// allocates its batches.
	if *size > config.MaxImageSize || *batch > data.MaxBatchSize || *workers < 0 || *workers > data.MaxWorkers {
		return fmt.Errorf("data bench: --size %d, --batch %d, --workers %d: expected a size of at most %d, a batch of at most %d and 0 to %d workers",
			*size, *batch, *workers, config.MaxImageSize, data.MaxBatchSize, data.MaxWorkers)
	}
	in, err := data.ParseInterp(*interp)
	if err != nil {
		return fmt.Errorf("data bench: --interpolation: %w", err)
	}
	src, err := data.OpenSource(*source, positional[0], "train", data.SourceOptions{})
	if err != nil {
		return fmt.Errorf("data bench: %w", err)
	}
	l, err := data.NewSourceLoader(src, data.LoaderOptions{
		BatchSize: *batch, Shuffle: true, DropLast: true, Seed: 1, Workers: *workers,
		Mean: []float32{0.485, 0.456, 0.406}, Std: []float32{0.229, 0.224, 0.225},
		Transform: &data.Transform{Size: *size, Train: true, Scale: [2]float64{0.08, 1},
			Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5, Interp: in, FastDecode: *fast},
	})
	if err != nil {
		return fmt.Errorf("data bench: %w", err)
	}
	threads := *workers
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	var images int
	var start time.Time
	var cpu0 time.Duration
	for epoch := 0; images < *batches**batch; epoch++ {
		it := l.Iterate(epoch, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			if start.IsZero() {
				start, cpu0 = time.Now(), cpuTime() // the first batch warms the workers up
				continue
			}
			images += len(b.Labels)
			if images >= *batches**batch {
				break
			}
		}
		it.Close()
		if err := it.Err(); err != nil {
			return fmt.Errorf("data bench: %w", err)
		}
	}
	elapsed, cpu := time.Since(start).Seconds(), (cpuTime() - cpu0).Seconds()
	rate := float64(images) / elapsed
	decoder := data.JPEGDecoder()
	if *fast {
		decoder += ", fast decode"
	}
	fmt.Fprintf(stdout, "%s (%d images): decode (%s) + RandomResizedCrop(%d, %s) + flip + normalise: %.0f images/s with %d workers on %d cores\n",
		positional[0], src.Len(), decoder, *size, *interp, rate, threads, runtime.NumCPU())
	if cpu > 0 { // else this platform does not give the process's CPU time
		perCore := float64(images) / cpu
		fmt.Fprintf(stdout, "per core: %.0f images per CPU-second (%.1f CPU-seconds for %d images); %.0f images/s per worker\n",
			perCore, cpu, images, rate/float64(min(threads, runtime.NumCPU())))
		if *target > 0 {
			fmt.Fprintf(stdout, "%.0f images/s needs %d cores at this rate per core\n", *target, int(math.Ceil(*target/perCore)))
		}
	}
	fmt.Fprintln(stdout, data.JPEGDecoderNote())
	return nil
}
