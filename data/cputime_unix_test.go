//go:build unix

package data

import (
	"syscall"
	"time"
)

// processCPU is the user + system time the process has used: per image, it shows what a worker
// costs whatever else the machine runs, and whether a second worker adds work (GC, contention).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
