package data

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// MaxShards bounds the shards one Pack writes: a shard size far below the images' (`--shard-size 1`)
// would otherwise write a file per image, tens of thousands of them.
var MaxShards = 10000

// PackOptions configures Pack.
type PackOptions struct {
	// Resize, for encoded sources, bounds the shorter side: larger images are resized (bilinear,
	// antialiased) so it equals Resize and re-encoded as JPEG at Quality; smaller ones are stored as
	// they are. 0 stores every file as it is (after checking it decodes).
	Resize  int
	Quality int // JPEG quality of re-encoded images; 0 means 90
	// RestartMCUs > 0 recodes each baseline JPEG losslessly with restart markers that cut its rows
	// into pieces of at least that many MCUs (AddRestartMarkers), so that a RandomResizedCrop
	// decodes only the pieces its box needs; the pixels stay the same. A JPEG that cannot be recoded
	// (progressive, already marked, a scan only image/jpeg's leniency reads) is stored as it is.
	RestartMCUs int
	// ShardSize is the size at which a shard is closed and the next begun; 0 means 1 GiB.
	ShardSize int64
	// MaxImagePixels refuses an encoded image whose header declares more pixels, before decoding it;
	// 0 means DefaultMaxImagePixels.
	MaxImagePixels int64
	// Overwrite lets Pack write into a non-empty outDir: once the new shards are complete they replace
	// the *.shard files there (other files are left alone). Without it a non-empty outDir is refused.
	Overwrite bool
	// Workers check, resize and recode the images, in parallel and in order (0: GOMAXPROCS).
	Workers int
	// Progress, if set, is called after each example with the number done, the total and the bytes written.
	Progress func(done, total int, bytes int64)
}

// Pack writes every example of src, in order, into shards OUT/PREFIX-NNNNN-of-MMMMM.shard and returns
// their paths. A source with a FixedShape (CIFAR-10, the Imagenette .bin files, idx) is packed as
// pixels; any other as encoded bytes, each checked to decode, so a corrupt file stops the pack with
// its path. The shards are written as temporary files and renamed once all are complete, so a
// failed pack leaves outDir as it was.
func Pack(src Source, outDir, prefix string, opts PackOptions) ([]string, error) {
	if opts.ShardSize <= 0 {
		opts.ShardSize = 1 << 30
	}
	if opts.Quality == 0 {
		opts.Quality = 90
	}
	if opts.Quality < 1 || opts.Quality > 100 || opts.Resize < 0 || opts.RestartMCUs < 0 {
		return nil, fmt.Errorf("data: pack: quality %d, resize %d, restart MCUs %d: want quality in [1, 100], resize >= 0, restart MCUs >= 0",
			opts.Quality, opts.Resize, opts.RestartMCUs)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, fmt.Errorf("data: pack: %w", err)
	}
	entries, err := os.ReadDir(outDir)
	if err != nil {
		return nil, fmt.Errorf("data: pack: %w", err)
	}
	if len(entries) > 0 && !opts.Overwrite {
		return nil, fmt.Errorf("data: pack: %s is not empty (%d entries, e.g. %s): pack into a new folder, or overwrite "+
			"(--overwrite) to replace the shards there", outDir, len(entries), entries[0].Name())
	}
	var old []string // the shards the new ones replace
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ShardExt) {
			old = append(old, filepath.Join(outDir, e.Name()))
		}
	}
	kind, h, w, c := ShardEncoded, 0, 0, 0
	if fs, ok := src.(FixedShape); ok {
		if h, w, c = fs.Shape(); h > 0 {
			kind = ShardPixels
		}
	}
	if kind == ShardEncoded && opts.Resize > 0 {
		h, w = opts.Resize, opts.Resize
	}
	classes := src.ClassNames()
	if len(classes) != src.NumClasses() {
		classes = make([]string, src.NumClasses())
		for i := range classes {
			classes[i] = fmt.Sprint(i)
		}
	}
	var tmpPaths []string
	var sw *ShardWriter
	var written int64
	fail := func(err error) ([]string, error) {
		if sw != nil {
			sw.f.Close()
		}
		for _, p := range tmpPaths {
			os.Remove(p)
		}
		return nil, err
	}
	examples := packExamples(src, kind, h, w, c, opts)
	defer examples.stop()
	for i := range src.Len() {
		if sw == nil {
			if len(tmpPaths) == MaxShards {
				return fail(fmt.Errorf("data: pack: a shard size of %d bytes makes more than %d shards (%d of the %d examples packed): "+
					"expected a larger shard size (--shard-size)", opts.ShardSize, MaxShards, i, src.Len()))
			}
			p := filepath.Join(outDir, fmt.Sprintf("%s-%05d%s.tmp", prefix, len(tmpPaths), ShardExt))
			var err error
			if sw, err = CreateShard(p, kind, classes, h, w, c); err != nil {
				return fail(err)
			}
			tmpPaths = append(tmpPaths, p)
		}
		it := <-examples.items
		<-it.done
		if it.err != nil {
			return fail(it.err)
		}
		if it.fail != nil {
			examples.stop() // src is not read while its Describe names the example
			return fail(it.fail(src.Describe(i)))
		}
		payload := it.payload
		if err := sw.Add(it.label, payload); err != nil {
			return fail(err)
		}
		written += int64(len(payload)) + shardIndexEntry
		if sw.Size() >= opts.ShardSize || i == src.Len()-1 {
			err := sw.Finish(len(tmpPaths)-1, len(tmpPaths)) // the count is fixed once all are written
			sw = nil
			if err != nil {
				return fail(err)
			}
		}
		if opts.Progress != nil {
			opts.Progress(i+1, src.Len(), written)
		}
	}
	if len(tmpPaths) == 0 {
		return nil, fmt.Errorf("data: pack: the source is empty")
	}
	var paths []string
	for k, p := range tmpPaths {
		if err := setShardNumber(p, k, len(tmpPaths)); err != nil {
			return fail(err)
		}
		final := filepath.Join(outDir, fmt.Sprintf("%s-%05d-of-%05d%s", prefix, k, len(tmpPaths), ShardExt))
		if err := os.Rename(p, final); err != nil {
			return fail(fmt.Errorf("data: pack: %w", err))
		}
		paths = append(paths, final)
	}
	for _, p := range old {
		if slices.Contains(paths, p) {
			continue // renamed over
		}
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("data: pack: removing the old shard %s (the new set is complete): %w", p, err)
		}
	}
	return paths, nil
}

