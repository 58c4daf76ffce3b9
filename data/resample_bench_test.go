//go:build unix

package data

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user + system time so far (every thread: GC, the runtime, cgo).
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkPipelineCPU is BenchmarkDecodeRandomResizedCrop's pipeline (Loader.decode on one
// goroutine: read, decode, RandomResizedCrop(224), flip, normalise) reporting images per second of
// the process's CPU time as well as of wall time: on a shared machine, being descheduled inflates
// the wall second but not the CPU one. scripts/pil_augment_bench.py's peer figure is
// time.process_time() over the same loop. TRAINER_BENCH_JPEGS as for BenchmarkDecodeRandomResizedCrop.
func BenchmarkPipelineCPU(b *testing.B) {
	dir := os.Getenv("TRAINER_BENCH_JPEGS")
	if dir == "" {
		dir = b.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	paths := benchJPEGs(b, dir, 64)
	files := &ImageFolder{Root: "/", Classes: []string{"x"}}
	for _, p := range paths {
		files.Files, files.Labels = append(files.Files, p), append(files.Labels, 0)
	}
	for _, interp := range []Interp{Bilinear, Bicubic} {
		b.Run(interp.String(), func(b *testing.B) {
			l, err := NewSourceLoader(files, LoaderOptions{BatchSize: 1, Shuffle: true, Mean: []float32{0.485, 0.456, 0.406},
				Std: []float32{0.229, 0.224, 0.225}, Transform: &Transform{Size: 224, Train: true, Scale: [2]float64{0.08, 1},
					Ratio: [2]float64{3.0 / 4, 4.0 / 3}, HFlip: 0.5, Interp: interp}})
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]float32, 224*224*3)
			sc := &augScratch{}
			if _, err := l.decode(sc, 0, 0, 0, dst); err != nil { // grow the scratch buffers
				b.Fatal(err)
			}
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for i := range b.N {
				if _, err := l.decode(sc, i/len(paths), i, i%len(paths), dst); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime(b) - cpu0
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "images/s")
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "images/cpu-s")
		})
	}
}
