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
batch after batch (--device-normalize: uint8 pixels, as a run on the xla backends hands to the device).
Prints images/s, images per CPU-second (the process's user + system time, so
a busy machine does not lower it) and, with --target-images-per-sec, the cores that rate needs.`,
		Args: cobra.ExactArgs(1),
	}
	var f dataBenchFlags
	fs := cmd.Flags()
	fs.StringVar(&f.Source, "source", "imagefolder", "what SPLIT is, `imagefolder|shards`: a folder of class folders, or of shards")
	fs.IntVar(&f.Size, "size", 224, "output resolution `S`")
	fs.IntVar(&f.Batch, "batch", 64, "batch size `N`")
	fs.IntVar(&f.Batches, "batches", 20, "batches `K` to time (after one warm-up batch)")
	fs.IntVar(&f.Workers, "workers", 0, "decode workers `N` (0: one per core)")
	fs.StringVar(&f.Interpolation, "interpolation", "bilinear", "resampling filter `bilinear|bicubic`")
	fs.BoolVar(&f.FastDecode, "fast-decode", false, "decode as data.fast_decode does (libjpeg-turbo's fast IDCT and upsampling)")
	fs.BoolVar(&f.DeviceNormalize, "device-normalize", false, "hand over uint8 pixels, as data.device_normalize does (the default on the xla backends): no normalisation on the host")
	fs.Float64Var(&f.TargetImagesPerSec, "target-images-per-sec", 0, "also print the cores that would feed `R` images/s (a GPU's step rate, from trainer bench)")
	cmd.RunE = func(cmd *cobra.Command, positional []string) error {
		return dataBenchMain(f, positional, cmd.OutOrStdout())
	}
	return cmd
}

// dataBenchFlags are `trainer data bench`'s flags, one field per flag.
type dataBenchFlags struct {
	Source             string  // --source
	Size               int     // --size
	Batch              int     // --batch
	Batches            int     // --batches
	Workers            int     // --workers
	Interpolation      string  // --interpolation
	FastDecode         bool    // --fast-decode
	DeviceNormalize    bool    // --device-normalize
	TargetImagesPerSec float64 // --target-images-per-sec
}

// dataBenchMain times the training input pipeline as a run uses it: the loader's parallel workers
// reading SPLIT, decoding, RandomResizedCrop + flip at --size and normalising, batch after batch.
func dataBenchMain(f dataBenchFlags, positional []string, stdout io.Writer) error {
	if f.TargetImagesPerSec < 0 {
		return fmt.Errorf("data bench: --target-images-per-sec %g, want >= 0", f.TargetImagesPerSec)
	}
	if f.Source != "imagefolder" && f.Source != "shards" {
		return fmt.Errorf("data bench: --source %q, expected imagefolder or shards", f.Source)
	}
	if f.Size < 8 || f.Batch < 1 || f.Batches < 1 {
		return errors.New("data bench: --size must be >= 8, --batch and --batches >= 1")
	}
	// A run's bounds (net.image_size, data.batch_size, data.workers), checked before the loader
	// allocates its batches.
	if f.Size > config.MaxImageSize || f.Batch > data.MaxBatchSize || f.Workers < 0 || f.Workers > data.MaxWorkers {
		return fmt.Errorf("data bench: --size %d, --batch %d, --workers %d: expected a size of at most %d, a batch of at most %d and 0 to %d workers",
			f.Size, f.Batch, f.Workers, config.MaxImageSize, data.MaxBatchSize, data.MaxWorkers)
	}
	if v := config.BatchValues(f.Batch, [3]int{f.Size, f.Size, 3}); v > config.MaxBatchValues {
		return fmt.Errorf("data bench: --batch %d at --size %d: %d pixel values a batch, expected at most %d (8 GiB as float32)", f.Batch, f.Size, v, int64(config.MaxBatchValues))
	}
	in, err := data.ParseInterp(f.Interpolation)
	if err != nil {
		return fmt.Errorf("data bench: --interpolation: %w", err)
	}
	src, err := data.OpenSource(f.Source, positional[0], "train", data.SourceOptions{})
	if err != nil {
		return fmt.Errorf("data bench: %w", err)
	}
	l, err := data.NewSourceLoader(src, data.LoaderOptions{
		BatchSize: f.Batch, Shuffle: true, DropLast: true, Seed: 1, Workers: f.Workers, Uint8: f.DeviceNormalize,
		Mean: []float32{0.485, 0.456, 0.406}, Std: []float32{0.229, 0.224, 0.225},
		Transform: &data.Transform{Size: f.Size, Train: true, Scale: [2]float64{0.08, 1},
			Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5, Interp: in, FastDecode: f.FastDecode},
	})
	if err != nil {
		return fmt.Errorf("data bench: %w", err)
	}
	threads := f.Workers
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	procs := data.SpareProcForDecode(threads) // as a run on a device does: see data.SpareProcForDecode
	var images int
	var start time.Time
	var cpu0 time.Duration
	for epoch := 0; images < f.Batches*f.Batch; epoch++ {
		it := l.Iterate(epoch, 0)
		for b, ok := it.Next(); ok; b, ok = it.Next() {
			if start.IsZero() {
				start, cpu0 = time.Now(), cpuTime() // the first batch warms the workers up
				continue
			}
			images += len(b.Labels)
			if images >= f.Batches*f.Batch {
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
	if f.FastDecode {
		decoder += ", fast decode"
	}
	last := "normalise"
	if l.Uint8() {
		last = "uint8 (normalised on the device)"
	}
	fmt.Fprintf(stdout, "%s (%d images): decode (%s) + RandomResizedCrop(%d, %s) + flip + %s: %.0f images/s with %d workers on %d cores (GOMAXPROCS %d)\n",
		positional[0], src.Len(), decoder, f.Size, f.Interpolation, last, rate, threads, runtime.NumCPU(), procs)
	if cpu > 0 { // else this platform does not give the process's CPU time
		perCore := float64(images) / cpu
		fmt.Fprintf(stdout, "per core: %.0f images per CPU-second (%.1f CPU-seconds for %d images); %.0f images/s per worker\n",
			perCore, cpu, images, rate/float64(min(threads, runtime.NumCPU())))
		if f.TargetImagesPerSec > 0 {
			fmt.Fprintf(stdout, "%.0f images/s needs %d cores at this rate per core\n", f.TargetImagesPerSec, int(math.Ceil(f.TargetImagesPerSec/perCore)))
		}
	}
	fmt.Fprintln(stdout, data.JPEGDecoderNote())
	return nil
}
