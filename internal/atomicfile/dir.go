package atomicfile

import (
	"fmt"
	"os"
)

// ReplaceDir puts the complete directory staged in place of dir, so that dir holds either its old
// content or all of staged's, and removes the old content. staged must be beside dir (the same file
// system). Where the kernel can exchange two names at once (Linux's RENAME_EXCHANGE) there is no moment
// without dir; elsewhere dir is renamed aside first, and a crash between the two renames leaves the
// old content at the name ReplaceDir's error (or the directory listing) shows.
func ReplaceDir(staged, dir string) error {
	if err := exchange(staged, dir); err == nil {
		return removeOld(staged, dir)
	}
	aside := staged + ".old"
	if err := os.Rename(dir, aside); err != nil {
		return fmt.Errorf("replacing %s: %w", dir, err)
	}
	if err := os.Rename(staged, dir); err != nil {
		if back := os.Rename(aside, dir); back != nil {
			return fmt.Errorf("replacing %s: %w; its old content is at %s", dir, err, aside)
		}
		return fmt.Errorf("replacing %s: %w", dir, err)
	}
	return removeOld(aside, dir)
}

func removeOld(old, dir string) error {
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("%s is replaced; removing its old content at %s: %w", dir, old, err)
	}
	return nil
}