// packItem is one example as a shard stores it, or what stops the pack: err, the source's error
// reading it, or fail, which makes the error to report from the example's description.
type packItem struct {
	label   int32
	payload []byte
	err     error
	fail    func(desc string) error
	done    chan struct{} // closed once the fields are set
}

// packPipeline reads a source's examples in order on one goroutine and checks, resizes and recodes
// them on several (the decoding and recoding are most of a pack's CPU); items carries them in order.
type packPipeline struct {
	items    chan *packItem
	quit     chan struct{}
	readDone chan struct{}
	once     sync.Once
}

// stop ends the pipeline and waits until the source is no longer being read.
func (p *packPipeline) stop() {
	p.once.Do(func() { close(p.quit) })
	<-p.readDone
}

// packExamples starts the pipeline over src for a shard of kind (h, w, c: the pixel shape, or the
// resize bound), with opts.Workers workers (GOMAXPROCS if 0).
func packExamples(src Source, kind ShardKind, h, w, c int, opts PackOptions) *packPipeline {
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	p := &packPipeline{items: make(chan *packItem, 4*workers), quit: make(chan struct{}), readDone: make(chan struct{})}
	type job struct {
		ex   Example
		item *packItem
	}
	jobs := make(chan job, workers)
	go func() {
		defer close(p.readDone)
		defer close(jobs)
		for i := range src.Len() {
			it := &packItem{done: make(chan struct{})}
			select {
			case p.items <- it:
			case <-p.quit:
				return
			}
			ex, err := src.Example(i, nil)
			if err != nil {
				it.err = err
				close(it.done)
				return
			}
			select {
			case jobs <- job{ex, it}:
			case <-p.quit:
				return
			}
		}
	}()
	for range workers {
		go func() {
			var s packScratch
			for j := range jobs {
				j.item.label = j.ex.Label
				j.item.payload, j.item.fail = s.pack(j.ex, kind, h, w, c, opts)
				close(j.item.done)
			}
		}()
	}
	return p
}

// packScratch is a pack worker's buffers.
type packScratch struct {
	dec, tmp, out []uint8
}

