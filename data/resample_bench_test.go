//go:build unix

package data

import (
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
	paths := pipelineJPEGs(b)
	for _, interp := range []Interp{Bilinear, Bicubic} {
		b.Run(interp.String(), func(b *testing.B) {
			l, sc, dst := pipelineLoader(b, paths, interp)
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
