//go:build !((linux || darwin) && (amd64 || arm64) && !nolibturbojpeg)

package data

// turboHasV3 reports whether the loaded TurboJPEG library has the TurboJPEG 3 API: there is none here.
func turboHasV3() bool { return false }
