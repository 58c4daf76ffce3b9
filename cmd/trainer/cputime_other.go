//go:build !unix

package main

import "time"

// cpuTime is not measured on this platform: data bench then prints no per-core figures.
func cpuTime() time.Duration { return 0 }
