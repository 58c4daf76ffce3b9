package data

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// benchJPEGs writes n ImageNet-like JPEGs (about 400x350, quality 90: smooth shapes plus noise, so
// they compress like photographs) into dir, once, and returns their paths.
func benchJPEGs(b testing.TB, dir string, n int) []string {
	b.Helper()
	var paths []string
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("img%03d.jpg", i))
		paths = append(paths, p)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		w, h := 380+rng.IntN(60), 330+rng.IntN(50)
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		fx, fy, ph := 0.01+0.05*rng.Float64(), 0.01+0.05*rng.Float64(), 6*rng.Float64()
		for y := range h {
			for x := range w {
				s := math.Sin(float64(x)*fx+ph) * math.Cos(float64(y)*fy)
				n := rng.IntN(24)
				img.Set(x, y, color.RGBA{uint8(120 + 90*s + float64(n)), uint8(100 + 60*math.Sin(float64(x+y)*0.02) + float64(n)),
					uint8(128 - 80*s + float64(n)), 255})
			}
		}
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		jpeg.Encode(f, img, &jpeg.Options{Quality: 90})
		f.Close()
	}
	return paths
}

// BenchmarkDecodeRandomResizedCrop is one core's rate of the training input pipeline at 224: read,
// decode, RandomResizedCrop (bilinear or bicubic), flip, normalise, with each decoder: libjpeg-turbo
// (when its library loads), the same with Transform.FastDecode, and Go's image/jpeg. -benchmem shows
// the worker's allocations per image (none with libjpeg-turbo once its buffers have grown).
// TRAINER_BENCH_JPEGS keeps the generated JPEGs in that folder for the PIL peer
// (scripts/pil_augment_bench.py).
func BenchmarkDecodeRandomResizedCrop(b *testing.B) {
	paths := pipelineJPEGs(b)
	// The same JPEGs recoded with a restart marker after every MCU, as `trainer data pack` stores them.
	marked := make([]string, len(paths))
	markedDir := b.TempDir()
	for i, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		out, ok, err := AddRestartMarkers(raw, 1)
		if !ok || err != nil {
			b.Fatalf("%s: restart markers not added (%v)", p, err)
		}
		marked[i] = filepath.Join(markedDir, filepath.Base(p))
		if err := os.WriteFile(marked[i], out, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, dec := range []string{"turbo", "turbo-fast", "turbo-markers", "turbo-markers-fast", "go"} {
		if dec != "go" && !turboLoaded() {
			continue
		}
		files := paths
		if strings.HasPrefix(dec, "turbo-markers") {
			files = marked
		}
		for _, interp := range []Interp{Bilinear, Bicubic} {
			b.Run(dec+"/"+interp.String(), func(b *testing.B) {
				l, sc, dst := pipelineLoader(b, files, interp)
				l.opts.Transform.FastDecode = strings.HasSuffix(dec, "-fast")
				if dec == "go" {
					sc.turbo, sc.noTurbo = nil, true
				}
				for i := range 2 * len(files) { // grow the buffers to the largest image
					if _, err := l.decode(sc, 0, i, i%len(files), dst); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				cpu0 := processCPU()
				b.ResetTimer()
				for i := range b.N {
					if _, err := l.decode(sc, i/len(files), i, i%len(files), dst); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
				b.ReportMetric((processCPU()-cpu0).Seconds()*1e3/float64(b.N), "cpu-ms/image")
			})
		}
	}
}

// pipelineJPEGs writes (or, with TRAINER_BENCH_JPEGS, keeps in that folder for the PIL peer) the 64
// generated JPEGs of the input-pipeline benchmarks.
func pipelineJPEGs(b *testing.B) []string {
	dir := os.Getenv("TRAINER_BENCH_JPEGS")
	if dir == "" {
		dir = b.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	return benchJPEGs(b, dir, 64)
}

// pipelineLoader is the training pipeline at 224 over paths (RandomResizedCrop with interp, flip,
// ImageNet normalisation), one example at a time, with its scratch grown by one decode.
func pipelineLoader(b *testing.B, paths []string, interp Interp) (*Loader, *augScratch, []float32) {
	files := &ImageFolder{Root: "/", Classes: []string{"x"}}
	for _, p := range paths {
		files.Files, files.Labels = append(files.Files, p), append(files.Labels, 0)
	}
	l, err := NewSourceLoader(files, LoaderOptions{BatchSize: 1, Shuffle: true, Mean: []float32{0.485, 0.456, 0.406},
		Std: []float32{0.229, 0.224, 0.225}, Transform: &Transform{Size: 224, Train: true, Scale: [2]float64{0.08, 1},
			Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5, Interp: interp}})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]float32, 224*224*3)
	sc := &augScratch{}
	if _, err := l.decode(sc, 0, 0, 0, dst); err != nil {
		b.Fatal(err)
	}
	return l, sc, dst
}

// downgradeShard rewrites the shard at path as format version 1 (16-byte index entries, no per-record
// CRC-32C), as packers before version 2 wrote it: the benchmarks' "without the check".
func downgradeShard(b *testing.B, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	info, err := ParseShard(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		b.Fatal(err)
	}
	le := binary.LittleEndian
	var tail []byte
	for i := range info.Count {
		tail = le.AppendUint64(tail, uint64(info.Offsets[i]))
		tail = le.AppendUint32(tail, uint32(info.Len(i)))
		tail = le.AppendUint32(tail, uint32(info.Labels[i]))
	}
	h := info.ShardHeader
	h.Version, h.ClassesOffset = 1, h.IndexOffset+int64(len(tail))
	tail = append(tail, raw[info.ClassesOffset:]...)
	h.FileSize, h.IndexCRC = h.IndexOffset+int64(len(tail)), crc32.Checksum(tail, castagnoli)
	out := append(h.encode(), raw[ShardHeaderSize:h.IndexOffset]...)
	if err := os.WriteFile(path, append(out, tail...), 0o644); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkShardRecordCRC is the cost of checking each record's CRC-32C as the loader reads it: the
// checksum alone (crc-only), then the same records from a version 2 shard (checked) and a version 1 shard (not), through
// Loader.Batch on one goroutine. pixels: 2048 CIFAR-sized 32×32×3 records straight into uint8
// batches, the cheapest path there is, so the check weighs the most; jpeg: the 64 ImageNet-like JPEGs
// through RandomResizedCrop at 224, as training reads them.
func BenchmarkShardRecordCRC(b *testing.B) {
	pix := synthDataset(2048)
	pix.Height, pix.Width, pix.Channels = 32, 32, 3
	pix.Images = make([]uint8, 2048*32*32*3)
	for i := range pix.Images {
		pix.Images[i] = uint8(i * 7)
	}
	jpegs := &ImageFolder{Root: "/", Classes: []string{"x"}}
	for _, p := range pipelineJPEGs(b) {
		jpegs.Files, jpegs.Labels = append(jpegs.Files, p), append(jpegs.Labels, 0)
	}
	// The check alone: CRC-32C of one record's bytes (SSE4.2 on amd64).
	for _, n := range []int{32 * 32 * 3, 64 << 10} {
		b.Run(fmt.Sprintf("crc-only/%dB", n), func(b *testing.B) {
			rec := make([]byte, n)
			b.SetBytes(int64(n))
			for range b.N {
				crc32.Checksum(rec, castagnoli)
			}
		})
	}
	for _, set := range []struct {
		name string
		src  Source
		opts LoaderOptions
	}{
		{"pixels", NewDatasetSource(pix), LoaderOptions{BatchSize: 256, Uint8: true}},
		{"jpeg", jpegs, LoaderOptions{BatchSize: 16, Transform: &Transform{Size: 224, Train: true, Scale: [2]float64{0.08, 1},
			Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5}}},
	} {
		dir := b.TempDir()
		paths, err := Pack(set.src, dir, "b", PackOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, version := range []string{"v2-checked", "v1-unchecked"} {
			if version == "v1-unchecked" {
				for _, p := range paths {
					downgradeShard(b, p)
				}
			}
			b.Run(set.name+"/"+version, func(b *testing.B) {
				sh, err := OpenShards(dir)
				if err != nil {
					b.Fatal(err)
				}
				defer sh.Close()
				if (sh.Infos[0].CRCs != nil) != (version == "v2-checked") {
					b.Fatalf("%s: version %d", version, sh.Infos[0].Version)
				}
				l, err := NewSourceLoader(sh, set.opts)
				if err != nil {
					b.Fatal(err)
				}
				steps := l.StepsPerEpoch()
				b.ResetTimer()
				for i := range b.N {
					if _, err := l.Batch(0, i%steps); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*set.opts.BatchSize), "ns/record")
			})
		}
	}
}

// BenchmarkLoaderWorkers is the loader's rate with 1 and 2 decode workers over the 64 ImageNet-like
// JPEGs (RandomResizedCrop(224), flip, normalise, batches of 16), for each decoder: on N free cores
// N workers should give N times one worker's images/s. -benchmem shows allocations per image.
func BenchmarkLoaderWorkers(b *testing.B) {
	paths := pipelineJPEGs(b)
	// 16 passes over the files per epoch, so the batch buffers (allocated in the first epoch, reused
	// by the next) weigh little per image.
	files := &ImageFolder{Root: "/", Classes: []string{"x"}}
	for range 16 {
		for _, p := range paths {
			files.Files, files.Labels = append(files.Files, p), append(files.Labels, 0)
		}
	}
	for _, dec := range []string{"turbo", "go"} {
		if dec == "turbo" && !turboLoaded() {
			continue
		}
		for _, run := range []struct {
			workers int
			spare   bool // GOMAXPROCS one above the workers, as SpareProcForDecode sets for a run
		}{{1, false}, {2, false}, {2, true}} {
			workers, name := run.workers, fmt.Sprintf("%s/workers=%d", dec, run.workers)
			if run.spare {
				if dec == "go" {
					continue // image/jpeg makes no foreign calls
				}
				name += "/spare-proc"
			}
			b.Run(name, func(b *testing.B) {
				if run.spare {
					defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(workers + 1))
				}
				l, err := NewSourceLoader(files, LoaderOptions{BatchSize: 16, Shuffle: true, DropLast: true, Workers: workers,
					Mean: []float32{0.485, 0.456, 0.406}, Std: []float32{0.229, 0.224, 0.225},
					Transform: &Transform{Size: 224, Train: true, Scale: [2]float64{0.08, 1}, Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5}})
				if err != nil {
					b.Fatal(err)
				}
				workersUseGo = dec == "go"
				defer func() { workersUseGo = false }()
				images := 0
				b.ReportAllocs()
				cpu0 := processCPU()
				b.ResetTimer()
				for epoch := 0; images < b.N; epoch++ {
					it := l.Iterate(epoch, 0)
					for batch, ok := it.Next(); ok && images < b.N; batch, ok = it.Next() {
						images += len(batch.Labels)
					}
					it.Close()
					if err := it.Err(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(images)/b.Elapsed().Seconds(), "images/s")
				b.ReportMetric((processCPU()-cpu0).Seconds()*1e3/float64(images), "cpu-ms/image")
			})
		}
	}
}