// pack returns ex's payload as a shard of kind stores it: pixels checked against the set's shape;
// encoded bytes checked to decode, resized and re-encoded when opts.Resize asks, and recoded with
// restart markers when opts.RestartMCUs does. On failure fail, given the example's description,
// makes the error to report.
func (s *packScratch) pack(ex Example, kind ShardKind, h, w, c int, opts PackOptions) (payload []byte, fail func(desc string) error) {
	if kind != ShardEncoded {
		if ex.Height != h || ex.Width != w || ex.Channels != c {
			return nil, func(desc string) error {
				return fmt.Errorf("data: pack: %s is %dx%dx%d, the set is %dx%dx%d", desc, ex.Height, ex.Width, ex.Channels, h, w, c)
			}
		}
		return ex.Pixels, nil
	}
	payload = ex.Encoded
	img, _, err := DecodeImage(ex.Encoded, opts.MaxImagePixels)
	if errors.Is(err, ErrTooManyPixels) {
		return nil, func(desc string) error { return fmt.Errorf("data: pack: %s: %w", desc, err) }
	}
	if err != nil {
		return nil, func(desc string) error {
			return fmt.Errorf("data: pack: %s does not decode: %w (JPEG and PNG are supported)", desc, err)
		}
	}
	if b := img.Bounds(); opts.Resize > 0 && min(b.Dx(), b.Dy()) > opts.Resize {
		p := toPixelsInto(img, 3, s.dec)
		s.dec = p.pix
		nw, nh, err := resizedSize(p.w, p.h, float64(opts.Resize), opts.MaxImagePixels)
		if err != nil {
			return nil, func(desc string) error { return fmt.Errorf("data: pack: %s: %w", desc, err) }
		}
		r := resize(p, nw, nh, Bilinear, &s.tmp, &s.out)
		var eb bytes.Buffer
		if err := jpeg.Encode(&eb, pixelsImage(r), &jpeg.Options{Quality: opts.Quality}); err != nil {
			return nil, func(desc string) error { return fmt.Errorf("data: pack: encoding %s: %w", desc, err) }
		}
		payload = eb.Bytes()
	}
	if opts.RestartMCUs > 0 {
		if marked, ok, _ := AddRestartMarkers(payload, opts.RestartMCUs); ok {
			payload = marked
		}
	}
	return payload, nil
}

// pixelsImage wraps 8-bit pixels as an image for the encoders.
func pixelsImage(p pixels) image.Image {
	if p.c == 1 {
		return &image.Gray{Pix: p.pix, Stride: p.w, Rect: image.Rect(0, 0, p.w, p.h)}
	}
	img := image.NewNRGBA(image.Rect(0, 0, p.w, p.h))
	for i := range p.w * p.h {
		copy(img.Pix[4*i:4*i+3], p.pix[3*i:3*i+3])
		img.Pix[4*i+3] = 255
	}
	return img
}

// SourceKinds are the names OpenSource accepts.
var SourceKinds = []string{"imagefolder", "shards", "cifar10", "imagenette-bin"}

// SourceOptions are what some source kinds need besides a path.
type SourceOptions struct {
	// Height and Width of the imagenette-bin records (0: inferred as square from the file length).
	Height, Width int
	// NumClasses of imagenette-bin (0: 10).
	NumClasses int
	// Dataset names the known dataset (KnownDatasets) the path should hold, and Dir its folder
	// (data.dir): a missing path then says how to get that dataset.
	Dataset, Dir string
}

// OpenSource opens one split of a dataset: kind is one of SourceKinds and path the split's folder
// (imagefolder: ROOT/<class>/*; shards: a folder of *.shard files or one file), the CIFAR-10 folder
// with split "train" or "test", or an imagenette-bin file. A missing path is reported with how to make one.
func OpenSource(kind, path, split string, opts SourceOptions) (Source, error) {
	if _, err := os.Stat(path); err != nil {
		hint := "pack an ImageFolder tree with `trainer data pack SRC OUT` (OUT/train and OUT/val are the shard folders)"
		switch kind {
		case "imagefolder":
			hint = "want a folder of class folders, e.g. imagenette2/train (ROOT/<class>/<image>.JPEG)"
		case "cifar10":
			hint = "want the folder of CIFAR-10's binary batches (cifar-10-binary.tar.gz unpacked)"
		case "imagenette-bin":
			hint = "want the book's prepared Imagenette train.bin or val.bin"
		}
		if d, ok := LookupDataset(opts.Dataset); ok {
			hint = "to get " + d.Name + ": " + d.HowToGet(opts.Dir)
		}
		return nil, fmt.Errorf("data: %s %s not found: %s; %s", kind, split, path, hint)
	}
	switch kind {
	case "imagefolder":
		return OpenImageFolder(path)
	case "shards":
		return OpenShards(path)
	case "cifar10":
		ds, err := LoadCIFAR10(path, split)
		if err != nil {
			return nil, err
		}
		return NewDatasetSource(ds), nil
	case "imagenette-bin":
		ds, err := LoadImagenetteBin(path, opts.Height, opts.Width, opts.NumClasses)
		if err != nil {
			return nil, err
		}
		return NewDatasetSource(ds), nil
	}
	return nil, fmt.Errorf("data: unknown source kind %q, want one of %s", kind, strings.Join(SourceKinds, ", "))
}
