//go:build !(linux && (amd64 || arm64))

package data

// readImageFile reads the regular file at filepath.Join(root, name) into buf (grown to its size).
func readImageFile(root, name string, buf []byte) ([]byte, error) {
	return readImageFileOS(root, name, buf)
}
